"""The verdict's evidence: which framework a test command runs, and the harness's signed report.

The agent makes a :class:`~.evidence.TestHarness` for every sandbox (a fresh
key each time), a runner hands its settings to the harness inside the sandbox
(:func:`harness_settings`), and the agent reads what came back
(:func:`verified`): a line that is not signed with that sandbox's key, or
out of order, makes the report ``tampered``, and a report without its ``end``
line is ``missing``. Either fails the run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import PurePosixPath

import attrs

from ..model import SandboxJob, SandboxOutcome, SeedProject
from . import output_tests
from .evidence import OUTCOME_RANKS, GuardFinding, TestCaseResult, TestHarness, TestReport
from .grading import grade, is_graded

#: The most a harness's report may hold; a larger one is ``tampered``.
MAX_REPORT_BYTES = 8 * 1024 * 1024
#: The most tests a report may list, and guard findings it may hold.
MAX_TESTS = 100_000
MAX_FINDINGS = 50
_PYTHONS = re.compile(r"python(3(\.\d+)?)?")
_UNITTEST_IMPORT = re.compile(rb"^\s*(import\s+unittest|from\s+unittest[\s.])", re.MULTILINE)


def framework_of(test_command: Sequence[str], files: Mapping[str, bytes]) -> str | None:
    """The framework whose report the harness reads for ``test_command``, or ``None``.

    ``python -m unittest ...`` is ``unittest``; ``python -m pytest ...``,
    ``pytest ...`` and ``py.test ...`` are ``pytest``; ``python FILE.py ...``
    where the seed file ``FILE.py`` imports ``unittest`` is ``unittest-script``
    (a script that calls ``unittest.main()``). Anything else (another program,
    interpreter options before ``-m``) is judged by its exit status alone.
    """
    if not test_command:
        return None
    program = PurePosixPath(test_command[0]).name
    if program in ("pytest", "py.test"):
        return "pytest"
    if not _PYTHONS.fullmatch(program) or len(test_command) < 2:
        return None
    if test_command[1] == "-m" and len(test_command) > 2:
        return {"unittest": "unittest", "pytest": "pytest"}.get(test_command[2])
    script = test_command[1]
    if script.endswith(".py") and _UNITTEST_IMPORT.search(files.get(script, b"")):
        return "unittest-script"
    return None


def seed_framework(seed: SeedProject, files: Mapping[str, bytes] | None = None) -> str | None:
    """:func:`framework_of` the seed's test command, a script of a git seed's tree included."""
    files = dict(files or {})
    script = seed.test_command[1] if len(seed.test_command) > 1 else ""
    if script.endswith(".py") and script not in files and script in seed.files:
        files.update(seed.read_tree_files([script]))
    return framework_of(seed.test_command, files)


def harness_for(seed: SeedProject, files: Mapping[str, bytes]) -> TestHarness:
    """A new harness for one sandbox testing ``files`` of ``seed``, with a key of its own."""
    return TestHarness(
        key=os.urandom(32).hex(),
        framework=seed_framework(seed, files),
        editable=seed.editable_files,
        tests=seed.test_files,
        allow=seed.guard_allow,
    )


def harness_settings(
    job: SandboxJob,
    argv: Sequence[str],
    report_fd: int,
    *,
    writable: Sequence[str],
    report_path: str | None = None,
) -> bytes:
    """What the harness reads from its setup descriptor (or file), as JSON.

    :param argv: the test command as the sandbox runs it (``python`` resolved).
    :param report_fd: the descriptor, inside the sandbox, of the report pipe's write end;
        -1 when the harness writes its report to ``report_path`` instead.
    :param writable: the folders the test may write in the sandbox (its working folder and
        temporary folders, absolute or relative to the working folder): code the guard finds
        there, other than the seed's own files, is untrusted.
    :param report_path: a file the harness creates for its report (relative to the test's
        folder), for a runner that reads it back once the test has ended.
    """
    harness = job.harness
    settings: dict[str, object] = {
        "argv": list(argv),
        "framework": harness.framework if harness else None,
        "key": harness.key if harness else os.urandom(32).hex(),
        "report_fd": report_fd,
        "report_path": report_path,
        "editable": list(harness.editable) if harness else [],
        "tests": list(harness.tests) if harness else [],
        "files": sorted(job.files),
        "allow": list(harness.allow) if harness else [],
        "writable": list(writable),
        "probes": [attrs.asdict(probe) for probe in job.output_probes],
        "probe_timeout": probe_timeout(job),
    }
    if job.session is not None:
        # One command of a session: run it, end what it left, hand back the files.
        settings["collect"] = {
            "timeout": job.session.timeout_seconds,
            "max_bytes": job.session.max_bytes,
            "max_files": job.session.max_files,
            "max_path_bytes": job.session.max_path_bytes,
            "longest_path": job.session.longest_path,
        }
    return json.dumps(settings).encode("utf-8")


def probe_timeout(job: SandboxJob) -> float:
    """The seconds each output test's probe may take: an equal share of the test's time,
    with a share left for the test command."""
    return job.limits.test_timeout_seconds / (len(job.output_probes) + 1)


def verified(job: SandboxJob, outcome: SandboxOutcome) -> SandboxOutcome:
    """``outcome`` with its ``test_report`` made from the harness's report (which it drops);
    an outcome verified already is returned as it is."""
    if outcome.test_report is not None:
        return outcome
    harness = job.harness
    if harness is None or harness.framework is None or outcome.report is None:
        report = TestReport(framework=None, status="exit-status")
    else:
        report = read_report(outcome.report, harness)
    probes = output_tests.probe_prefix(outcome.report) if job.output_probes else None
    return attrs.evolve(outcome, report=None, test_report=report, output_report=probes)


def read_report(text: str, harness: TestHarness) -> TestReport:
    """The evidence in the harness's report ``text``, checked line by line against its key."""
    framework = harness.framework
    if len(text.encode("utf-8", errors="replace")) > MAX_REPORT_BYTES:
        return TestReport(framework, "tampered", detail="the framework's report is too large")
    key = bytes.fromhex(harness.key)
    tests: dict[str, TestCaseResult] = {}
    guard: list[GuardFinding] = []
    status = "missing"
    detail: str | None = "the test ended before the framework's report"
    probes = 0  # the output tests' lines, which come first, numbered in a series of their own
    for number, line in enumerate(text.splitlines(), start=1):
        record = _signed(line, key)
        output = record is not None and record.get("kind") == "output"
        if output and probes == number - 1 and record and record.get("seq") == number:
            probes += 1
            continue
        # The probes' lines come before any of the framework's, or they are not the harness's.
        if record is None or output or record.get("seq") != number - probes or status != "missing":
            detail = "the framework's report was not the harness's (a line is not signed)"
            return TestReport(framework, "tampered", tuple(tests.values()), tuple(guard), detail)
        kind = record.get("kind")
        if kind == "test" and len(tests) < MAX_TESTS:
            test = _test(record)
            # A test reported twice (a subtest, a teardown error) keeps its worst outcome.
            if test is not None and _rank(test) >= _rank(tests.get(test.id)):
                tests[test.id] = test
        elif kind == "guard" and len(guard) < MAX_FINDINGS:
            guard.append(
                GuardFinding(
                    capability=str(record.get("capability", "")),
                    event=str(record.get("event", "")),
                    detail=str(record.get("detail", ""))[:300],
                )
            )
        elif kind == "end":
            status, detail = "complete", None
        elif kind == "aborted":
            status, detail = "aborted", str(record.get("reason", "aborted"))[:300]
    return TestReport(framework, status, tuple(tests.values()), tuple(guard), detail)


def signed_lines(text: str, key: str) -> Iterator[dict[str, object] | None]:
    """Each line of a harness's report, checked against ``key`` (hex) and its place in the
    series: the record, or ``None`` for a line the harness did not write there."""
    raw = bytes.fromhex(key)
    for number, line in enumerate(text.splitlines(), start=1):
        record = _signed(line, raw)
        yield record if record is not None and record.get("seq") == number else None


def _signed(line: str, key: bytes) -> dict[str, object] | None:
    mac, _, body = line.partition(" ")
    expected = hmac.new(key, body.encode("utf-8", errors="replace"), hashlib.sha256).hexdigest()
    # As bytes: compare_digest refuses a str that is not ASCII, which code under test may write.
    if not hmac.compare_digest(mac.encode("utf-8", errors="replace"), expected.encode()):
        return None
    try:
        record = json.loads(body)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _test(record: Mapping[str, object]) -> TestCaseResult | None:
    seconds = record.get("seconds", 0.0)
    try:
        return TestCaseResult(
            id=str(record.get("id", ""))[:1000],
            outcome=str(record.get("outcome")),
            seconds=float(seconds) if isinstance(seconds, int | float) else 0.0,
        )
    except ValueError:
        return None


def _rank(test: TestCaseResult | None) -> int:
    return -1 if test is None else OUTCOME_RANKS[test.outcome]


def judged(seed: SeedProject, job: SandboxJob, outcome: SandboxOutcome) -> SandboxOutcome:
    """``outcome`` with :attr:`~.model.SandboxOutcome.output_tests` judged from the
    harness's report (before the report is verified and dropped); whatever a runner put
    there is replaced."""
    key = job.harness.key if job.harness is not None else None
    report = outcome.report if outcome.report is not None else outcome.output_report
    results = output_tests.compare_all(seed.output_tests, report, key)
    return attrs.evolve(outcome, output_tests=results)


def graded(
    outcome: SandboxOutcome, seed: SeedProject, known: Collection[str] | None = None
) -> SandboxOutcome:
    """``outcome`` with its grade against ``seed``'s lists (``None`` for a seed without any,
    whatever the runner put there): the grade is the agent's, made from the verified
    report, never a runner's. ``known``: as :func:`grade` takes it."""
    if not is_graded(seed):
        return outcome if outcome.grade is None else attrs.evolve(outcome, grade=None)
    stopped = None
    if outcome.timed_out:
        stopped = "the test timed out"
    elif outcome.limit_hit is not None:
        stopped = f"the {outcome.limit_hit} limit stopped the test"
    found = grade(
        outcome.test_report, seed.fail_to_pass, seed.pass_to_pass, stopped=stopped, known=known
    )
    return attrs.evolve(outcome, grade=found)

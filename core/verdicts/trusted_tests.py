"""The tests a verdict needs, known before any patch runs: the trusted list.

A framework's report says which tests ran and how each ended, but the code under
test runs in the same process as the framework: it can leave a failing test out
of the run, turn it into a skip or an expected failure, or add a test of its own
that passes. So a pass does not rest on what the patched run happened to report.
Before the first patch is tested, the seed's own code and tests run once,
unpatched, in a sandbox of the same runner (:func:`list_tests`); every test
that run reported is *needed*, with the outcome it had. A patched run passes only
when every needed test is reported, by its ID, ``passed`` (:func:`checked`); a
test the unpatched seed skipped or expected to fail (by its own decorator: the
unpatched code is the seed author's) may stay so. A test the list does not name
counts for nothing towards a pass, and still fails the run if it fails.

The list is kept in the state folder, beside the run records, by the seed's
content (its files, test command, runtime, tree, limits and the harness
itself), so the second run of a seed pays nothing for it. A graded seed
(``fail_to_pass``, ``pass_to_pass``) needs no such run: its lists are the
trusted list, and :mod:`.grading` holds a run to them.

Where the unpatched seed cannot tell every test (a test module it cannot import,
a run that does not end), the list holds the tests it did report and is
*partial*: the verdict then also needs every reported test to pass, as before,
and says the list is partial.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from ..model import SandboxJob, SeedProject
from ..protocols import PreparingRunner, Runner
from ..records.planner_calls import state_directory, write_private_file
from ..serialization import converter
from .evidence import OUTCOME_RANKS, NeededTest, TestList, TestReport, UnmetTest
from .grading import is_graded, may_be_cut
from .verdict import harness_for, seed_framework, verified

#: Where the lists are kept, in the state folder beside the run records.
FOLDER = "test-lists"
#: Bumped when what a list means changes, so older cached lists are not read.
FORMAT = 1
#: How a test ID that names a load error rather than a test starts (unittest).
_LOAD_ERRORS = ("unittest.loader._FailedTest.", "unittest.loader.ModuleImportFailure.")


def content_key(seed: SeedProject, files: Mapping[str, bytes], runner: str) -> str:
    """A digest of everything the unpatched run's report depends on."""
    from .. import harness

    digest = hashlib.sha256()
    parts = {
        "format": FORMAT,
        "runner": runner,
        "command": list(seed.test_command),
        "framework": seed_framework(seed, files),
        "editable": list(seed.editable_files),
        "tests": list(seed.test_files),
        "allow": list(seed.guard_allow),
        "runtime": converter().unstructure(seed.runtime),
        "tree": converter().unstructure(seed.source),
        "limits": converter().unstructure(seed.limits),
        # The agent's own Python is the sandbox's when the seed names no runtime.
        "python": sys.version if seed.runtime is None else None,
        "harness": {n: hashlib.sha256(t).hexdigest() for n, t in harness.files().items()},
        "files": {p: hashlib.sha256(files[p]).hexdigest() for p in sorted(files)},
    }
    digest.update(json.dumps(parts, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where lists are kept: ``$XDG_STATE_HOME/sandboxed-coding-agent/test-lists``, beside
    the run records whose verdicts rest on them."""
    return state_directory(environ) / FOLDER


def needs_list(seed: SeedProject, files: Mapping[str, bytes]) -> bool:
    """Whether a verdict on ``seed`` rests on a list from its unpatched run: a test command
    of a framework the harness reads, and no ``fail_to_pass``/``pass_to_pass`` lists."""
    return not is_graded(seed) and seed_framework(seed, files) is not None


def needs_known(seed: SeedProject, files: Mapping[str, bytes]) -> bool:
    """Whether grading ``seed`` needs the tests its unpatched run reports: its lists hold a
    name that may be cut short (:func:`~.grading.may_be_cut`), which stands only for tests
    that run reported too."""
    listed = (*seed.fail_to_pass, *seed.pass_to_pass)
    return (
        is_graded(seed)
        and any(may_be_cut(test_id) for test_id in listed)
        and seed_framework(seed, files) is not None
    )


def list_tests(
    seed: SeedProject,
    files: Mapping[str, bytes],
    runner: Runner,
    *,
    environ: Mapping[str, str] = os.environ,
    progress: Callable[[str], None] | None = None,
    cached: bool = True,
    prepare: bool = False,
) -> TestList:
    """The trusted list of ``seed`` whose unpatched files are ``files``: from the cache, or
    from a run of the unpatched seed in a sandbox of ``runner`` (then cached).

    :param prepare: have a :class:`~.protocols.PreparingRunner` prepare the job first
        (a run has done so already; ``agent seeds tests`` has not).
    :raises SandboxError: the sandbox failed for a reason other than the test.
    """
    key = content_key(seed, files, runner.name)
    path = cache_root(environ) / f"{key}.json"
    if cached:
        found = _read(path, key)
        if found is not None:
            return found
    if progress is not None:
        progress(f"listing the unpatched seed's tests in runner {runner.name!r}")
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        limits=seed.limits,
        runtime=seed.runtime,
        harness=harness_for(seed, files),
        tree=seed.source,
    )
    if prepare and isinstance(runner, PreparingRunner):
        runner.prepare(job, progress or _silent)
    outcome = verified(job, runner.run_test(job))
    report = outcome.test_report
    made = _from_report(seed.name, report, key, outcome.sandbox_id)
    if outcome.timed_out or outcome.limit_hit is not None:
        stopped = "timed out" if outcome.timed_out else f"hit the {outcome.limit_hit} limit"
        made = attrs.evolve(made, partial=f"the unpatched seed's test {stopped}")
    _write(path, made)
    return made


def _silent(_: str) -> None:
    pass


def _from_report(seed: str, report: TestReport | None, key: str, sandbox_id: str) -> TestList:
    framework = report.framework if report is not None else None
    if report is None or report.status in ("tampered", "exit-status"):
        detail = "no framework report" if report is None else f"its report is {report.status}"
        return TestList(seed, framework, (), f"the unpatched run gave {detail}", key, sandbox_id)
    tests: list[NeededTest] = []
    unloaded: list[str] = []
    for test in report.tests:
        if _is_load_error(test.id, framework):
            unloaded.append(test.id)
        else:
            tests.append(NeededTest(test.id, test.outcome))
    partial = None
    if unloaded:
        shown = ", ".join(unloaded[:3]) + (
            f" and {len(unloaded) - 3} more" if len(unloaded) > 3 else ""
        )
        partial = f"the unpatched seed could not load {shown}"
    elif report.status != "complete":
        said = f": {report.detail}" if report.detail else ""
        partial = f"the unpatched run's report is {report.status}{said}"
    return TestList(seed, framework, tuple(tests), partial, key, sandbox_id)


def _is_load_error(test_id: str, framework: str | None) -> bool:
    """Whether a reported ID names a module, class or fixture that failed, not a test."""
    if framework == "pytest":
        return "::" not in test_id
    return test_id.startswith(_LOAD_ERRORS) or " (" in test_id or "." not in test_id


def checked(report: TestReport | None, listed: TestList | None) -> TestReport | None:
    """``report`` held to ``listed``: which needed tests were not reported as they must be.

    A report without a framework, or no list, is returned as it is.
    """
    if report is None or listed is None or report.framework is None:
        return report
    outcomes: dict[str, str] = {}
    for test in report.tests:  # a test reported more than once keeps its worst outcome
        known = outcomes.get(test.id)
        if known is None or OUTCOME_RANKS[test.outcome] >= OUTCOME_RANKS[known]:
            outcomes[test.id] = test.outcome
    unmet = tuple(
        UnmetTest(
            id=needed.id, outcome=outcomes.get(needed.id, "missing"), unpatched=needed.unpatched
        )
        for needed in listed.tests
        if outcomes.get(needed.id) not in needed.allowed
    )
    return attrs.evolve(report, needed=len(listed.tests), unmet=unmet, list_partial=listed.partial)


def _read(path: Path, key: str) -> TestList | None:
    """A cached list, or ``None`` when there is none or it is not one (then it is made anew)."""
    try:
        with open(path, "rb") as file:
            data = json.loads(file.read(64 * 1024 * 1024))
        found = converter().structure(data, TestList)
    except Exception:  # a cache that cannot be read is made anew
        return None
    return found if found.key == key else None


def _write(path: Path, listed: TestList) -> None:
    """Keep ``listed`` for the next run; a cache that cannot be written is only a cost."""
    with contextlib.suppress(OSError):
        write_private_file(path, json.dumps(converter().unstructure(listed)))

"""Run records: everything needed to re-test a run later without asking a provider again.

Every ``agent run`` (and every task of ``agent batch``) writes one JSON file,
``<run-id>.json``, under ``$XDG_STATE_HOME/sandboxed-coding-agent/run-records``
(beside the planner-call records of :mod:`~sandboxed_coding_agent.core.records`,
with the same owner-only modes and whole-file writes). A record holds the seed's
name and a hash of its files, the instruction, every plan a planner proposed or
the user gave, every test a sandbox ran (the replacement it tested and the
outcome), the policies, limits and plugin versions that applied, and the run's
result or error. ``agent replay`` re-tests its plans; ``agent diff`` prints the
chosen one as a patch.

It never holds the API key: the planner refuses to send or use text holding it,
and the key is blanked from the record's text before it is written all the same.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import secrets
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from . import contract, orchestrator, provider, records
from .errors import AgentError, AgentWarning, UsageError
from .git_source import SourceTree
from .grading import graded
from .model import (
    PatchFile,
    PatchPlan,
    PlannerResult,
    PlanRequest,
    RunResult,
    SandboxJob,
    SandboxOutcome,
    SeedLimits,
    SeedProject,
    TokenUsage,
)
from .plugins import PluginInfo
from .protocols import PatchPolicy, Planner, PreparingRunner, Runner
from .provider import API_KEY_ENV
from .serialization import describe_structure_error, structure, to_json
from .verdict import verified

#: Version of the record's layout; a record of another version is refused, never guessed at.
RUN_RECORD_FORMAT = 1
#: The largest record ``agent replay FILE`` reads.
MAX_RECORD_BYTES = 64 * 1024 * 1024
#: Keys shorter than this are placeholders (``x``, ``EMPTY``) that are not searched for.

_RUN_ID = re.compile(r"run-[0-9a-f]{16}")


@attrs.frozen
class SeedIdentity:
    """Which seed a run used, and exactly which content.

    :ivar name: the seed's name.
    :ivar root: the folder its files were read from.
    :ivar sha256: a hash of every file's path and bytes (see :func:`seed_hash`);
        ``None`` when the files could not be read.
    :ivar files: the seed's files (of a git seed: its own and editable ones, the rest
        being the tree's at ``source.commit``).
    :ivar source: a git seed's repository and commit; ``None`` for a folder seed.
    """

    name: str
    root: str
    sha256: str | None
    files: tuple[str, ...]
    source: SourceTree | None = None


@attrs.frozen
class RecordedPlan:
    """A plan the run considered: proposed by a planner, or given as a file.

    :ivar plan: the plan.
    :ivar planner: the planner that proposed it; ``None`` for a plan file.
    :ivar planner_task_id: the planner call (``agent logs ID``).
    :ivar model: the model that answered.
    :ivar usage: tokens of the call.
    :ivar duration_seconds: wall time of the call.
    """

    plan: PatchPlan
    planner: str | None = None
    planner_task_id: str | None = None
    model: str | None = None
    usage: TokenUsage | None = None
    duration_seconds: float | None = None


@attrs.frozen
class RecordedTest:
    """One test a sandbox ran: the replacement it tested and what happened.

    :ivar plan: the replacement files the sandbox received.
    :ivar plan_index: which of the record's ``plans`` it is, when it is one of them.
    :ivar test_command: the command the sandbox ran.
    :ivar limits: the limits of that sandbox.
    :ivar outcome: the sandbox's outcome, with the verified report and, for a graded
        seed, the grade the run gave it.
    """

    plan: PatchPlan
    plan_index: int | None
    test_command: tuple[str, ...]
    limits: SeedLimits
    outcome: SandboxOutcome


@attrs.frozen
class AppliedPolicy:
    """A policy that checked the run's plans.

    :ivar name: the policy's name.
    :ivar parameters: its parameters (the fields of an attrs policy), as JSON values.
    """

    name: str
    parameters: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen
class PluginVersion:
    """A plugin that was loaded for the run, and which version.

    :ivar name: the plugin's name.
    :ivar distribution: the package it came from.
    :ivar version: that package's version.
    :ivar status: ``loaded``, ``disabled`` or ``broken``.
    """

    name: str
    distribution: str
    version: str
    status: str = "loaded"


@attrs.frozen
class RecordedError:
    """The error a run ended in, as its user was told.

    :ivar kind: the error's kind (``provider``, ``policy``, ``sandbox``, ...).
    :ivar message: its message.
    :ivar planner_task_id: the planner call it concerns.
    :ivar sandbox_id: the sandbox it concerns.
    """

    kind: str
    message: str
    planner_task_id: str | None = None
    sandbox_id: str | None = None


@attrs.frozen
class RunRecord:
    """Everything kept about one run.

    :ivar run_id: ``run-`` and 16 hexadecimal digits; the result carries it.
    :ivar started_at: when the run began, ISO 8601 in UTC.
    :ivar finished_at: when it ended.
    :ivar duration_seconds: its wall time.
    :ivar seed: the seed and a hash of its content.
    :ivar instruction: the instruction the planner was given (the seed's default when
        none was).
    :ivar planner: the planner asked, if any.
    :ivar runner: the runner that tested.
    :ivar plans: every plan considered, in the order it came.
    :ivar tests: every test a sandbox ran, in the order each ended.
    :ivar chosen_test: the test the result's verdict rests on (by sandbox ID).
    :ivar originals: the seed's text of every file a plan replaces, for ``agent diff``.
    :ivar policies: the policies that checked the plans.
    :ivar limits: the limits of the run.
    :ivar plugins: the plugins loaded, with their versions.
    :ivar result: the run's result, when it ended in one.
    :ivar error: the error it ended in, when it did.
    :ivar format: version of this layout.
    """

    run_id: str
    started_at: str
    finished_at: str
    duration_seconds: float
    seed: SeedIdentity
    instruction: str
    planner: str | None
    runner: str
    plans: tuple[RecordedPlan, ...]
    tests: tuple[RecordedTest, ...]
    chosen_test: int | None
    originals: dict[str, str]
    policies: tuple[AppliedPolicy, ...]
    limits: SeedLimits
    plugins: tuple[PluginVersion, ...]
    result: RunResult | None = None
    error: RecordedError | None = None
    format: int = RUN_RECORD_FORMAT


def new_run_id() -> str:
    return f"run-{secrets.token_hex(8)}"


def records_directory(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_STATE_HOME/sandboxed-coding-agent/run-records``."""
    return records.state_directory(environ) / "run-records"


def record_path(run_id: str, environ: Mapping[str, str] = os.environ) -> Path:
    if not _RUN_ID.fullmatch(run_id):
        raise UsageError(
            f"{run_id!r} is not a run ID: expected run- and 16 hexadecimal digits, as "
            "`agent run` prints it (for example run-0123456789abcdef), or a record file"
        )
    return records_directory(environ) / f"{run_id}.json"


def seed_hash(files: Mapping[str, bytes]) -> str:
    """A SHA-256 over every file's path and bytes, in path order, each length-prefixed
    (so no two different sets of files can give the same input)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        name = path.encode("utf-8", errors="surrogateescape")
        digest.update(len(name).to_bytes(8, "big") + name)
        digest.update(len(files[path]).to_bytes(8, "big") + files[path])
    return digest.hexdigest()


def write_run_record(record: RunRecord, environ: Mapping[str, str] = os.environ) -> Path:
    """Save ``record`` (owner-only, written whole) with the API key blanked, if it appears.

    :raises OSError: the state directory cannot be written.
    """
    path = record_path(record.run_id, environ)
    records.write_private_file(path, _blank_key(to_json(record, indent=2), environ) + "\n")
    return path


def _blank_key(text: str, environ: Mapping[str, str]) -> str:
    return provider.blank_key(text, environ.get(API_KEY_ENV, ""))


def read_run_record(reference: str, environ: Mapping[str, str] = os.environ) -> RunRecord:
    """The record named by a run ID, or kept in the file at ``reference``.

    :raises UsageError: no such record, or it cannot be read, is damaged or of another format.
    """
    if _RUN_ID.fullmatch(reference):
        path = record_path(reference, environ)
        if not path.exists():
            raise UsageError(
                f"there is no record of run {reference!r} in {path.parent} "
                "(records are kept on the machine that ran it)"
            )
    else:
        path = Path(reference)
        if not path.is_file():
            record_path(reference, environ)  # says what a run ID looks like
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_RECORD_BYTES + 1)
    except OSError as error:
        raise UsageError(f"cannot read the run record {str(path)!r}: {error.strerror}") from None
    if len(data) > MAX_RECORD_BYTES:
        raise UsageError(f"{str(path)!r} is larger than {MAX_RECORD_BYTES} bytes: not a record")
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise UsageError(f"the run record {str(path)!r} is damaged: {error}") from None
    version = parsed.get("format") if isinstance(parsed, dict) else None
    if version != RUN_RECORD_FORMAT:
        raise UsageError(
            f"{str(path)!r} is not a run record of format {RUN_RECORD_FORMAT} "
            f"(its format is {version!r}); it was written by another version of the agent"
        )
    not_utf8 = _first_lone_surrogate(parsed, "record")
    if not_utf8 is not None:
        raise UsageError(
            f"the run record {str(path)!r} is damaged: {not_utf8} holds a lone surrogate "
            "(text that is not UTF-8, which the agent never records)"
        )
    try:
        record = structure(parsed, RunRecord)
    except Exception as error:  # cattrs raises a tree of ordinary exceptions
        problems = "; ".join(describe_structure_error(error, root="record"))
        raise UsageError(f"the run record {str(path)!r} is damaged: {problems}") from None
    _check_consistent(record, path, reference)
    return record


def _first_lone_surrogate(value: object, where: str) -> str | None:
    """Where in decoded JSON a text (a key or a string) holds a lone surrogate, if one does."""
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, place = stack.pop()
        if isinstance(item, str):
            if not contract.is_utf8(item):
                return place
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not contract.is_utf8(key):
                    return f"a key of {place}"
                stack.append((inner, f"{place}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{place}[{i}]") for i, inner in enumerate(item))
    return None


def _check_consistent(record: RunRecord, path: Path, reference: str) -> None:
    """Refuse a record whose run ID or indexes cannot be what the agent wrote.

    :raises UsageError: naming the field.
    """
    damaged = f"the run record {str(path)!r} is damaged"
    if not _RUN_ID.fullmatch(record.run_id):
        raise UsageError(
            f"{damaged}: its run_id {record.run_id!r} is not a run ID (run- and 16 "
            "hexadecimal digits)"
        )
    # A record is named after its run; a file still named so must hold that run.
    asked = reference if _RUN_ID.fullmatch(reference) else path.name.removesuffix(".json")
    if _RUN_ID.fullmatch(asked) and asked != record.run_id:
        raise UsageError(
            f"{damaged}: it was asked for as run {asked} but holds run {record.run_id}"
        )
    if record.chosen_test is not None and not 0 <= record.chosen_test < len(record.tests):
        held = f"tests 0 to {len(record.tests) - 1}" if record.tests else "no test"
        raise UsageError(f"{damaged}: its chosen_test is {record.chosen_test}, but it holds {held}")
    for number, test in enumerate(record.tests):
        if test.plan_index is not None and not 0 <= test.plan_index < len(record.plans):
            raise UsageError(
                f"{damaged}: tests[{number}].plan_index is {test.plan_index}, but it holds "
                f"{len(record.plans)} plans"
            )


def chosen_plan(record: RunRecord, seed: SeedProject) -> PatchPlan:
    """The plan the run's verdict rests on, checked again by the patch contract for
    ``seed`` (the files it lets a plan replace today, its limits): a record may come
    from anyone, and its paths end up in a patch's headers.

    :raises UsageError: the run tested no plan, or the contract refuses it (naming each rule).
    """
    if record.chosen_test is None:
        problem = f"it ended in a {record.error.kind} error" if record.error else "none was chosen"
        raise UsageError(f"run {record.run_id} has no tested patch: {problem}")
    if not 0 <= record.chosen_test < len(record.tests):  # read_run_record refuses it already
        raise UsageError(f"run {record.run_id}'s chosen_test {record.chosen_test} is no test")
    plan = record.tests[record.chosen_test].plan
    rejections = contract.check_plan(plan, editable_paths=seed.editable_files, limits=seed.limits)
    if rejections:
        raise UsageError(
            f"run {record.run_id}'s chosen patch breaks the patch contract for seed "
            f"{seed.name!r}, so it is not printed: "
            + "; ".join(rejection.describe() for rejection in rejections)
        )
    for entry in plan.files:
        if not contract.is_utf8(record.originals.get(entry.path, "")):
            raise UsageError(
                f"the record of run {record.run_id} is damaged: the original text of "
                f"{entry.path} is not UTF-8"
            )
    return plan


def git_diff(originals: Mapping[str, str], plan: PatchPlan) -> str:
    """``plan`` as a patch ``git apply`` accepts: ``diff --git`` headers, and a
    ``\\ No newline at end of file`` mark wherever a file does not end in one."""
    chunks: list[str] = []
    for entry in plan.files:
        old = originals.get(entry.path, "")
        if old == entry.content:
            continue
        chunks.append(f"diff --git a/{entry.path} b/{entry.path}\n")
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            entry.content.splitlines(keepends=True),
            fromfile=f"a/{entry.path}",
            tofile=f"b/{entry.path}",
        )
        for line in lines:
            chunks.append(
                line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            )
    return "".join(chunks)


class _RecordingPlanner:
    """Passes every call to the planner and keeps each plan it proposes."""

    def __init__(self, inner: Planner, plans: list[RecordedPlan], lock: threading.Lock) -> None:
        self._inner, self._plans, self._lock = inner, plans, lock

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def description(self) -> str:
        return self._inner.description

    def plan(self, request: PlanRequest) -> PlannerResult:
        planned = self._inner.plan(request)
        with self._lock:
            self._plans.append(
                RecordedPlan(
                    plan=planned.plan,
                    planner=planned.planner,
                    planner_task_id=planned.planner_task_id,
                    model=planned.model,
                    usage=planned.usage,
                    duration_seconds=planned.duration_seconds,
                )
            )
        return planned

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _RecordingRunner:
    """Passes every job to the runner and keeps each job with its outcome."""

    def __init__(
        self,
        inner: Runner,
        tests: list[tuple[SandboxJob, SandboxOutcome]],
        lock: threading.Lock,
    ) -> None:
        self._inner, self._tests, self._lock = inner, tests, lock

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def description(self) -> str:
        return self._inner.description

    def prepare(self, job: SandboxJob, progress: Callable[[str], None]) -> None:
        if isinstance(self._inner, PreparingRunner):
            self._inner.prepare(job, progress)

    def run_test(self, job: SandboxJob, *args: Any, **kwargs: Any) -> SandboxOutcome:
        # Kept as the run judged it: with the framework's report verified (and the raw
        # report, signed with the sandbox's key, dropped).
        outcome = verified(job, self._inner.run_test(job, *args, **kwargs))
        with self._lock:
            self._tests.append((job, outcome))
        return outcome

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _RecordingStoppableRunner(_RecordingRunner):
    """A recording runner for a runner whose sandboxes can be stopped (``run_test_until``)."""

    def run_test_until(self, job: SandboxJob, stop: threading.Event) -> SandboxOutcome:
        outcome = verified(job, self._inner.run_test_until(job, stop))  # type: ignore[attr-defined]
        with self._lock:
            self._tests.append((job, outcome))
        return outcome


def _recording(
    runner: Runner, tests: list[tuple[SandboxJob, SandboxOutcome]], lock: threading.Lock
) -> Runner:
    # The orchestrator asks what a runner can do by the methods it has, so the recording
    # one has exactly the runner's.
    kind = _RecordingStoppableRunner if hasattr(runner, "run_test_until") else _RecordingRunner
    return kind(runner, tests, lock)


def run_recorded(
    seed: SeedProject,
    *,
    runner: Runner,
    policies: Sequence[PatchPolicy],
    planner: Planner | None = None,
    plan: PatchPlan | None = None,
    plugins: Sequence[PluginInfo] = (),
    run_id: str | None = None,
    environ: Mapping[str, str] = os.environ,
    **options: Any,
) -> RunResult:
    """:func:`orchestrator.run <sandboxed_coding_agent.core.orchestrator.run>`, recorded.

    Every plan the planner proposes and every test the runner runs is noted on
    the way; the record is written when the run ends, in a result or an error,
    and the result carries its ``run_id`` when the record was kept. A record that
    cannot be written is a warning: the run's outcome stands. ``options`` go to
    ``orchestrator.run`` as they are.
    """
    run_id = run_id or new_run_id()
    lock = threading.Lock()
    plans: list[RecordedPlan] = [RecordedPlan(plan=plan)] if plan is not None else []
    tests: list[tuple[SandboxJob, SandboxOutcome]] = []
    started, clock = datetime.now(UTC), time.monotonic()
    try:
        files: dict[str, bytes] | None = seed.read_files()
    except AgentError:
        files = None  # orchestrator.run reports it, as it would unrecorded
    result: RunResult | None = None
    error: RecordedError | None = None
    try:
        result = orchestrator.run(
            seed,
            runner=_recording(runner, tests, lock),
            policies=policies,
            planner=_RecordingPlanner(planner, plans, lock) if planner is not None else None,
            plan=plan,
            environ=environ,
            **options,
        )
        result = attrs.evolve(result, run_id=run_id)
    except AgentError as failure:
        error = RecordedError(
            kind=failure.kind,
            message=failure.message,
            planner_task_id=failure.planner_task_id,
            sandbox_id=failure.sandbox_id,
        )
        raise
    finally:
        limits = options.get("limits") or seed.limits
        record = _record(
            run_id=run_id,
            started=started,
            seconds=time.monotonic() - clock,
            seed=seed,
            files=files,
            instruction=options.get("instruction") or seed.default_prompt,
            planner=planner.name if planner is not None else None,
            runner=runner.name,
            plans=plans,
            tests=tests,
            policies=policies,
            limits=limits,
            plugins=plugins,
            result=result,
            error=error,
        )
        kept = _keep(record, environ)
    # No run ID for a record that is not there: agent replay would not find it.
    return result if kept else attrs.evolve(result, run_id=None)


def _keep(record: RunRecord, environ: Mapping[str, str]) -> bool:
    """Write ``record``; whether it was kept."""
    # The record helps replay and investigate; failing to keep it must not fail the run.
    try:
        write_run_record(record, environ)
        return True
    except (OSError, ValueError) as problem:
        reason = getattr(problem, "strerror", None) or str(problem)
        warnings.warn(
            f"the record of run {record.run_id} could not be kept in "
            f"{records_directory(environ)} ({reason}); `agent replay` will not find it",
            AgentWarning,
            stacklevel=3,
        )
        return False


def _record(
    *,
    run_id: str,
    started: datetime,
    seconds: float,
    seed: SeedProject,
    files: dict[str, bytes] | None,
    instruction: str,
    planner: str | None,
    runner: str,
    plans: list[RecordedPlan],
    tests: list[tuple[SandboxJob, SandboxOutcome]],
    policies: Sequence[PatchPolicy],
    limits: SeedLimits,
    plugins: Sequence[PluginInfo],
    result: RunResult | None,
    error: RecordedError | None,
) -> RunRecord:
    originals = files or {}
    # Kept with its grade, as the run judged it, so that a replay compares the grade too.
    recorded_tests = tuple(
        _recorded_test(job, graded(outcome, seed), plans, originals) for job, outcome in tests
    )
    chosen = None
    if result is not None:
        chosen = next(
            (i for i, t in enumerate(recorded_tests) if t.outcome.sandbox_id == result.sandbox_id),
            None,
        )
    replaced = {entry.path for p in plans for entry in p.plan.files}
    replaced |= {entry.path for t in recorded_tests for entry in t.plan.files}
    return RunRecord(
        run_id=run_id,
        started_at=started.isoformat(timespec="milliseconds"),
        finished_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        duration_seconds=round(seconds, 6),
        seed=SeedIdentity(
            name=seed.name,
            root=str(seed.root),
            sha256=seed_hash(files) if files is not None else None,
            files=seed.carried_files,
            source=seed.source,
        ),
        instruction=instruction,
        planner=planner,
        runner=runner,
        plans=tuple(plans),
        tests=recorded_tests,
        chosen_test=chosen,
        originals={
            path: originals[path].decode("utf-8", errors="replace")
            for path in sorted(replaced)
            if path in originals
        },
        policies=tuple(applied(policy) for policy in policies),
        limits=limits,
        plugins=tuple(
            PluginVersion(
                name=info.name,
                distribution=info.distribution,
                version=info.version,
                status=info.status,
            )
            for info in plugins
        ),
        result=result,
        error=error,
    )


def _recorded_test(
    job: SandboxJob,
    outcome: SandboxOutcome,
    plans: Sequence[RecordedPlan],
    originals: Mapping[str, bytes],
) -> RecordedTest:
    """The job as the plan it tested: one of ``plans`` when every file of one is in the
    job as planned, otherwise the files the job holds that differ from the seed's."""
    index: int | None = None
    tested: PatchPlan | None = None
    for number, recorded in enumerate(plans):
        if all(
            job.files.get(entry.path) == entry.content.encode("utf-8")
            for entry in recorded.plan.files
        ):
            index, tested = number, recorded.plan
    if tested is None:
        changed: tuple[PatchFile, ...] = tuple(
            PatchFile(path, data.decode("utf-8", errors="replace"))
            for path, data in sorted(job.files.items())
            if originals.get(path) != data
        )
        tested = PatchPlan(changed)
    return RecordedTest(
        plan=tested,
        plan_index=index,
        test_command=job.test_command,
        limits=job.limits,
        outcome=outcome,
    )


def applied(policy: PatchPolicy) -> AppliedPolicy:
    """How a run record keeps ``policy``: its name and (for an attrs policy) its fields."""
    parameters: dict[str, Any] = {}
    if attrs.has(type(policy)):
        fields = attrs.asdict(policy, recurse=True)  # type: ignore[arg-type]
        for key in ("name", "description", "activation"):
            fields.pop(key, None)
        # Whatever a plugin keeps in its fields, the record holds JSON.
        parameters = json.loads(json.dumps(fields, default=repr))
    return AppliedPolicy(name=policy.name, parameters=parameters)

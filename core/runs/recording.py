"""A run, recorded: the planner and runner are wrapped so that every plan and every test
is noted on the way, and the record is written when the run ends, whatever it ends in."""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from ..errors import AgentError, AgentWarning
from ..model import (
    Attempt,
    Candidate,
    PatchFile,
    PatchPlan,
    PlannerResult,
    PlanRequest,
    RunResult,
    SandboxJob,
    SandboxOutcome,
    SeedLimits,
    SeedProject,
)
from ..plugins import PluginInfo
from ..protocols import Journal, PatchPolicy, Planner, PreparingRunner, Runner, SessionPlanner
from ..protocols import Session as ProtocolSession
from ..records import retention
from ..records.run_record_files import new_run_id, records_directory, write_run_record
from ..records.run_record_layout import (
    AppliedPolicy,
    PluginVersion,
    RecordedError,
    RecordedPlan,
    RecordedTest,
    RunRecord,
    SeedIdentity,
    seed_hash,
)
from ..verdicts.verdict import graded, judged, verified
from . import orchestrator


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
        return self._kept(self._inner.plan(request))

    def _kept(self, planned: PlannerResult) -> PlannerResult:
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


class _RecordingSessionPlanner(_RecordingPlanner):
    """As :class:`_RecordingPlanner`, for a planner that explores: ``plan_in_session`` is
    a method of its own, since a protocol check from Python 3.12 on does not look through
    ``__getattr__``."""

    def __init__(
        self, inner: SessionPlanner, plans: list[RecordedPlan], lock: threading.Lock
    ) -> None:
        super().__init__(inner, plans, lock)  # type: ignore[arg-type]
        self._explorer = inner

    def plan_in_session(
        self, request: PlanRequest, session: ProtocolSession, journal: Journal
    ) -> PlannerResult:
        return self._kept(self._explorer.plan_in_session(request, session, journal))


def _recording_planner(
    planner: Planner, plans: list[RecordedPlan], lock: threading.Lock
) -> _RecordingPlanner:
    if isinstance(planner, SessionPlanner):
        return _RecordingSessionPlanner(planner, plans, lock)
    return _RecordingPlanner(planner, plans, lock)


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

    @property
    def unrecorded(self) -> Runner:
        """The runner itself, for the run of the unpatched seed that lists the tests a
        verdict needs: that sandbox tests no plan, so it is no test of the record."""
        return self._inner

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
    made: dict[int, list[Attempt]] | None = None,
    **options: Any,
) -> RunResult:
    """:func:`orchestrator.run <sandboxed_coding_agent.core.runs.orchestrator.run>`, recorded.

    Every plan the planner proposes and every test the runner runs is noted on
    the way; the record is written when the run ends, in a result or an error,
    and the result carries its ``run_id`` when the record was kept. A record that
    cannot be written is a warning: the run's outcome stands. ``options`` go to
    ``orchestrator.run`` as they are.

    The record keeps every attempt of every candidate, those refused before any sandbox
    included; ``made``, when given, is filled with them as well (by candidate number),
    for a caller that reports a run which ended in an error.

    The first recorded run of a process prunes old records first when a day has
    passed since that was last done (:func:`~.retention.prune_when_due`).
    """
    retention.prune_when_due(environ)
    run_id = run_id or new_run_id()
    if isinstance(planner, SessionPlanner):
        # Said at once: a run that explores may be long, and its steps are found by its
        # ID while it runs or after it was killed, before its record is written.
        say = options.get("progress") or (lambda _: None)
        say(f"run {run_id}: the planner's steps are kept as it makes them: agent logs {run_id}")
    lock = threading.Lock()
    plans: list[RecordedPlan] = [RecordedPlan(plan=plan)] if plan is not None else []
    tests: list[tuple[SandboxJob, SandboxOutcome]] = []
    made = {} if made is None else made
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
            planner=_recording_planner(planner, plans, lock) if planner is not None else None,
            plan=plan,
            environ=environ,
            made=made,
            run_id=run_id,
            **options,
        )
        result = attrs.evolve(result, run_id=run_id)
    except AgentError as failure:
        error = RecordedError(
            kind=failure.kind,
            message=failure.message,
            planner_task_id=failure.planner_task_id,
            sandbox_id=failure.sandbox_id,
            spend=failure.spend,
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
            model=getattr(options.get("planner_options"), "model", None),
            runner=runner.name,
            plans=plans,
            tests=tests,
            made=made,
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
    model: str | None,
    runner: str,
    plans: list[RecordedPlan],
    tests: list[tuple[SandboxJob, SandboxOutcome]],
    made: Mapping[int, Sequence[Attempt]],
    policies: Sequence[PatchPolicy],
    limits: SeedLimits,
    plugins: Sequence[PluginInfo],
    result: RunResult | None,
    error: RecordedError | None,
) -> RunRecord:
    originals = files or {}
    # Kept with its grade and its output tests, as the run judged it, so that a replay
    # compares the same verdict.
    # The unpatched run's tests, which a listed name cut short may stand for (grading.py).
    known = result.test_list.ids if result is not None and result.test_list else None
    recorded_tests = tuple(
        _recorded_test(job, graded(judged(seed, job, outcome), seed, known), plans, originals)
        for job, outcome in tests
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
        model=model,
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
        candidates=made_candidates(made),
    )


def made_candidates(made: Mapping[int, Sequence[Attempt]]) -> tuple[Candidate, ...]:
    """Every candidate's attempts so far, in candidate order (a candidate thread still
    waiting on its planner when the run ended may add to its list: it is copied here)."""
    return tuple(
        Candidate(number, tuple(list(made[number]))) for number in sorted(made) if made[number]
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

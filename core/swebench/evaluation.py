"""SWE-bench predictions evaluated in the sandbox, graded on FAIL_TO_PASS and PASS_TO_PASS.

For each prediction, the model's patch is applied to the task's base commit
without a checkout (:mod:`.patches`), in the agent's cache, never in the user's
clone. The files it changes become a whole-file plan for a seed made for that
prediction: the task's test files as its ``test_patch`` leaves them, and every
file the patch changes editable. The plan goes through the seed's policies and
is tested in a fresh sandbox like any other; the run is graded test by test
(:mod:`..grading`), and the instance is resolved when the grade is ``FULL``.

What SWE-bench applies after the model's patch, the task's ``test_patch``, is
here the seed's own files, laid over the tree: a change the patch makes to a
test file of the task is overridden by it, as in SWE-bench; each result lists
what was left out. A patch that creates, changes or deletes a file steering the
test framework (the patch contract's ``test-infrastructure`` rule:
``conftest.py``, ``pytest.ini`` or a module named ``pytest`` at any depth, the
pytest settings of ``setup.cfg`` or ``pyproject.toml``...) is refused as a whole,
an ``error`` of kind ``policy`` that names the file, unless the task's reference
fix changes it too, or another module of the same package of the framework (a
fix in the framework itself). Any other change to the top-level
``pyproject.toml``, ``setup.cfg`` or ``tox.ini``, which no plan may replace, is
left out.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import attrs
from attrs import validators as v

from ..batches.batch import TaskError, TaskResult, run_tasks
from ..errors import AgentError, PlanRejected, Rejection
from ..model import ALWAYS_TEST_PATHS, LIMIT_CEILINGS, PatchFile, PatchPlan, RunResult, SeedProject
from ..plans import contract
from ..plugins import PluginHost
from ..protocols import Runner
from ..runs import orchestrator
from ..seeds import manifest
from ..seeds.patterns import matches_any
from ..seeds.project import TEST_INFRASTRUCTURE
from ..verdicts.evidence import NeededTest, TestCaseResult
from ..verdicts.grading import Grade
from ..verdicts.trusted_tests import list_tests
from ..verdicts.verdict import seed_framework
from . import patches, seeds
from .patches import PatchProblem
from .seeds import ImportOptions, SeedSpec
from .specs import Specs
from .tasks import BadLine, Prediction, TaskInstance

#: What became of an instance, as SWE-bench's report counts it.
OUTCOMES = ("resolved", "unresolved", "empty_patch", "error")
#: What an ``error`` was, so that a model's failure is never taken for the machine's:
#: ``patch`` (it does not apply, or is no whole-file plan), ``policy`` (refused before any
#: sandbox), ``task`` (the task itself cannot be set up: its clone, commit or test_patch),
#: ``environment`` (no test ran, before the patch or after it: the runtime cannot run the
#: task's tests), ``sandbox``, ``usage`` and ``internal``.
ERROR_KINDS = (
    "patch", "policy", "task", "environment", "sandbox", "usage", "configuration", "internal"
)  # fmt: skip
#: How sure a failure's likely cause is, as SWE-bench's report says it: ``environment``
#: (the machine's, whatever the patch did) or ``ambiguous`` (the machine's or the patch's).
FAILURE_TIERS = ("environment", "ambiguous")
#: The version of SWE-bench's report layout that :func:`report` writes.
REPORT_SCHEMA_VERSION = 2
PATCH_DOES_NOT_APPLY = "patch does not apply"
_IMPORT_FAILURE = "unittest.loader._FailedTest."


@attrs.frozen
class InstanceResult:
    """One line of ``agent swebench evaluate``'s results: what became of one prediction.

    :ivar instance_id: the instance.
    :ivar outcome: one of :data:`OUTCOMES`.
    :ivar model_name_or_path: the prediction's model.
    :ivar line: the prediction's line in the predictions file.
    :ivar resolution: ``FULL``, ``PARTIAL`` or ``NO`` when the tests ran (or the patch left
        nothing to test); ``None`` otherwise.
    :ivar reason: why it is not resolved, for a person.
    :ivar error_kind: for an ``error``, one of :data:`ERROR_KINDS`.
    :ivar changed_files: the files the plan replaced.
    :ivar ignored_files: files the patch changes that were left out (test files).
    :ivar seconds: wall time of its evaluation.
    :ivar grade: each FAIL_TO_PASS and PASS_TO_PASS test, passed, failed or missing.
    :ivar rejections: for a ``policy`` error, every reason.
    :ivar run: the sandbox run, when there was one.
    :ivar failure_reason: for an instance not resolved, its likely cause when the facts
        point at the machine rather than the patch (:func:`failure_of`): advisory, as in
        SWE-bench's report; the instance stays unresolved or an error.
    :ivar failure_tier: how sure that cause is, one of :data:`FAILURE_TIERS`.
    """

    instance_id: str
    outcome: str = attrs.field(validator=v.in_(OUTCOMES))
    model_name_or_path: str = ""
    line: int = 0
    resolution: str | None = None
    reason: str | None = None
    error_kind: str | None = attrs.field(default=None, validator=v.optional(v.in_(ERROR_KINDS)))
    changed_files: tuple[str, ...] = ()
    ignored_files: tuple[str, ...] = ()
    seconds: float = 0.0
    grade: Grade | None = None
    rejections: tuple[Rejection, ...] = ()
    run: RunResult | None = None
    failure_reason: str | None = None
    failure_tier: str | None = attrs.field(default=None, validator=v.optional(v.in_(FAILURE_TIERS)))


@attrs.frozen
class Evaluation:
    """One prediction to evaluate, with its task."""

    task: TaskInstance
    prediction: Prediction


class _Failed(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        self.kind = kind
        self.reason = reason
        super().__init__(reason)


@attrs.frozen
class _PlanOf:
    plan: PatchPlan
    editable: tuple[str, ...]
    placeholders: dict[str, bytes]
    ignored: tuple[str, ...]


def plan_of(
    patched: patches.Patched, tests: Iterable[str], *, fixed: Iterable[str] = ()
) -> _PlanOf:
    """The whole-file plan the model's patch (applied as ``patched``) amounts to.

    :param fixed: the files steering the test framework that the reference fix changes:
        the patch may change those, and others of the framework's packages they are in
        (:func:`~..contract.test_infrastructure_scope`), and no other such file.
    :raises PlanRejected: the patch changes another such file, naming each
        (``test-infrastructure``).
    :raises _Failed: a change no whole-file plan can make (a deletion, a link, a file
        that is not UTF-8 text, too many files or bytes).
    """
    test_paths = set(tests)
    allowed = {contract.test_infrastructure_scope(path) for path in fixed}
    try:
        steering = patched.test_infrastructure()
    except PatchProblem as error:
        raise _Failed("patch", error.message) from None
    # The task's own test files replace the patch's: what it does to those is moot.
    refused = [
        Rejection(policy=contract.POLICY, rule=TEST_INFRASTRUCTURE, message=problem, path=path)
        for path, problem in steering
        if path not in test_paths and contract.test_infrastructure_scope(path) not in allowed
    ]
    if refused:
        raise PlanRejected(refused)
    files: list[PatchFile] = []
    placeholders: dict[str, bytes] = {}
    ignored: list[str] = []
    total = 0
    for change in patched.changes:
        if change.path in test_paths or matches_any(change.path, ALWAYS_TEST_PATHS):
            ignored.append(change.path)
            continue
        if change.status == "D":
            raise _Failed("patch", f"the patch deletes {change.path}; a plan replaces files only")
        if not change.regular:
            raise _Failed("patch", f"the patch makes {change.path} a link or a submodule")
        problem = patches.path_problem(change.path, in_folder=change.status == "A")
        if problem is not None:
            raise _Failed("patch", f"the patch changes {change.path}: {problem}")
        try:
            data = patched.read(change.path)
        except PatchProblem as error:
            raise _Failed("patch", error.message) from None
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _Failed("patch", f"{change.path} is not UTF-8 text after the patch") from None
        total += len(data)
        if change.status == "A":
            placeholders[change.path] = b""  # the plan replaces it with the new file
        files.append(PatchFile(change.path, content))
    most = min(seeds.MAX_LISTED, LIMIT_CEILINGS["max_files"])
    if len(files) > most:
        raise _Failed(
            "patch", f"the patch changes {len(files)} files; a plan replaces at most {most}"
        )
    if total > LIMIT_CEILINGS["max_total_bytes"]:
        raise _Failed(
            "patch",
            f"the files the patch leaves hold {total} bytes; a plan holds at most "
            f"{LIMIT_CEILINGS['max_total_bytes']}",
        )
    return _PlanOf(PatchPlan(files), tuple(f.path for f in files), placeholders, tuple(ignored))


def evaluate_one(
    job: Evaluation,
    *,
    repos: Path,
    scratch: Path,
    host: PluginHost,
    runner: str,
    options: ImportOptions,
    environ: Mapping[str, str] = os.environ,
) -> InstanceResult:
    """Evaluate one prediction; every failure becomes its result, never an exception."""
    started = time.monotonic()
    task, prediction = job.task, job.prediction
    base = InstanceResult(
        instance_id=task.instance_id,
        outcome="error",
        model_name_or_path=prediction.model_name_or_path,
        line=prediction.line,
    )
    try:
        found = _evaluate(task, prediction, repos, scratch, host, runner, options, environ)
    except _Failed as failure:
        found = attrs.evolve(base, error_kind=failure.kind, reason=failure.reason)
    except PlanRejected as error:
        found = attrs.evolve(
            base,
            error_kind="policy",
            reason="the plan was rejected: "
            + "; ".join(rejection.describe() for rejection in error.rejections[:3]),
            rejections=error.rejections,
        )
    except AgentError as error:
        kind = error.kind if error.kind in ERROR_KINDS else "internal"
        found = attrs.evolve(base, error_kind=kind, reason=error.message)
    except Exception as error:  # one instance's bug must not end the evaluation
        found = attrs.evolve(base, error_kind="internal", reason=f"{type(error).__name__}: {error}")
    cause = failure_of(found)
    return attrs.evolve(
        found,
        model_name_or_path=prediction.model_name_or_path,
        line=prediction.line,
        seconds=round(time.monotonic() - started, 3),
        failure_reason=cause[0] if cause else None,
        failure_tier=cause[1] if cause else None,
    )


def failure_of(result: InstanceResult) -> tuple[str, str] | None:
    """The likely cause of ``result``'s failure and its tier, when the facts point at the
    machine: read from what the run recorded, not from its output's wording (the output is
    the code under test's to write), except a missing module, which only the output says."""
    if result.outcome == "error" and result.error_kind in ("sandbox", "environment"):
        reason = "tests_cannot_run" if result.error_kind == "environment" else "sandbox_error"
        return reason, "environment"
    run = result.run
    if result.outcome not in ("unresolved", "error") or run is None:
        return None
    if run.test_timed_out:
        return "tests_timed_out", "ambiguous"
    if run.limit_hit == "memory":
        return "out_of_memory", "ambiguous"
    if "ModuleNotFoundError" in run.test_output:
        return "missing_module", "ambiguous"
    if run.test_report is None or not _any_test(run.test_report.tests):
        return "no_tests_collected", "ambiguous"
    return None


def _evaluate(
    task: TaskInstance,
    prediction: Prediction,
    repos: Path,
    scratch: Path,
    host: PluginHost,
    runner: str,
    options: ImportOptions,
    environ: Mapping[str, str],
) -> InstanceResult:
    if not prediction.model_patch.strip():
        return InstanceResult(task.instance_id, "empty_patch", reason="the prediction has no patch")
    try:
        clone = patches.clone_for(repos, task.repo)
        folder = patches.repository(clone, task.base_commit, environ)
        tested = patches.apply(folder, task.base_commit, task.test_patch, what="test_patch")
        tests = seeds.test_files(task, tested)
    except PatchProblem as error:
        raise _Failed("task", error.message) from None
    except BadLine as error:
        raise _Failed("task", error.message) from None
    try:
        patched = patches.apply(folder, task.base_commit, prediction.model_patch, what="patch")
    except patches.ChangesNothing:
        # As in SWE-bench: the tree stays the base commit's, whose FAIL_TO_PASS tests fail.
        return InstanceResult(
            task.instance_id,
            "unresolved",
            resolution="NO",
            reason="the patch applies but changes nothing: the base commit stays as it was",
        )
    except PatchProblem as error:
        reason = error.message
        if not reason.startswith(PATCH_DOES_NOT_APPLY):
            reason = f"{PATCH_DOES_NOT_APPLY}: {reason}"
        raise _Failed("patch", reason) from None
    fixed = seeds.fix_test_infrastructure(task, folder)
    planned = plan_of(patched, tests.files, fixed=fixed)
    # The plan holds only the framework's files the checks above let through.
    allowed = any(
        contract.test_infrastructure_problem(entry.path, entry.content, None) is not None
        for entry in planned.plan.files
    )
    if not planned.plan.files:
        return InstanceResult(
            task.instance_id,
            "unresolved",
            resolution="NO",
            reason="the patch changes only test files, which the task's own replace",
            ignored_files=planned.ignored,
        )
    spec = SeedSpec(
        name=seeds.seed_name(task.instance_id),
        description=f"SWE-bench {task.instance_id}: a prediction under evaluation",
        repository=str(clone),
        commit=task.base_commit,
        files={**tests.files, **planned.placeholders},
        tests=tuple(sorted(tests.files)),
        hidden_tests=(),
        editable=planned.editable,
        test_command=seeds.command_of(options, tests.runnable),
        prompt=f"Evaluate a prediction for SWE-bench {task.instance_id}.",
        fail_to_pass=task.fail_to_pass,
        pass_to_pass=task.pass_to_pass,
        runtime=seeds.runtime_of(options, folder, task.base_commit),
        limits=seeds.SEED_LIMITS,
        instance=seeds.instance_note(task, list(planned.placeholders)),
        guard_allow=tuple(
            dict.fromkeys((*options.guard_allow, *((TEST_INFRASTRUCTURE,) if allowed else ())))
        ),
    )
    try:
        written = seeds.write_seed(scratch, spec, line=prediction.line)
    except BadLine as error:
        raise _Failed("task", error.problem) from None
    seed = manifest.load_seed(written)
    chosen = host.runner(runner)
    run = orchestrator.run(
        seed,
        runner=chosen,
        policies=host.policies_for(seed),
        plan=planned.plan,
        environ=environ,
    )
    grade = run.grade
    ran = run.test_report is not None and _any_test(run.test_report.tests)
    refused = run.test_report is not None and bool(run.test_report.guard)
    # No test ran after the patch: did any run before it? One more sandbox, only then, of
    # the seed without the files the patch adds (empty ones could shadow a module).
    if (
        not ran
        and not refused
        and not run.test_timed_out
        and not _ran_unpatched(seed, planned.placeholders, chosen, environ)
    ):
        return InstanceResult(
            task.instance_id,
            "error",
            error_kind="environment",
            reason=(
                "no test ran, before the patch or after it: the runtime cannot run the "
                "task's tests (an interpreter, a package or the project missing; see the "
                "test output)"
            ),
            changed_files=run.changed_files,
            ignored_files=planned.ignored,
            grade=grade,
            run=run,
        )
    resolved = grade is not None and grade.resolved
    why: str | None = None
    if not resolved:
        why = grade.summary if grade is not None else "the run was not graded"
    return InstanceResult(
        task.instance_id,
        "resolved" if resolved else "unresolved",
        resolution=grade.resolution if grade is not None else "NO",
        reason=why,
        changed_files=run.changed_files,
        ignored_files=planned.ignored,
        grade=grade,
        run=run,
    )


def _ran_unpatched(
    seed: SeedProject, added: Iterable[str], runner: Runner, environ: Mapping[str, str]
) -> bool:
    """Whether any test of ``seed`` runs without the patch (in a sandbox of ``runner``):
    its files but ``added``, the placeholders of the files the patch creates."""
    left_out = set(added)
    files = {path: data for path, data in seed.read_files().items() if path not in left_out}
    if seed_framework(seed, files) is None:
        return True  # an exit status alone: nothing to tell
    return _any_test(list_tests(seed, files, runner, environ=environ, prepare=True).tests)


def _any_test(tests: Iterable[TestCaseResult | NeededTest]) -> bool:
    """Whether any of ``tests`` is a test, not unittest's stand-in for a module it could not
    import (``unittest.loader._FailedTest.NAME``)."""
    return any(not test.id.startswith(_IMPORT_FAILURE) for test in tests)


def evaluate(
    jobs: Sequence[Evaluation],
    *,
    repos: Path,
    scratch: Path,
    host: PluginHost,
    runner: str,
    options: ImportOptions,
    parallel: int,
    started: Callable[[Evaluation], None],
    finished: Callable[[InstanceResult], None],
    interrupted: Callable[[int], None],
    specs: Specs | None = None,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Evaluate ``jobs``, ``parallel`` at once, calling ``finished`` as each ends (see
    :func:`~..batch.run_tasks`, whose Ctrl-C handling this shares). ``specs``: settings by
    repository and version, in place of ``options``' for their tasks."""

    def run_one(job: Evaluation) -> InstanceResult:
        task = job.task
        chosen = specs.options(options, task.repo, task.version) if specs else options
        return evaluate_one(
            job,
            repos=repos,
            scratch=scratch,
            host=host,
            runner=runner,
            options=chosen,
            environ=environ,
        )

    run_tasks(
        jobs,
        run_one,
        jobs=parallel,
        started=started,
        finished=finished,
        interrupted=interrupted,
    )


def report(
    tasks: Sequence[TaskInstance],
    submitted: Iterable[str],
    results: Iterable[InstanceResult],
) -> dict[str, object]:
    """SWE-bench's run report (schema version 2, with the keys swebench 5 added: the
    instances whose failure was likely the machine's, ``infra_failure_*`` when surely,
    ``ambiguous_failure_*`` when perhaps, each with its ``failure_reasons`` entry; they
    stay among the unresolved or error instances) of ``results``.

    :param tasks: every instance of the tasks file.
    :param submitted: the instances a prediction was read for.
    """
    by_outcome: dict[str, set[str]] = {outcome: set() for outcome in OUTCOMES}
    by_tier: dict[str, set[str]] = {tier: set() for tier in FAILURE_TIERS}
    reasons: dict[str, str] = {}
    for result in results:
        by_outcome[result.outcome].add(result.instance_id)
        if result.failure_tier is not None and result.failure_reason is not None:
            by_tier[result.failure_tier].add(result.instance_id)
            reasons[result.instance_id] = result.failure_reason
    every = {task.instance_id for task in tasks}
    submitted_ids = set(submitted) & every
    completed = by_outcome["resolved"] | by_outcome["unresolved"]
    return {
        "total_instances": len(every),
        "submitted_instances": len(submitted_ids),
        "completed_instances": len(completed),
        "resolved_instances": len(by_outcome["resolved"]),
        "unresolved_instances": len(by_outcome["unresolved"]),
        "infra_failure_instances": len(by_tier["environment"]),
        "ambiguous_failure_instances": len(by_tier["ambiguous"]),
        "empty_patch_instances": len(by_outcome["empty_patch"]),
        "error_instances": len(by_outcome["error"]),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(every - submitted_ids),
        "empty_patch_ids": sorted(by_outcome["empty_patch"]),
        "submitted_ids": sorted(submitted_ids),
        "resolved_ids": sorted(by_outcome["resolved"]),
        "unresolved_ids": sorted(by_outcome["unresolved"]),
        "infra_failure_ids": sorted(by_tier["environment"]),
        "ambiguous_failure_ids": sorted(by_tier["ambiguous"]),
        "failure_reasons": dict(sorted(reasons.items())),
        "error_ids": sorted(by_outcome["error"]),
        "schema_version": REPORT_SCHEMA_VERSION,
    }


def as_task_result(result: InstanceResult) -> TaskResult:
    """``result`` as a batch's result line, for the HTML report (:mod:`..report`)."""
    status = {
        "resolved": "passed",
        "unresolved": "failed",
        "empty_patch": "failed",
        "error": {
            "patch": "rejected",
            "policy": "rejected",
            "sandbox": "sandbox-error",
            "environment": "sandbox-error",
            "usage": "usage-error",
            "configuration": "usage-error",
            "task": "usage-error",
        }.get(result.error_kind or "", "internal-error"),
    }[result.outcome]
    error = None
    if result.outcome in ("error", "empty_patch") or (result.run is None and result.reason):
        error = TaskError(
            kind=result.error_kind or result.outcome,
            message=result.reason or result.outcome,
            rejections=result.rejections,
        )
    return TaskResult(
        id=seeds.batch_task_id(result.instance_id, seeds.seed_name(result.instance_id)),
        line=result.line,
        seed=result.instance_id,
        status=status,
        seconds=result.seconds,
        resolution=result.run.grade.resolution if result.run and result.run.grade else None,
        prompt=None,
        planner=result.model_name_or_path or None,
        runner=result.run.runner if result.run is not None else None,
        result=result.run,
        error=error,
    )

"""``verify`` and ``verify_many``: a plan tested in a sandbox, as a verdict with a reward.

One call is one ``agent run --seed SEED --plan PLAN``: the same seeds, policies, runner,
limits, verdict and run record, with nothing printed. What a trainer needs is the
reward, and the line it draws between a patch that failed and a verdict that could not
be reached:

* ``1.0``: the seed's tests passed (a graded seed: resolved ``FULL``).
* ``0.0``: they failed, timed out or hit a limit, or the plan was refused: not a plan, an
  edit that does not apply, a file the patch contract or a policy forbids
  (``error.kind == "policy"``). All of them are the patch's doing.
* ``None``: no verdict was reached: the sandbox could not be made or failed
  (``"sandbox"``), the machine's configuration is wrong (``"configuration"``), or the
  agent itself failed (``"internal"``). A trainer should leave such a sample out.

With ``partial_credit=True``, a graded seed's failure earns the fraction of its
``fail_to_pass`` tests (and output tests) that passed, as long as every ``pass_to_pass``
test still passes and the report is sound; any other seed's, the fraction of its units
(the test command, then each output test) that passed.

Input the caller got wrong (a seed that does not exist, an option out of range, a plan
that is not text or a mapping) raises :class:`VerifyError` with the message the CLI gives.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import (
    AgentError,
    Interrupted,
    PlanRejected,
    Rejection,
    UsageError,
)
from sandboxed_coding_agent.core.model import (
    MAX_JOBS,
    PatchPlan,
    RunResult,
    SeedLimits,
    SeedProject,
)
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.protocols import PatchPolicy, Runner
from sandboxed_coding_agent.core.verdicts.evidence import TestReport
from sandboxed_coding_agent.core.verdicts.grading import Grade
from sandboxed_coding_agent.core.verdicts.output_tests import OutputTestResult

#: The executors :func:`verify_many` knows: threads on this machine, a Ray cluster's nodes.
EXECUTORS = ("local", "ray")
#: The largest plan :func:`verify` reads, as ``agent run --plan`` does.
MAX_PLAN_BYTES = 1024 * 1024


class VerifyError(UsageError):
    """The input of :func:`verify` or :func:`verify_many` is wrong: an unknown seed, runner
    or policy, a seed folder that is not one, an option out of range, a plan of the wrong
    type or an unknown executor. Its message is the one ``agent run`` prints for the same
    mistake (exit code 2 there); no sandbox was made."""

    kind = "usage"


@attrs.frozen
class VerdictError:
    """Why a :class:`Verdict` is not a plain pass or fail.

    :ivar kind: ``policy`` (the plan was refused: reward 0.0), or ``sandbox``,
        ``configuration`` or ``internal`` (no verdict was reached: reward ``None``).
    :ivar message: what happened, in the words ``agent run`` uses.
    :ivar rejections: for ``policy``, every reason.
    """

    kind: str
    message: str
    rejections: tuple[Rejection, ...] = ()


@attrs.frozen
class Verdict:
    """What a plan proved about a seed, and the reward a trainer takes from it.

    :ivar seed: the seed as named in the call.
    :ivar passed: whether the seed's tests passed (a graded seed: resolved ``FULL``).
    :ivar reward: 1.0 for a pass; 0.0 for a failure or a refused plan (or, with
        ``partial_credit``, the fraction described in :mod:`sandboxed_coding_agent.verification`);
        ``None`` when no verdict was reached.
    :ivar evidence: what the verdict rests on: ``exit-status``, ``framework`` or
        ``output``; ``None`` when the plan was not tested.
    :ivar test_report: the framework's verified report, when there is one.
    :ivar grade: for a graded seed, what became of each listed test and the resolution.
    :ivar output_tests: what became of each of the seed's output tests.
    :ivar error: why the plan was refused or no verdict was reached; ``None`` otherwise.
    :ivar run_id: the run's record (``agent logs``, ``agent replay``, ``agent diff``);
        ``None`` when none was kept (``record=False``, or a plan that could not be read).
    :ivar sandbox_id: the sandbox that tested the plan, when one did.
    :ivar test_exit_code: the test's exit code; ``None`` when killed or not tested.
    :ivar test_timed_out: whether the test hit its time limit.
    :ivar limit_hit: the sandbox limit that stopped the test, if any.
    :ivar changed_files: the files the plan changes.
    :ivar diff: the plan as a unified diff.
    :ivar test_output: the test's output, bounded by the seed's ``max_output_bytes``.
    :ivar seconds: wall time of the call.
    """

    seed: str
    passed: bool
    reward: float | None
    evidence: str | None = None
    test_report: TestReport | None = None
    grade: Grade | None = None
    output_tests: tuple[OutputTestResult, ...] = ()
    error: VerdictError | None = None
    run_id: str | None = None
    sandbox_id: str | None = None
    test_exit_code: int | None = None
    test_timed_out: bool = False
    limit_hit: str | None = None
    changed_files: tuple[str, ...] = ()
    diff: str = ""
    test_output: str = ""
    seconds: float = 0.0


@attrs.frozen
class _Prepared:
    """One call's input, checked: what remains is to test the plan."""

    name: str
    seed: SeedProject
    runner: Runner
    policies: tuple[PatchPolicy, ...]
    limits: SeedLimits
    plan: PatchPlan | PlanRejected
    partial_credit: bool
    record: bool
    environ: Mapping[str, str]


def verify(
    seed: str | os.PathLike[str],
    plan: str | bytes | Mapping[str, Any] | PatchPlan,
    *,
    runner: str = "local",
    policies: Sequence[str] = (),
    no_policies: Sequence[str] = (),
    policy_params: Mapping[str, Mapping[str, Any]] | None = None,
    limits: Mapping[str, float] | None = None,
    partial_credit: bool = False,
    record: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Verdict:
    """Test ``plan`` on ``seed`` in a sandbox, as ``agent run --seed SEED --plan PLAN``.

    :param seed: a seed's name (``agent seeds list``) or a seed folder.
    :param plan: what ``agent run --plan`` reads, given in memory: the text of a JSON plan
        (whole files, search/replace edits or ``{"diff": ...}``) or of a unified diff, that
        JSON as a mapping, or a :class:`~sandboxed_coding_agent.core.model.PatchPlan`.
    :param runner: the runner (``agent runners list``).
    :param policies: policies to switch on (``--policy``).
    :param no_policies: policies to switch off (``--no-policy``).
    :param policy_params: parameters by policy (``--policy-param NAME.KEY=VALUE``).
    :param limits: the seed's limits to replace, by their names in
        :class:`~sandboxed_coding_agent.core.model.SeedLimits` (``test_timeout_seconds``,
        ``memory_mb``, ``max_processes``, ``cpu_seconds``, ``max_file_mb``, ``disk_mb``...).
    :param partial_credit: reward a failure with the fraction of its tests that passed.
    :param record: keep the run's record, as every ``agent run`` does (``run_id``).
    :param environ: the environment to read settings from (the records' folder, say);
        default: the process's.
    :raises VerifyError: the input is wrong; nothing was run.
    """
    started = time.monotonic()
    prepared = _prepare(
        seed,
        plan,
        runner=runner,
        policies=policies,
        no_policies=no_policies,
        policy_params=policy_params,
        limits=limits,
        partial_credit=partial_credit,
        record=record,
        environ=os.environ if environ is None else environ,
    )
    return attrs.evolve(_judge(prepared), seconds=round(time.monotonic() - started, 3))


def verify_many(
    items: Iterable[tuple[str | os.PathLike[str], Any] | Mapping[str, Any]],
    *,
    jobs: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    ray_cpus: float = 1.0,
    **options: Any,
) -> Iterator[tuple[int, Verdict]]:
    """:func:`verify` for each item, ``jobs`` at a time, yielding ``(index, verdict)`` as
    each finishes: ``index`` is the item's place in ``items``, from 0.

    Every item is checked before any is tested, so a wrong one raises
    :class:`VerifyError` (its message starts with ``item N:``) before a sandbox is made.

    :param items: ``(seed, plan)`` pairs, or mappings with the keys ``seed`` and ``plan``.
    :param jobs: plans tested at once (default: the CPU count; with ``ray``, as many as
        the cluster's CPUs hold).
    :param executor: where they run: ``local`` (threads on this machine) or ``ray`` (a
        Ray task each, on the nodes of the cluster at ``ray_address``, each with the
        local sandbox of its node; a seed folder is sent by content, an installed seed
        by name; ``environ`` is each node's own and is not sent). A verdict the cluster
        could not reach (a node lost twice, a node that lacks the seed) has reward
        ``None``.
    :param ray_address: with ``ray``: the cluster's head, ``HOST:PORT`` (default:
        ``RAY_ADDRESS``, or the cluster ``ray start`` started on this machine); not used
        when this process is connected to a cluster already.
    :param ray_cpus: with ``ray``: the CPUs each plan's test reserves on its node.
    :param options: :func:`verify`'s keyword arguments, the same for every item.
    :raises VerifyError: an unknown executor, ``jobs`` out of range, or a wrong item; for
        ``ray``, Ray not installed (saying how to install it), or no cluster there.
    """
    if executor not in EXECUTORS:
        known = ", ".join(repr(name) for name in EXECUTORS)
        raise VerifyError(f"unknown executor {executor!r}; the executors are: {known}")
    if jobs is not None and (
        isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS
    ):
        raise VerifyError(f"jobs must be a whole number from 1 to {MAX_JOBS}, not {jobs!r}")
    accepted = set(inspect.signature(_prepare).parameters) - {"seed", "plan"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise VerifyError(f"verify_many() got an unknown option {unknown[0]!r}")
    if executor != "ray" and (ray_address is not None or ray_cpus != 1.0):
        raise VerifyError("ray_address and ray_cpus go with executor='ray'")
    if isinstance(ray_cpus, bool) or not isinstance(ray_cpus, int | float) or ray_cpus <= 0:
        raise VerifyError(f"ray_cpus must be a number above 0, not {ray_cpus!r}")
    sent = {name: value for name, value in options.items() if name != "environ"}
    environ = options.pop("environ", None)
    options["environ"] = os.environ if environ is None else environ
    prepared = []
    pairs = []
    for index, item in enumerate(items):
        seed, plan = _pair(index, item)
        try:
            prepared.append(_prepare(seed, plan, **options))
        except VerifyError as error:
            raise VerifyError(f"item {index}: {error.message}") from None
        pairs.append((prepared[-1].name, plan))
    if executor == "ray":
        return _on_ray(pairs, sent, jobs, ray_address, float(ray_cpus))
    return _judged_as_they_finish(prepared, jobs or os.cpu_count() or 1)


def _on_ray(
    pairs: list[tuple[str, Any]],
    options: dict[str, Any],
    jobs: int | None,
    address: str | None,
    cpus: float,
) -> Iterator[tuple[int, Verdict]]:
    """Send each plan to the Ray cluster: Ray is imported and connected to now, the seed
    folders read now, so that what is wrong raises before the first verdict is asked."""
    from sandboxed_coding_agent.core.batches import on_ray
    from sandboxed_coding_agent.core.batches.seed_bundles import SeedBundle, pack_seed

    bundles: dict[str, SeedBundle | None] = {}
    try:
        ray = on_ray.import_ray("executor='ray'")
        for index, (seed, _) in enumerate(pairs):
            if seed not in bundles:
                try:
                    bundles[seed] = pack_seed(seed)
                except UsageError as error:
                    raise VerifyError(f"item {index}: {error.message}") from None
        owned = on_ray.connect(ray, address)
    except VerifyError:
        raise
    except UsageError as error:
        raise VerifyError(error.message) from None
    calls = [(seed, bundles[seed], plan, options) for seed, plan in pairs]
    return _judged_on_ray(ray, calls, jobs, cpus, owned)


def _judged_on_ray(
    ray: Any,
    calls: list[tuple[str, Any, Any, dict[str, Any]]],
    jobs: int | None,
    cpus: float,
    owned: bool,
) -> Iterator[tuple[int, Verdict]]:
    from sandboxed_coding_agent.core.batches.on_ray import POLL_SECONDS, RETRIES

    running: dict[Any, int] = {}
    try:
        remote = ray.remote(num_cpus=cpus, max_retries=RETRIES, retry_exceptions=False)(
            _verify_on_node
        )
        bound = jobs or max(1, int(ray.cluster_resources().get("CPU", 1) // cpus))
        stored: dict[str, Any] = {}  # each seed folder put in the object store once
        for seed, bundle, _, _ in calls:
            if bundle is not None and seed not in stored:
                stored[seed] = ray.put(bundle)
        waiting = list(range(len(calls)))
        while waiting or running:
            while waiting and len(running) < bound:
                index = waiting.pop(0)
                seed, _, plan, options = calls[index]
                running[remote.remote(seed, stored.get(seed), plan, options)] = index
            ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_SECONDS)
            for ref in ready:
                index = running.pop(ref)
                yield index, _from_node(ray, ref, calls[index][0])
    finally:
        # A caller that stops early, or Ctrl-C: the plans sent are cancelled.
        for ref in running:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        if owned:
            with contextlib.suppress(Exception):
                ray.shutdown()


def _from_node(ray: Any, ref: Any, seed: str) -> Verdict:
    """The verdict a node sent, or one without a reward saying why none came."""
    try:
        verdict = ray.get(ref)
    except ray.exceptions.RayTaskError as error:  # the node could not test it
        cause = error.cause if isinstance(error.cause, AgentError) else None
        message = cause.message if cause is not None else str(error).strip().splitlines()[-1]
        kind = "configuration" if cause is not None else "internal"
        failure = VerdictError(kind=kind, message=f"on the Ray node: {message}")
        return Verdict(seed=seed, passed=False, reward=None, error=failure)
    except ray.exceptions.RayError as error:  # the node was lost, and again
        message = (
            f"the Ray node testing the plan was lost, and so was the one that tested it "
            f"again ({type(error).__name__}); no verdict was reached"
        )
        failure = VerdictError(kind="sandbox", message=message)
        return Verdict(seed=seed, passed=False, reward=None, error=failure)
    if not isinstance(verdict, Verdict):
        raise TypeError(f"a Ray node answered {type(verdict).__name__}, not a Verdict")
    return verdict


def _verify_on_node(seed: str, bundle: Any, plan: Any, options: dict[str, Any]) -> Verdict:
    """On a Ray node: :func:`verify`, the seed folder unpacked in a temporary folder."""
    import shutil
    import tempfile
    from pathlib import Path

    from sandboxed_coding_agent.core.batches.seed_bundles import unpack_seed

    if bundle is None:
        return verify(seed, plan, **options)
    folder = tempfile.mkdtemp(prefix="agent-seed-")
    try:
        verdict = verify(unpack_seed(bundle, Path(folder)), plan, **options)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return attrs.evolve(verdict, seed=seed)


def _judged_as_they_finish(prepared: list[_Prepared], jobs: int) -> Iterator[tuple[int, Verdict]]:
    def judged(index: int) -> tuple[int, Verdict]:
        started = time.monotonic()
        verdict = _judge(prepared[index])
        return index, attrs.evolve(verdict, seconds=round(time.monotonic() - started, 3))

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="verify")
    try:
        waiting: set[Future[tuple[int, Verdict]]] = {
            pool.submit(judged, index) for index in range(len(prepared))
        }
        while waiting:
            done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    finally:
        # A caller that stops early: the plans not started are not tested.
        pool.shutdown(wait=True, cancel_futures=True)


def _pair(index: int, item: object) -> tuple[Any, Any]:
    if isinstance(item, Mapping):
        missing = [key for key in ("seed", "plan") if key not in item]
        extra = sorted(set(item) - {"seed", "plan"})
        if missing or extra:
            problem = f"no {missing[0]!r}" if missing else f"an unknown key {extra[0]!r}"
            raise VerifyError(f"item {index}: a mapping with 'seed' and 'plan' has {problem}")
        return item["seed"], item["plan"]
    if isinstance(item, tuple | list) and len(item) == 2:
        return item[0], item[1]
    raise VerifyError(
        f"item {index}: expected a (seed, plan) pair or a mapping with 'seed' and 'plan', "
        f"not {type(item).__name__}"
    )


@functools.cache
def _host(disabled: tuple[str, ...]) -> PluginHost:
    """The plugins, loaded once per process (and set of disabled ones)."""
    return PluginHost(disabled=disabled)


_host_lock = threading.Lock()


def _prepare(
    seed: object,
    plan: object,
    *,
    runner: str = "local",
    policies: Sequence[str] = (),
    no_policies: Sequence[str] = (),
    policy_params: Mapping[str, Mapping[str, Any]] | None = None,
    limits: Mapping[str, float] | None = None,
    partial_credit: bool = False,
    record: bool = True,
    environ: Mapping[str, str],
) -> _Prepared:
    from sandboxed_coding_agent.core.plugins import disabled_from_environment

    if isinstance(seed, os.PathLike):
        seed = os.fspath(seed)
    if not isinstance(seed, str) or not seed:
        raise VerifyError(f"seed must be a seed's name or a folder, not {seed!r}")
    for name, value in (("policies", policies), ("no_policies", no_policies)):
        if isinstance(value, str | bytes) or not all(isinstance(p, str) for p in value):
            raise VerifyError(f"{name} must be a list of policy names, not {value!r}")
    try:
        with _host_lock:
            host = _host(tuple(disabled_from_environment(environ.get)))
        project = host.seed(seed)
        chosen = tuple(
            host.policies_for(
                project,
                switch_on=tuple(policies),
                switch_off=tuple(no_policies),
                parameters=dict(policy_params or {}),
            )
        )
        test_runner = host.runner(runner)
        chosen_limits = _limits_with(project.limits, limits or {})
        checked = _read_plan(plan, attrs.evolve(project, limits=chosen_limits))
    except VerifyError:
        raise
    except UsageError as error:
        raise VerifyError(error.message) from None
    return _Prepared(
        name=seed,
        seed=project,
        runner=test_runner,
        policies=chosen,
        limits=chosen_limits,
        plan=checked,
        partial_credit=bool(partial_credit),
        record=bool(record),
        environ=environ,
    )


def _limits_with(limits: SeedLimits, given: Mapping[str, Any]) -> SeedLimits:
    if not isinstance(given, Mapping):
        raise VerifyError(f"limits must be a mapping of limit names to numbers, not {given!r}")
    known = [field.name for field in attrs.fields(SeedLimits)]
    for name in given:
        if name not in known:
            raise VerifyError(f"unknown limit {name!r}; the limits are: {', '.join(known)}")
    try:
        return attrs.evolve(limits, **given)
    except (TypeError, ValueError) as error:  # LimitError is a ValueError
        raise VerifyError(str(error)) from None


def _read_plan(plan: object, seed: SeedProject) -> PatchPlan | PlanRejected:
    """The plan, or why it is none: what the model wrote is judged, not raised."""
    from sandboxed_coding_agent.core.plans import contract
    from sandboxed_coding_agent.core.plans.edits import neither_json_nor_diff, plan_from_plan_file
    from sandboxed_coding_agent.core.plans.plan_requests import ShownFiles

    if isinstance(plan, PatchPlan):
        return plan
    if isinstance(plan, Mapping):
        try:
            data = json.dumps(plan, ensure_ascii=False).encode("utf-8", "surrogatepass")
        except (TypeError, ValueError, RecursionError) as error:
            raise VerifyError(f"the plan mapping is not JSON data: {error}") from None
    elif isinstance(plan, str):
        data = plan.encode("utf-8", "surrogatepass")
    elif isinstance(plan, bytes):
        data = plan
    else:
        raise VerifyError(
            "plan must be the text of a JSON plan or of a unified diff, that JSON as a "
            f"mapping, or a PatchPlan, not {type(plan).__name__}"
        )

    def refused(rule: str, message: str) -> PlanRejected:
        return PlanRejected([Rejection(policy=contract.POLICY, rule=rule, message=message)])

    if len(data) > MAX_PLAN_BYTES:
        return refused("plan-json", f"the plan is larger than {MAX_PLAN_BYTES} bytes")
    problem = neither_json_nor_diff(data)
    if problem is not None:
        message = f"the plan is neither a plan's JSON nor a unified diff ({problem})"
        return refused("plan-json", message)
    try:
        return plan_from_plan_file(data, ShownFiles(seed), limits=seed.limits)
    except PlanRejected as rejected:
        return rejected


def _judge(prepared: _Prepared) -> Verdict:
    from sandboxed_coding_agent.core.records.run_record_files import new_run_id, record_path
    from sandboxed_coding_agent.core.runs import orchestrator, recording

    plan = prepared.plan
    if isinstance(plan, PlanRejected):
        return _refused(prepared.name, plan, run_id=None)
    run_id = new_run_id() if prepared.record else None
    common: dict[str, Any] = {
        "runner": prepared.runner,
        "policies": prepared.policies,
        "plan": plan,
        "limits": prepared.limits,
        "environ": prepared.environ,
    }
    try:
        if run_id is not None:
            result = recording.run_recorded(prepared.seed, run_id=run_id, **common)
        else:
            result = orchestrator.run(prepared.seed, **common)
    except Interrupted:
        raise
    except AgentError as error:
        kept = run_id
        if run_id is not None and not record_path(run_id, prepared.environ).is_file():
            kept = None
        if isinstance(error, PlanRejected):
            return _refused(prepared.name, error, run_id=kept)
        if error.kind == "usage":  # the seed's files, read as the run starts
            raise VerifyError(error.message) from None
        return Verdict(
            seed=prepared.name,
            passed=False,
            reward=None,
            error=VerdictError(kind=error.kind, message=error.message),
            run_id=kept,
            sandbox_id=error.sandbox_id,
        )
    except Exception as error:  # the agent's own failure: no verdict, but the loop goes on
        return Verdict(
            seed=prepared.name,
            passed=False,
            reward=None,
            error=VerdictError(kind="internal", message=f"{type(error).__name__}: {error}"),
        )
    return _verdict(prepared.name, result, prepared.partial_credit)


def _refused(name: str, rejected: PlanRejected, run_id: str | None) -> Verdict:
    return Verdict(
        seed=name,
        passed=False,
        reward=0.0,
        error=VerdictError(kind="policy", message=rejected.message, rejections=rejected.rejections),
        run_id=run_id,
    )


def _verdict(name: str, result: RunResult, partial_credit: bool) -> Verdict:
    passed = result.tests_passed
    reward = 1.0 if passed else (_fraction(result) if partial_credit else 0.0)
    return Verdict(
        seed=name,
        passed=passed,
        reward=reward,
        evidence=result.evidence,
        test_report=result.test_report,
        grade=result.grade,
        output_tests=result.output_tests,
        run_id=result.run_id,
        sandbox_id=result.sandbox_id,
        test_exit_code=result.test_exit_code,
        test_timed_out=result.test_timed_out,
        limit_hit=result.limit_hit,
        changed_files=result.changed_files,
        diff=result.diff,
        test_output=result.test_output,
    )


def _fraction(result: RunResult) -> float:
    """The share of a failed run's units that passed: a graded seed's ``fail_to_pass`` tests
    (none if a ``pass_to_pass`` test broke or the report is unsound), or else the test
    command as one unit; then each output test. Below 1.0 for any failed run."""
    grade = result.grade
    if grade is not None:
        if grade.report_problem is not None or not grade.pass_to_pass.all_passed:
            return 0.0
        passed, total = len(grade.fail_to_pass.passed), grade.fail_to_pass.total
    else:
        own = (
            result.test_exit_code == 0
            and not result.test_timed_out
            and result.limit_hit is None
            and (result.test_report is None or result.test_report.passed)
        )
        passed, total = int(own), 1
    passed += sum(test.passed for test in result.output_tests)
    total += len(result.output_tests)
    if not total or passed >= total:  # every unit passed, yet the run failed: claim nothing
        return 0.0
    return passed / total

"""Batches on a Ray cluster: each task a Ray task, run by the local sandbox of its node.

``agent batch --executor ray`` hands each task to :func:`run_on_ray`, which connects to
a running cluster and submits it as a Ray task reserving one CPU (or ``cpus``); the
node Ray picks runs it with :func:`~.batch.run_task`, exactly as ``agent batch`` runs a
task on this machine, and sends its result back as the JSON of its results line. This
machine, the driver, alone writes the results file: resume, ``--retry-errors`` and
shards are decided here before anything is submitted.

What travels: the task itself; a seed folder by content (:mod:`.seed_bundles`),
unpacked into a private temporary folder on the node; an installed seed by name. The
node uses its own environment (the planner's settings, the records folder) and its own
plugins. A budget travels as what is left of it when the task starts; what the task
spent comes back and is added here.

A node lost while running a task (its worker process killed, the node gone) has that
task run again once elsewhere by Ray; lost twice, the task ends as a ``sandbox-error``
(no verdict was reached: ``--resume --retry-errors`` runs it again). Ctrl-C cancels
the cluster's tasks: each stops its sandboxes as a local run does, and those still
running after the grace period are killed.

Ray is imported only here, and only when a batch asks for it: it is an optional extra
(:data:`RAY_INSTALL`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

from ..errors import Interrupted, UsageError
from ..plans.budget import Budget, Ledger, Prices, Spend
from ..plugins import PluginHost
from ..runs.task_pool import GRACE_SECONDS, StopRequest
from ..serialization import structure, to_json
from .environment import batch_environment, utc_now
from .results import TaskError, TaskResult, without_key
from .seed_bundles import SeedBundle, pack_seed, unpack_seed
from .tasks import TaskLine

#: How to install what ``--executor ray`` needs.
RAY_INSTALL = "pip install 'sandboxed-coding-agent[ray]' (or: uv add 'sandboxed-coding-agent[ray]')"
#: The executors ``agent batch --executor`` knows.
EXECUTORS = ("local", "ray")
#: How many times Ray runs a task again when the node running it is lost.
RETRIES = 1
#: How long the driver waits for a result before it looks again (Ctrl-C is seen then).
POLL_SECONDS = 0.5
#: How long the driver tries to reach the cluster's address before it gives up.
CONNECT_SECONDS = 5.0


#: Ray's own switch that, for a driver started by ``uv run``, uploads the current folder
#: and runs every worker through ``uv run``: off unless the user set it, since the nodes
#: run the agent they have installed and a batch sends only its seeds.
UV_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def import_ray(asked_by: str = "--executor ray") -> ModuleType:
    """Ray, or a usage error saying how to install it (and that ``asked_by`` needs it)."""
    os.environ.setdefault(UV_HOOK, "0")  # read by Ray as it is imported
    try:
        return importlib.import_module("ray")
    except ImportError as error:
        raise UsageError(
            f"{asked_by} needs Ray, which is not installed ({error}); install the "
            f"extra: {RAY_INSTALL}"
        ) from None


@attrs.frozen
class RayJob:
    """What one Ray task receives besides its seed's content: the task, and what the
    batch says."""

    task_line: TaskLine
    model: str | None
    budget: Budget
    prices: Prices | None
    spent: Spend
    disabled: tuple[str, ...]


def run_on_ray(
    tasks: Sequence[TaskLine],
    *,
    address: str | None,
    cpus: float,
    jobs: int | None,
    model: str | None,
    ledger: Ledger,
    disabled: Sequence[str],
    run_here: Callable[[TaskLine], TaskResult],
    started: Callable[[TaskLine], None],
    finished: Callable[[TaskResult], None],
    interrupted: Callable[[int], None],
    gave_up: Callable[[int], None],
    grace_seconds: float = GRACE_SECONDS,
) -> None:
    """Run ``tasks`` on the Ray cluster at ``address``, calling ``finished`` as each ends.

    :param address: the cluster's address (``HOST:PORT`` of its head, or ``ray://...``);
        ``None``: ``RAY_ADDRESS``, or the cluster ``ray start`` started on this machine.
    :param cpus: the CPUs each task reserves.
    :param jobs: the most tasks submitted at once; ``None``: as many as the cluster's
        CPUs hold.
    :param run_here: runs a task on this machine; used only for a task that starts
        once the budget is spent (it ends as ``budget`` at once, running nothing).
    :raises UsageError: Ray is not installed, or no cluster answers at ``address``.
    :raises KeyboardInterrupt: Ctrl-C: the cluster's tasks were cancelled first.
    """
    ray = import_ray()
    bundles = _bundles(tasks)
    owned = connect(ray, address)
    try:
        remote = ray.remote(num_cpus=cpus, max_retries=RETRIES, retry_exceptions=False)(run_ray_job)
        bound = jobs or max(1, int(ray.cluster_resources().get("CPU", 1) // cpus))
        # Each seed folder is put in the cluster's object store once, whatever its tasks.
        stored = {seed: ray.put(bundle) for seed, bundle in bundles.items()}
        waiting = list(tasks)
        running: dict[Any, TaskLine] = {}
        try:
            while waiting or running:
                while waiting and len(running) < bound:
                    task_line = waiting.pop(0)
                    started(task_line)
                    if ledger.reached() is not None:  # nothing to send: it ends as budget
                        unsent = run_here(task_line)
                        finished(attrs.evolve(unsent, executor="ray", worker=None))
                        continue
                    job = RayJob(
                        task_line=task_line,
                        model=model,
                        budget=ledger.budget,
                        prices=ledger.prices,
                        spent=ledger.spent,
                        disabled=tuple(disabled),
                    )
                    running[remote.remote(job, stored.get(task_line.task.seed))] = task_line
                if running:
                    _collect_ready(ray, running, model, ledger, finished)
        except KeyboardInterrupt:
            _cancel(ray, running, ledger, model, finished, interrupted, gave_up, grace_seconds)
            raise
    finally:
        if owned:
            with contextlib.suppress(Exception):
                ray.shutdown()


def _bundles(tasks: Sequence[TaskLine]) -> dict[str, SeedBundle]:
    """Each seed folder the tasks name, read once (before anything is submitted)."""
    found: dict[str, SeedBundle] = {}
    for task_line in tasks:
        seed = task_line.task.seed
        if seed not in found:
            bundle = pack_seed(seed)
            if bundle is not None:
                found[seed] = bundle
    return found


def connect(ray: ModuleType, address: str | None) -> bool:
    """Connect this process to the cluster at ``address``, unless it is connected already
    (a program running on Ray); whether it connected, and so should disconnect.

    :raises UsageError: no cluster answers there.
    """
    if ray.is_initialized():
        return False
    where = address or os.environ.get("RAY_ADDRESS") or "auto"
    problem = _unreachable(where)
    if problem is not None:  # Ray itself would retry for minutes
        raise UsageError(
            f"cannot reach a Ray cluster at {where!r}: {problem}; check the address "
            "(`ray status --address ADDR`) and that this machine reaches it"
        )
    main = threading.current_thread() is threading.main_thread()
    on_term = signal.getsignal(signal.SIGTERM) if main else None
    try:
        ray.init(
            address=where,
            logging_level="warning",
            log_to_driver=False,
            configure_logging=False,
        )
    except Exception as error:  # Ray raises ConnectionError, ValueError, RuntimeError...
        hint = (
            "start one with `ray start --head`, or name it with --ray-address HOST:PORT"
            if address is None
            else "check the address (`ray status --address ADDR`) and that this machine reaches it"
        )
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(f"cannot reach a Ray cluster at {where!r}: {first}; {hint}") from None
    finally:
        if on_term is not None:  # Ray's own handler exits at once: SIGTERM stops a batch
            signal.signal(signal.SIGTERM, on_term)  # as Ctrl-C does, its tasks cancelled
    return True


def _unreachable(where: str) -> str | None:
    """Why nothing answers at the cluster address ``where`` (``HOST:PORT``, or
    ``ray://HOST:PORT``); ``None`` when something does, or it names no port (``auto``)."""
    host, colon, port = where.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit() or not host:
        return None if where == "auto" else "it is not HOST:PORT"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS):
            return None
    except (OSError, ValueError, OverflowError) as error:
        return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _count(ledger: Ledger, result: TaskResult) -> None:
    """Add what a task spent on its node to the batch's ledger."""
    if result.spend is not None:
        ledger.add(result.spend)


def _collect_ready(
    ray: ModuleType,
    running: dict[Any, TaskLine],
    model: str | None,
    ledger: Ledger,
    finished: Callable[[TaskResult], None],
) -> None:
    """Wait a moment for a running task to end; hand on the result of each that did."""
    ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_SECONDS)
    for ref in ready:
        result = _collected(ray, ref, running.pop(ref), model)
        if result is not None:
            _count(ledger, result)
            finished(result)


def _collected(
    ray: ModuleType, ref: Any, task_line: TaskLine, model: str | None
) -> TaskResult | None:
    """The result of a finished Ray task; ``None`` for one the interrupt stopped."""
    exceptions = ray.exceptions
    try:
        line = ray.get(ref)
    except exceptions.TaskCancelledError:
        return None
    except exceptions.RayTaskError as error:  # the task's own code failed: a bug
        message = f"on the Ray node: {error}"
        return _failed(task_line, model, "internal-error", "internal", message)
    except exceptions.RayError as error:  # the node or its worker was lost, again
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        message = (
            f"the Ray node running the task was lost, and so was the one that ran it again "
            f"({type(error).__name__}: {first}); no verdict was reached"
        )
        return _failed(task_line, model, "sandbox-error", "sandbox", message)
    if not line:
        return None  # stopped by the interrupt on its node: no result, --resume runs it
    result = structure(json.loads(line), TaskResult)
    here = batch_environment()
    host = result.env.host if result.env is not None else here.host
    return attrs.evolve(result, env=attrs.evolve(here, host=host))


def _failed(
    task_line: TaskLine, model: str | None, status: str, kind: str, message: str
) -> TaskResult:
    task = task_line.task
    return TaskResult(
        id=task_line.task_id,
        line=task_line.line,
        seed=task.seed,
        status=status,
        seconds=0.0,
        prompt=task.prompt,
        planner=task.planner,
        runner=task.runner,
        model=task.model or model,
        error=TaskError(kind=kind, message=message),
        started_at=utc_now(),
        env=batch_environment(),
        executor="ray",
    )


def _cancel(
    ray: ModuleType,
    running: dict[Any, TaskLine],
    ledger: Ledger,
    model: str | None,
    finished: Callable[[TaskResult], None],
    interrupted: Callable[[int], None],
    gave_up: Callable[[int], None],
    grace_seconds: float,
) -> None:
    """Cancel the cluster's running tasks: each is told to stop its sandboxes, those
    that finish within ``grace_seconds`` keep their results, the rest are killed."""
    if not running:
        return
    interrupted(len(running))
    for ref in running:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=False)
    deadline = time.monotonic() + grace_seconds
    try:
        while running and time.monotonic() < deadline:
            _collect_ready(ray, running, model, ledger, finished)
    except KeyboardInterrupt:
        pass  # the second signal: at once
    if running:
        gave_up(len(running))
        for ref in running:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)


# On the node: what each Ray task runs.


@functools.cache
def _host(disabled: tuple[str, ...]) -> PluginHost:
    """The node's plugins, loaded once per worker process."""
    from ..plugins import disabled_from_environment

    return PluginHost(disabled=[*disabled_from_environment(), *disabled])


def run_ray_job(job: RayJob, bundle: SeedBundle | None) -> str:
    """Run one task on this node, ``bundle`` being its seed folder's content (``None``
    for an installed seed); its results line (the key blanked), or ``""`` when the
    interrupt stopped it before it ended.

    Runs in a Ray worker process. The run is a thread of its own, so that the
    ``KeyboardInterrupt`` Ray raises here when the driver cancels the task stops its
    sandboxes (the stop request) before the task gives up.
    """
    from .batch import run_task

    host = _host(job.disabled)
    stop = StopRequest()
    ledger = Ledger(job.budget, job.prices, job.spent)
    box: list[str] = []
    failure: list[BaseException] = []
    folder = tempfile.mkdtemp(prefix="agent-seed-") if bundle is not None else None

    def work() -> None:
        task_line = job.task_line
        try:
            if bundle is not None and folder is not None:
                seed = unpack_seed(bundle, Path(folder))
                task_line = attrs.evolve(task_line, task=attrs.evolve(task_line.task, seed=seed))
            result = run_task(
                task_line,
                host,
                plugins=host.plugin_infos(),
                model=job.model,
                ledger=ledger,
                stop=stop,
            )
            node = _node_id()
            result = attrs.evolve(result, seed=job.task_line.task.seed, executor="ray", worker=node)
            line = to_json(without_key(result))
            if bundle is not None and folder is not None:  # messages name the seed's folder
                line = _renamed(line, folder, job.task_line.task.seed, bundle)
            box.append(line)
        except Interrupted:
            box.append("")
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=work, name="agent-ray-task", daemon=True)
    try:
        thread.start()
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:  # the driver cancelled the task
        stop.request()
        thread.join(GRACE_SECONDS)
        raise
    finally:
        if folder is not None and not thread.is_alive():
            shutil.rmtree(folder, ignore_errors=True)
    if failure:
        raise failure[0]
    return box[0]


def _renamed(line: str, folder: str, seed: str, bundle: SeedBundle) -> str:
    """``line`` naming the folder the task named where it names the node's copy of it."""
    original = str(Path(seed).parent) if bundle.manifest is not None else seed
    return line.replace(json.dumps(folder)[1:-1], json.dumps(original)[1:-1])


def _node_id() -> str:
    ray = importlib.import_module("ray")
    return str(ray.get_runtime_context().get_node_id())

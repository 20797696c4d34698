"""Batch runs: a file of tasks, run with bounded concurrency, one result line per task.

Each task is run as ``agent run`` would run it, recorded (:func:`run_task`), at
most ``jobs`` at once (:func:`run_tasks`). The tasks file is read by
:mod:`.batch_tasks` and the results file written and read by :mod:`.batch_results`;
their names are importable from here too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence

from ..errors import AgentError, Interrupted, PlanRejected
from ..model import Attempt, PlannerOptions, RunResult, TokenUsage
from ..plans.budget import Ledger
from ..plugins import PluginHost, PluginInfo
from ..records import run_records
from ..runs import recording
from ..runs.events import EventLog
from ..runs.task_pool import StopRequest, run_tasks
from .environment import batch_environment, utc_now
from .results import (
    RESULT_FORMAT,
    STATUSES,
    ModelTally,
    ResultsFile,
    TaskError,
    TaskResult,
    blank_key,
    latest,
    parse_results,
    per_model,
    read_results,
    total_spend,
    without_key,
)
from .tasks import (
    MAX_TASK_LINE_BYTES,
    MAX_TASKS_FILE_BYTES,
    RUN_OPTIONS,
    BatchTask,
    InvalidLine,
    TaskLine,
    read_task_lines,
    read_tasks,
    supported_run_options,
    unknown_names,
)

__all__ = [
    "MAX_TASKS_FILE_BYTES",
    "MAX_TASK_LINE_BYTES",
    "RESULT_FORMAT",
    "RUN_OPTIONS",
    "STATUSES",
    "BatchTask",
    "InvalidLine",
    "ModelTally",
    "ResultsFile",
    "StopRequest",
    "TaskError",
    "TaskLine",
    "TaskResult",
    "blank_key",
    "latest",
    "parse_results",
    "per_model",
    "read_results",
    "read_task_lines",
    "read_tasks",
    "run_task",
    "run_tasks",
    "supported_run_options",
    "tokens_of",
    "total_spend",
    "unknown_names",
    "without_key",
]

_STATUS_OF_KIND = {
    "policy": "rejected",
    "budget": "budget",
    # The exploring planner's model made no change to test (exit 7 of `agent run`).
    "steps": "no-submission",
    "format": "no-submission",
    "provider": "provider-error",
    "sandbox": "sandbox-error",
    "usage": "usage-error",
    "configuration": "usage-error",
}


def tokens_of(result: RunResult) -> int:
    """Tokens of every planner call the run made (every attempt of every candidate)."""
    attempts = [a for c in result.candidates for a in c.attempts] or list(result.attempts)
    usages: list[TokenUsage | None] = [a.usage for a in attempts] or [result.usage]
    return sum((u.prompt_tokens or 0) + (u.completion_tokens or 0) for u in usages if u)


def run_task(
    task_line: TaskLine,
    host: PluginHost,
    *,
    plugins: Sequence[PluginInfo],
    environ: Mapping[str, str] = os.environ,
    model: str | None = None,
    ledger: Ledger | None = None,
    stop: StopRequest | None = None,
    events: EventLog | None = None,
) -> TaskResult:
    """Run one task as ``agent run`` would, recorded; any error becomes its result.

    :param model: the model for a task that names none (``agent batch --model``).
    :param ledger: the batch's: the task's planner calls are counted in a child of it
        and held to its budget. A task that a budget stops before it passed ends in the
        status ``budget``, and so does one that starts after the budget was reached
        (without any planner call).
    :param stop: the batch's stop request, which the run listens to.
    :param events: the batch's events file: the run's events are written there.
    :raises Interrupted: the stop request stopped the run before it passed: it has
        no result (its record says so), and ``--resume`` runs it again.
    """
    task = task_line.task
    model = task.model or model
    started = time.monotonic()
    started_at = utc_now()
    run_id = run_records.new_run_id()
    result: RunResult | None = None
    error: TaskError | None = None
    made: dict[int, list[Attempt]] = {}
    spending = (ledger or Ledger()).child()
    reached = spending.reached()
    if reached is not None:  # nothing to start: no record, no planner call
        return TaskResult(
            id=task_line.task_id,
            line=task_line.line,
            seed=task.seed,
            status="budget",
            seconds=0.0,
            prompt=task.prompt,
            planner=task.planner,
            runner=task.runner,
            model=model,
            error=TaskError(kind="budget", message=f"not started: the budget is spent: {reached}"),
            spend=spending.spent,
            started_at=started_at,
            env=batch_environment(),
            instruction=task.prompt,
            executor="local",
            worker=batch_environment().host,
        )
    instruction = task.prompt
    try:
        seed = host.seed(task.seed)
        instruction = task.prompt or seed.default_prompt
        options = {name: getattr(task, name) for name in RUN_OPTIONS}
        result = recording.run_recorded(
            seed,
            runner=host.runner(task.runner),
            planner=host.planner(task.planner),
            policies=host.policies_for(seed),
            instruction=task.prompt,
            plugins=plugins,
            run_id=run_id,
            environ=environ,
            made=made,
            planner_options=PlannerOptions(model=model, edit_format=task.edit_format),
            ledger=spending,
            stop=stop,
            events=events.for_task(task_line.task_id) if events is not None else None,
            **{name: value for name, value in options.items() if value is not None},
        )
        status = "passed" if result.tests_passed else "failed"
    except Interrupted:
        raise
    except AgentError as failure:
        status = _STATUS_OF_KIND.get(failure.kind, "internal-error")
        error = TaskError(
            kind=failure.kind,
            message=failure.message,
            planner_task_id=failure.planner_task_id,
            sandbox_id=failure.sandbox_id,
            rejections=failure.rejections if isinstance(failure, PlanRejected) else (),
            candidates=recording.made_candidates(made),
        )
    except Exception as failure:  # one task's bug must not end the batch
        status = "internal-error"
        error = TaskError(kind="internal", message=f"{type(failure).__name__}: {failure}")
    kept = run_records.record_path(run_id, environ).is_file()
    return TaskResult(
        id=task_line.task_id,
        line=task_line.line,
        seed=task.seed,
        status=status,
        seconds=round(time.monotonic() - started, 3),
        resolution=result.grade.resolution if result is not None and result.grade else None,
        prompt=task.prompt,
        planner=task.planner,
        runner=task.runner,
        model=model,
        tokens=tokens_of(result) if result is not None else spending.spent.tokens,
        run_id=run_id if kept else None,
        result=result,
        error=error,
        spend=spending.spent,
        started_at=started_at,
        env=batch_environment(),
        instruction=instruction,
        executor="local",
        worker=batch_environment().host,
    )

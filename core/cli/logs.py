"""``agent logs``: show the record of a run or of a planner call."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from .options import DebugOption, JsonOption
from .terminal import echo, print_json, reporting

if TYPE_CHECKING:
    from ..records.planner_calls import PlannerRecord
    from ..records.run_records import RunRecord


def logs(
    record_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID|PLANNER_TASK_ID",
            help="A run ID (run-...) or a planner task ID (plan-...), as a run printed it.",
        ),
    ],
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show a run's record (plans, tests, error) or a planner call's (each attempt, the answer)."""
    from ..records import planner_call_text as record_text
    from ..records import planner_calls, run_records, trajectories
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        if run_records.is_run_id(record_id):
            shown: RunRecord | PlannerRecord | None = None
            noted = trajectories.noted_calls(record_id)
            if not noted or _recorded(record_id):
                shown = _run_or_call(record_id)
            if not isinstance(shown, planner_calls.PlannerRecord):
                _show_run(record_id, shown, noted, as_json)
                return
        steps: list[trajectories.TrajectoryStep] = []
        problem = None
        planner_calls.check_task_id(record_id)
        steps, problem = trajectories.read_steps(record_id)
        if steps and not os.path.lexists(planner_calls.record_path(record_id)):
            shown = None  # the call never ended (the run was killed): its steps only
        else:
            shown = planner_calls.read_record(record_id)
        if as_json:
            data = to_jsonable(shown) if shown is not None else {"planner_task_id": record_id}
            if steps or problem:
                data = {**data, "steps": to_jsonable(steps), "steps_problem": problem}
            print_json(data, indent=2)
            return
        if shown is not None:
            echo(record_text.render(shown))
        else:
            echo(f"planner task {record_id}: no record (the call did not end); its steps:")
        if steps or problem:
            echo(trajectories.render_steps(steps, problem))


def _recorded(run_id: str) -> bool:
    from ..records import planner_calls, run_records

    return os.path.lexists(run_records.record_path(run_id)) or os.path.lexists(
        planner_calls.record_path(run_id)
    )


def _show_run(run_id: str, record: RunRecord | None, noted: list[str], as_json: bool) -> None:
    """A run's record (or, for a run killed before it wrote one, that it has none), then
    the steps of each of its planner calls that explored."""
    from ..records import planner_calls, trajectories
    from ..records.run_history import planner_task_ids, render_run
    from ..serialization import to_jsonable

    task_ids = [*(planner_task_ids(record) if record is not None else []), *noted]
    # A planner names its tasks as it likes: a name no trajectory can have has none.
    named = [t for t in dict.fromkeys(task_ids) if planner_calls.is_task_id(t)]
    kept = [(t, *trajectories.read_steps(t)) for t in named]
    kept = [(task_id, steps, problem) for task_id, steps, problem in kept if steps or problem]
    if as_json:
        data = to_jsonable(record) if record is not None else {"run_id": run_id}
        if kept:
            data = {
                **data,
                "trajectories": [
                    {"planner_task_id": t, "steps": to_jsonable(s), "steps_problem": p}
                    for t, s, p in kept
                ],
            }
        print_json(data, indent=2)
        return
    if record is not None:
        echo(render_run(record))
    else:
        echo(f"run {run_id}: no record (the run did not end); the steps of its planner calls:")
    for task_id, steps, problem in kept:
        echo(f"planner task {task_id}:")
        echo(trajectories.render_steps(steps, problem))


def _run_or_call(run_id: str) -> RunRecord | PlannerRecord:
    """The record of run ``run_id``; or of a planner call, when a planner named one so
    (a planner names its tasks as it likes) and no run is.

    :raises UsageError: there is neither, or the record is damaged.
    """
    from ..errors import UsageError
    from ..records import planner_calls, run_records

    run_path = run_records.record_path(run_id)
    if os.path.lexists(run_path):
        return run_records.read_run_record(run_id)
    if os.path.lexists(planner_calls.record_path(run_id)):
        return planner_calls.read_record(run_id)
    raise UsageError(
        f"there is no record of run {run_id!r} in {run_path.parent} (records are kept on "
        "the machine that ran it, 30 days by default; see `agent runs list`)"
    )

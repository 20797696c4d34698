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
    from ..records import planner_calls, run_records
    from ..records.run_history import render_run
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        if run_records.is_run_id(record_id):
            shown = _run_or_call(record_id)
        else:
            shown = planner_calls.read_record(record_id)
        if as_json:
            print_json(to_jsonable(shown), indent=2)
        elif isinstance(shown, planner_calls.PlannerRecord):
            echo(record_text.render(shown))
        else:
            echo(render_run(shown))


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

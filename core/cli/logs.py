"""``agent logs``: show the record of a planner call."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import DebugOption, JsonOption
from .terminal import echo, print_json, reporting


def logs(
    planner_task_id: Annotated[
        str, typer.Argument(help="The planner task ID a run printed (plan-...).")
    ],
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show the record of a planner call: each attempt's status and timing, the answer or error."""
    from .. import records
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        record = records.read_record(planner_task_id)
        if as_json:
            print_json(to_jsonable(record), indent=2)
        else:
            echo(records.render(record))

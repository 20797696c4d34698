"""``agent diff``: a recorded run's chosen patch, as a unified diff ``git apply`` accepts."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .options import DebugOption


def diff(
    run: Annotated[
        str,
        typer.Argument(metavar="RUN_ID|FILE", help="A run ID (run-...) or a run record file."),
    ],
    debug: DebugOption = False,
) -> None:
    """Print the patch a recorded run chose, as a diff `git apply` accepts."""
    from ..records import run_records
    from ..runs.replay import recorded_seed
    from . import terminal

    with terminal.reporting(False, debug):
        record = run_records.read_run_record(run)
        # The recorded seed says which files a plan may replace; the record is not trusted to.
        seed = recorded_seed(terminal.load_plugins(), record)
        patch = run_records.git_diff(record.originals, run_records.chosen_plan(record, seed))
        if not patch:
            terminal.say(f"run {record.run_id}'s patch changes nothing")
        elif sys.stdout.isatty():
            terminal.echo(patch.rstrip("\n"))  # control characters shown escaped, as everywhere
        else:
            sys.stdout.write(patch)  # byte for byte, for `git apply`
            sys.stdout.flush()

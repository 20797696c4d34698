"""``agent diff``: a recorded run's chosen patch, as a unified diff ``git apply`` accepts."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from .options import DebugOption, JsonOption


def diff(
    run: Annotated[
        str,
        typer.Argument(metavar="RUN_ID|FILE", help="A run ID (run-...) or a run record file."),
    ],
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Print the patch a recorded run chose, as a diff `git apply` accepts.

    With --json: one object with the run's ID, whether it passed, its seed, the whole
    patch, and each file it changes with its old text (null for a file the run
    created), its new text and its diff.
    """
    from ..model import PatchPlan
    from ..records import run_records
    from ..runs.replay import recorded_seed
    from . import terminal

    with terminal.reporting(as_json, debug):
        record = run_records.read_run_record(run)
        # The recorded seed says which files a plan may replace; the record is not trusted to.
        seed = recorded_seed(terminal.load_plugins(), record)
        plan = run_records.chosen_plan(record, seed)
        patch = run_records.git_diff(record.originals, plan)
        if as_json:
            files: list[dict[str, Any]] = [
                {
                    "path": entry.path,
                    "old": record.originals.get(entry.path),
                    "new": entry.content,
                    "diff": run_records.git_diff(record.originals, PatchPlan([entry])),
                }
                for entry in plan.files
                if record.originals.get(entry.path) != entry.content
            ]
            terminal.print_json(
                {
                    "run_id": record.run_id,
                    "passed": record.result is not None and record.result.tests_passed,
                    "seed": record.seed.name,
                    "patch": patch,
                    "files": files,
                }
            )
        elif not patch:
            terminal.say(f"run {record.run_id}'s patch changes nothing")
        elif sys.stdout.isatty():
            terminal.echo(patch.rstrip("\n"))  # control characters shown escaped, as everywhere
        else:
            sys.stdout.write(patch)  # byte for byte, for `git apply`
            sys.stdout.flush()

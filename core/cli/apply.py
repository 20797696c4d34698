"""``agent apply``: write a recorded run's proven change into your own folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .options import DebugOption, JsonOption


def apply(
    run: Annotated[
        str,
        typer.Argument(metavar="RUN_ID|FILE", help="A run ID (run-...) or a run record file."),
    ],
    to: Annotated[
        Path,
        typer.Option(
            "--to",
            metavar="DIR",
            help="The folder to change (default: the current one).",
            file_okay=False,
            show_default=False,
        ),
    ] = Path(),
    force: Annotated[
        bool,
        typer.Option("--force", help="Apply the patch of a run that did not pass."),
    ] = False,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Write the change a recorded run proved into a folder (default: the current one).

    Every file the change touches must still hold the text the run changed (a file
    the run created must not exist), and every path must stay inside the folder;
    otherwise nothing is written. Each file is replaced whole, keeping its mode.
    Prints one line per file written (--json: one object). Exit codes: 0 written
    (or nothing to write); 2 a run that did not pass (without --force), a file that
    differs or is missing, a path that leaves the folder, or a missing or damaged record.
    """
    from ..errors import UsageError
    from ..records import run_records
    from ..records.applying import apply_patch
    from ..runs.replay import recorded_seed
    from . import terminal

    with terminal.reporting(as_json, debug):
        record = run_records.read_run_record(run)
        passed = record.result is not None and record.result.tests_passed
        if record.chosen_test is not None and not passed and not force:
            raise UsageError(
                f"run {record.run_id} did not pass, so its patch is not proven; "
                "nothing written (--force applies it anyway)"
            )
        # The recorded seed says which files a plan may replace; the record is not trusted to.
        seed = recorded_seed(terminal.load_plugins(), record)
        plan = run_records.chosen_plan(record, seed)
        written = apply_patch(record.originals, plan, to, run_id=record.run_id)
        if as_json:
            terminal.print_json(
                {
                    "run_id": record.run_id,
                    "passed": passed,
                    "folder": str(to.resolve()),
                    "files": [
                        {"path": f.path, "action": "created" if f.created else "changed"}
                        for f in written
                    ],
                }
            )
        elif not written:
            terminal.say(f"run {record.run_id}'s patch changes nothing; nothing written")
        else:
            for applied in written:
                action = "created" if applied.created else "changed"
                terminal.echo(terminal.one_line(f"{action} {applied.path}"))

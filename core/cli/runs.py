"""``agent runs``: the records of past runs, listed, and old ones pruned."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import DebugOption, JsonOption, group
from .terminal import echo, one_line, print_json, reporting, say

app = group("Records of past runs: list them, delete old ones.")


@app.command("list")
def runs_list(
    limit: Annotated[
        int,
        typer.Option(metavar="N", min=0, help="Show the N most recent runs (0: every one)."),
    ] = 20,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List recent runs, most recent first: run ID, start, duration, verdict, seed, model.

    The verdict is passed, failed, or the kind of error the run ended in (provider,
    policy, budget, sandbox, interrupted, ...). A file in the records folder that is
    not a record the agent wrote (damaged, too large, a link, a FIFO) is skipped with
    one line on stderr; --json lists it under "skipped".
    """
    from ..records.run_history import duration, list_runs, local_time
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        listing = list_runs(limit or None)
        if as_json:
            print_json(to_jsonable(listing), indent=2)
            return
        for skipped in listing.skipped:
            say(f"{skipped.name} skipped: {skipped.problem}")
        for run_id, noted in listing.unfinished:
            when = one_line(local_time(noted))
            say(f"{run_id}: no record (running, or killed) since {when}; agent logs {run_id}")
        if not listing.records:
            echo(f"no run recorded yet in {listing.folder}")
            return
        row = "{:<20}  {:<19}  {:>10}  {:<11}  {}"
        echo(row.format("RUN ID", "STARTED", "TOOK", "VERDICT", "SEED  MODEL"))
        for run in listing.runs:
            took, seed = duration(run.duration_seconds), one_line(run.seed)
            model = f"  {one_line(run.model)}" if run.model else ""
            started = one_line(local_time(run.started_at))
            echo(row.format(run.run_id, started, took, one_line(run.verdict), seed + model))
        shown = len(listing.runs) + len(listing.skipped)
        if shown < listing.records:
            say(f"the {shown} most recent of {listing.records:,} runs (--limit 0: every one)")


@app.command("prune")
def runs_prune(
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            metavar="DAYS",
            min=0.0,
            help="Delete run records, planner-call records and trajectories written more "
            "than DAYS ago.",
        ),
    ] = None,
    keep: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=0,
            help="Keep the N most recent run records whatever their age (alone: delete the "
            "rest, with their trajectories).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
    ] = False,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Delete old records of runs and planner calls; only files the agent wrote, never a link.

    Records are also pruned without asking: the first run of a day (agent run, agent
    batch) deletes those older than 30 days. SANDBOXED_CODING_AGENT_KEEP_RECORDS_DAYS=N
    keeps them N days instead; =off keeps them for ever.
    """
    from ..records.retention import prune
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        pruned = prune(older_than, keep, dry_run=dry_run)
        if as_json:
            print_json(to_jsonable(pruned), indent=2)
            return
        for file in pruned.left_alone:
            say(f"left alone: {file.path}: {file.reason}")
        verb = "would delete" if dry_run else "deleted"
        echo(
            f"{verb} {pruned.run_records:,} run records ({pruned.run_bytes:,} bytes), "
            f"{pruned.planner_records:,} planner-call records ({pruned.planner_bytes:,} bytes) "
            f"and {pruned.trajectories:,} trajectory files ({pruned.trajectory_bytes:,} bytes); "
            f"{pruned.kept:,} run records kept"
        )

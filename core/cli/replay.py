"""``agent replay``: re-test a recorded run's plans in fresh sandboxes, with no provider."""

from __future__ import annotations

from typing import Annotated

import typer

from .options import DebugOption, JsonOption


def replay(
    run: Annotated[
        str,
        typer.Argument(metavar="RUN_ID|FILE", help="A run ID (run-...) or a run record file."),
    ],
    seed: Annotated[
        str | None,
        typer.Option(
            metavar="NAME|FOLDER",
            help="Replay on this seed (name or folder) instead of the recorded one.",
        ),
    ] = None,
    runner: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Test runner (default: the one the run used)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replay even when the seed's files changed since the run."),
    ] = False,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Re-test a recorded run's plans in fresh sandboxes; exit 0 when every verdict matches."""
    from ..records import run_records
    from ..runs import replay as replaying
    from ..serialization import to_jsonable
    from . import terminal

    with terminal.reporting(as_json, debug):
        record = run_records.read_run_record(run)
        host = terminal.load_plugins()
        project = replaying.replay_seed(host, record, seed, force)
        replayed = replaying.replay(
            record,
            project,
            runner=host.runner(runner or record.runner),
            policies=replaying.replay_policies(host, record, project),
            progress=terminal.say,
        )
        all_match = all(test.matches for test in replayed)
        if as_json:
            tests = [{**to_jsonable(test), "matches": test.matches} for test in replayed]
            terminal.print_json({"run_id": record.run_id, "matches": all_match, "tests": tests})
        else:
            for test in replayed:
                terminal.echo(terminal.one_line(_describe(test)))
            terminal.echo(
                f"run {record.run_id}: "
                + ("every verdict matches" if all_match else "verdicts DIFFER from the record")
            )
    raise typer.Exit(0 if all_match else 1)


def _describe(test: object) -> str:
    from ..runs.replay import ReplayedTest

    assert isinstance(test, ReplayedTest)
    recorded = "passed" if test.recorded_passed else "failed"
    if test.recorded_grade is not None:
        recorded += f", graded {test.recorded_grade.counts}"
    if test.passed is None:
        now = f"not tested: {test.problem}"
    else:
        now = ("passed" if test.passed else "failed") + f" (sandbox {test.sandbox_id})"
        if test.grade is not None:
            now += f", graded {test.grade.counts}"
    chosen = ", the run's verdict" if test.chosen else ""
    verdict = "match" if test.matches else "DIFFERENT"
    place = ""
    if test.candidate is not None:
        place = f"candidate {test.candidate}, attempt {test.attempt}: "
    elif test.attempt is not None:
        place = f"attempt {test.attempt}: "
    return (
        f"test {test.number} ({place}{', '.join(test.paths) or 'no files'}{chosen}): "
        f"recorded {recorded}, now {now}: {verdict}"
    )

"""``agent report``: batches' results as one self-contained HTML page."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .options import DebugOption

if TYPE_CHECKING:
    from ..batches.results import TaskResult
    from ..model import TrajectoryStep


def report(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="Results files written by `agent batch`: shards of one batch, or batches "
            "to compare, reported as one.",
            metavar="RESULTS...",
            dir_okay=False,
        ),
    ],
    html: Annotated[
        Path | None,
        typer.Option("--html", metavar="FILE", help="Write the HTML report here.", dir_okay=False),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print what the report summarises as JSON on stdout (with or without --html).",
        ),
    ] = False,
    debug: DebugOption = False,
) -> None:
    """Write batches' results as one self-contained HTML report (no network resources).

    In each file the last line of a task counts. A task ID found in several files is
    shown as FILE:ID (FILE is the file's name, or its path when two files share a name).
    A damaged file refuses the whole report. Give --html FILE, --json, or both.
    """
    from ..batches.batch import blank_key, read_results, without_key
    from ..errors import UsageError
    from ..records import planner_calls
    from ..report import ResultsSource, merged, render_report
    from ..report.summary import report_summary
    from . import terminal

    with terminal.reporting(as_json, debug):
        if html is None and not as_json:
            raise UsageError("give --html FILE to write the page, or --json to print the figures")
        sources: list[ResultsSource] = []
        labels = _labels(results)
        for path, label in zip(results, labels, strict=True):
            if not path.exists():
                raise UsageError(f"there is no results file {str(path)!r}")
            found, damaged, _ = read_results(path)
            if damaged:
                first = damaged[0]
                raise UsageError(
                    blank_key(
                        f"{str(path)!r} line {first.line} is not a result ({first.message}); "
                        f"{len(damaged)} damaged line(s), no report written"
                    )
                )
            if not found:
                raise UsageError(f"{str(path)!r} holds no results; no report written")
            if html is not None:
                _check_report_path(html, path)
            # A hand-made file may hold the key.
            kept = [without_key(r) for r in found]
            sources.append(ResultsSource(blank_key(label), kept, _kept_steps(kept)))
        if html is not None:
            title = sources[0].label if len(sources) == 1 else f"{len(sources)} results files"
            try:
                planner_calls.write_private_file(html, render_report(sources, title=title))
            except OSError as error:
                raise UsageError(f"cannot write {str(html)!r}: {error.strerror}") from None
            rows = merged(sources)
            passed = sum(1 for row in rows if row.result.status == "passed")
            terminal.say(f"wrote {html}: {len(rows)} tasks, {passed} passed")
        if as_json:
            terminal.print_json(report_summary(sources))


def _kept_steps(results: list[TaskResult]) -> dict[str, list[TrajectoryStep]]:
    """The steps this machine kept of the planner calls ``results`` name that explored,
    by planner task ID, each made compact as the page shows it (the files may be large)."""
    from ..records import planner_calls, trajectories
    from ..report.details import compact_step
    from ..report.rows import planner_task_ids

    kept: dict[str, list[TrajectoryStep]] = {}
    for result in results:
        for task_id in planner_task_ids(result):
            if not planner_calls.is_task_id(task_id):
                continue  # a hand-made line's ID, which names no file
            steps, _ = trajectories.read_steps(task_id)
            if steps:
                kept[task_id] = [compact_step(step) for step in steps]
    return kept


def _labels(results: list[Path]) -> list[str]:
    """How the page names each file: its name, or the path as given when two files share
    a name. The same file named twice is refused."""
    from ..errors import UsageError

    seen: dict[tuple[int, int], Path] = {}
    for path in results:
        try:
            status = os.stat(path)
        except OSError:
            continue  # missing: said when it is read
        same = seen.setdefault((status.st_dev, status.st_ino), path)
        if same is not path:
            raise UsageError(
                f"{str(path)!r} is the same file as {str(same)!r}; name each results file once"
            )
    names = [path.name for path in results]
    return [path.name if names.count(path.name) == 1 else str(path) for path in results]


def _check_report_path(html: Path, results: Path) -> None:
    """Refuse to replace the results file itself, or anything but a file or a link."""
    from ..errors import UsageError

    try:
        own = os.lstat(html)
    except FileNotFoundError:
        return
    except OSError as error:
        raise UsageError(f"cannot write {str(html)!r}: {error.strerror}") from None
    if not (stat.S_ISREG(own.st_mode) or stat.S_ISLNK(own.st_mode)):
        raise UsageError(f"{str(html)!r} is not a regular file; name the report's file")
    read = os.stat(results)
    targets = [own]
    with contextlib.suppress(OSError):  # a dangling link is replaced; what it names, never
        targets.append(os.stat(html))
    if any((t.st_dev, t.st_ino) == (read.st_dev, read.st_ino) for t in targets):
        raise UsageError(f"{str(html)!r} is the results file; name another file")

"""``agent report``: a batch's results as one self-contained HTML page."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Annotated

import typer

from .options import DebugOption


def report(
    results: Annotated[
        Path, typer.Argument(help="A results file written by `agent batch`.", dir_okay=False)
    ],
    html: Annotated[
        Path,
        typer.Option("--html", metavar="FILE", help="Write the HTML report here.", dir_okay=False),
    ],
    debug: DebugOption = False,
) -> None:
    """Write a batch's results as a self-contained HTML report (no network resources)."""
    from .. import records
    from ..batch import blank_key, latest, read_results, without_key
    from ..errors import UsageError
    from ..report import render_html
    from . import terminal

    with terminal.reporting(False, debug):
        if not results.exists():
            raise UsageError(f"there is no results file {str(results)!r}")
        found, damaged, _ = read_results(results)
        if damaged:
            first = damaged[0]
            raise UsageError(
                blank_key(
                    f"{str(results)!r} line {first.line} is not a result ({first.message}); "
                    f"{len(damaged)} damaged line(s), no report written"
                )
            )
        if not found:
            raise UsageError(f"{str(results)!r} holds no results; no report written")
        _check_report_path(html, results)
        # A hand-made file may hold the key; a task a budget stopped, then resumed, has two
        # lines, of which the last is its result.
        found = [without_key(result) for result in latest(found)]
        try:
            records.write_private_file(html, render_html(found, title=blank_key(results.name)))
        except OSError as error:
            raise UsageError(f"cannot write {str(html)!r}: {error.strerror}") from None
        passed = sum(1 for r in found if r.status == "passed")
        terminal.say(f"wrote {html}: {len(found)} tasks, {passed} passed")


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

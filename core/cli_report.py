"""``agent report``: a batch's results as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report(
    results: Annotated[
        Path, typer.Argument(help="A results file written by `agent batch`.", dir_okay=False)
    ],
    html: Annotated[
        Path, typer.Option("--html", help="Write the HTML report here.", dir_okay=False)
    ],
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of any error.")
    ] = False,
) -> None:
    """Write a batch's results as a self-contained HTML report (no network resources)."""
    from . import cli, records
    from .batch import read_results
    from .errors import UsageError
    from .report import render_html

    with cli._reporting(False, debug):
        if not results.is_file():
            raise UsageError(f"there is no results file {str(results)!r}")
        found, damaged, _ = read_results(results)
        for problem in damaged:
            cli._say(f"warning: {results} line {problem.line} is not a result ({problem.message})")
        try:
            records.write_private_file(html, render_html(found, title=results.name))
        except OSError as error:
            raise UsageError(f"cannot write {str(html)!r}: {error.strerror}") from None
        passed = sum(1 for r in found if r.status == "passed")
        cli._say(f"wrote {html}: {len(found)} tasks, {passed} passed")

"""``agent doctor``: check that this machine has what a run needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import EXIT_TESTS_PASSED, UsageError
from .options import DEFAULT_PLANNER, DEFAULT_RUNNER, DebugOption, JsonOption
from .terminal import echo, load_plugins, one_line, print_json, reporting

if TYPE_CHECKING:
    from ..model import Finding


def doctor(
    planner: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="The planner you run (see `agent planners list`); other planners' items "
            "are information, not failures.",
        ),
    ] = DEFAULT_PLANNER,
    no_planner: Annotated[
        bool,
        typer.Option(
            "--no-planner",
            help="You only test plan files (agent run --plan): no planner's items are required.",
        ),
    ] = False,
    runner: Annotated[
        str,
        typer.Option(
            metavar="NAME",
            help="The runner you run (see `agent runners list`); other runners' items "
            "are information, not failures.",
        ),
    ] = DEFAULT_RUNNER,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Check that this machine has what a run needs: each item OK, or how to fix it.

    Checked for the default planner and runner unless --planner, --no-planner or
    --runner say which ones you use.
    """
    from ..protocols import DoctorContext
    from ..runs.doctor import (
        EXIT_NOT_READY,
        INSTALLATION_CHECKS,
        plugins_not_in_use,
        ready,
        run_checks,
    )
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        host = load_plugins()
        if no_planner and planner != DEFAULT_PLANNER:
            raise UsageError("give either --planner NAME or --no-planner, not both")
        context = DoctorContext(
            planner=None if no_planner else host.planner(planner).name,
            runner=host.runner(runner).name,
        )
        checks = [("core", check) for check in INSTALLATION_CHECKS]
        checks += [(registered.plugin, registered.item) for registered in host.checks.values()]
        findings = run_checks(checks, context, not_in_use=plugins_not_in_use(host, context))
        all_ready = ready(findings)
        if as_json:
            print_json(
                {
                    "ready": all_ready,
                    "planner": context.planner,
                    "runner": context.runner,
                    "findings": to_jsonable(findings),
                },
                indent=2,
            )
        else:
            _print_findings(findings, all_ready)
    raise typer.Exit(EXIT_TESTS_PASSED if all_ready else EXIT_NOT_READY)


def _print_findings(findings: Sequence[Finding], all_ready: bool) -> None:
    width = max((len(f.item) for f in findings), default=0)
    colours = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
    for finding in findings:
        verdict = typer.style(f"{finding.verdict:<4}", fg=colours[finding.verdict], bold=True)
        typer.echo(verdict + one_line(f"  {finding.item:<{width}}  {finding.detail}"))
        if finding.fix and not finding.ok:
            echo(one_line(f"      {'':<{width}}  fix: {finding.fix}"))
    failed = sum(1 for f in findings if f.required and not f.ok)
    typer.echo(
        "\nready: every required item is OK"
        if all_ready
        else f"\nnot ready: {failed} required item(s) failed"
    )

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
        str | None,
        typer.Option(
            metavar="NAME",
            help="The planner you run (see `agent planners list`): its items are required; "
            "other planners' items are information, not failures. Without it, the default "
            f"planner's ({DEFAULT_PLANNER}) items are needed for model runs only.",
            show_default=False,
        ),
    ] = None,
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
    --runner say which ones you use. Without --planner, a problem of the default
    planner (no provider variables, say) is a warning: the machine is ready for plan
    files (agent run --plan), and the fix says what model runs need. Exit codes: 0 every
    required item is OK; 2 one is not (the sandbox cannot start, or a planner named
    with --planner is not set up).
    """
    from ..protocols import DoctorContext
    from ..runs.doctor import (
        EXIT_NOT_READY,
        INSTALLATION_CHECKS,
        for_model_runs,
        planner_plugin,
        plugins_not_in_use,
        ready,
        run_checks,
    )
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        host = load_plugins()
        if no_planner and planner is not None:
            raise UsageError("give either --planner NAME or --no-planner, not both")
        context = DoctorContext(
            planner=None if no_planner else host.planner(planner or DEFAULT_PLANNER).name,
            runner=host.runner(runner).name,
        )
        checks = [("core", check) for check in INSTALLATION_CHECKS]
        checks += [(registered.plugin, registered.item) for registered in host.checks.values()]
        not_in_use = plugins_not_in_use(host, context)
        planners = planner_plugin(host, context)
        findings: list[Finding] = []
        planner_ok = True
        for plugin, check in checks:
            found = run_checks([(plugin, check)], context, not_in_use=not_in_use)
            if plugin == planners:
                planner_ok = planner_ok and all(f.ok for f in found)
                if planner is None and context.planner is not None:
                    found = [for_model_runs(f, context.planner) for f in found]
            findings.extend(found)
        all_ready = ready(findings)
        planner_ready = None if context.planner is None else planner_ok
        if as_json:
            print_json(
                {
                    "ready": all_ready,
                    "planner_ready": planner_ready,
                    "planner": context.planner,
                    "runner": context.runner,
                    "findings": to_jsonable(findings),
                },
                indent=2,
            )
        else:
            _print_findings(findings, all_ready, None if planner_ready else context.planner)
    raise typer.Exit(EXIT_TESTS_PASSED if all_ready else EXIT_NOT_READY)


def _print_findings(
    findings: Sequence[Finding], all_ready: bool, planner_not_set_up: str | None
) -> None:
    width = max((len(f.item) for f in findings), default=0)
    colours = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
    for finding in findings:
        verdict = typer.style(f"{finding.verdict:<4}", fg=colours[finding.verdict], bold=True)
        typer.echo(verdict + one_line(f"  {finding.item:<{width}}  {finding.detail}"))
        if finding.fix and not finding.ok:
            echo(one_line(f"      {'':<{width}}  fix: {finding.fix}"))
    failed = sum(1 for f in findings if f.required and not f.ok)
    if not all_ready:
        typer.echo(f"\nnot ready: {failed} required item(s) failed")
    elif planner_not_set_up is not None:
        echo(
            "\nready for plan files (agent run --plan): every required item is OK; "
            f"model runs with planner {planner_not_set_up!r} need its items above"
        )
    else:
        typer.echo("\nready: every required item is OK")

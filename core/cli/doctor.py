"""``agent doctor``: check that this machine has what a run needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from ..errors import EXIT_TESTS_PASSED
from .options import DebugOption, JsonOption
from .terminal import echo, for_terminal, load_plugins, print_json, reporting

if TYPE_CHECKING:
    from ..model import Finding


def doctor(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """Check that this machine has what a run needs: each item OK, or how to fix it."""
    from ..doctor import EXIT_NOT_READY, INSTALLATION_CHECKS, ready, run_checks
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        host = load_plugins()
        checks = [("core", check) for check in INSTALLATION_CHECKS]
        checks += [(registered.plugin, registered.item) for registered in host.checks.values()]
        findings = run_checks(checks)
        all_ready = ready(findings)
        if as_json:
            print_json({"ready": all_ready, "findings": to_jsonable(findings)}, indent=2)
        else:
            _print_findings(findings, all_ready)
    raise typer.Exit(EXIT_TESTS_PASSED if all_ready else EXIT_NOT_READY)


def _print_findings(findings: Sequence[Finding], all_ready: bool) -> None:
    width = max((len(f.item) for f in findings), default=0)
    colours = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
    for finding in findings:
        verdict = typer.style(f"{finding.verdict:<4}", fg=colours[finding.verdict], bold=True)
        typer.echo(verdict + for_terminal(f"  {finding.item:<{width}}  {finding.detail}"))
        if finding.fix and not finding.ok:
            echo(f"      {'':<{width}}  fix: {finding.fix}")
    failed = sum(1 for f in findings if f.required and not f.ok)
    typer.echo(
        "\nready: every required item is OK"
        if all_ready
        else f"\nnot ready: {failed} required item(s) failed"
    )

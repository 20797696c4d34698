"""``agent validate``: check plan files against a seed's policies without running anything."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import EXIT_CODES, EXIT_TESTS_PASSED, PlanRejected, Rejection, UsageError
from .options import (
    DebugOption,
    JsonOption,
    NoPolicyOption,
    PolicyOption,
    PolicyParamOption,
    SeedOption,
)
from .terminal import echo, load_plugins, print_json, reporting


def validate(
    plans: Annotated[
        list[Path],
        typer.Argument(
            metavar="PLANS...",
            help="Plan files to check: JSON (files, edits or a diff) or a git diff.",
        ),
    ],
    seed: SeedOption = "calculator",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = None,
    policy_param: PolicyParamOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Check plan files against a seed's policies without running anything."""
    from ..plans import policy_parameters
    from ..runs import orchestrator
    from ..serialization import to_jsonable
    from .run import read_plan_file

    all_ok = True
    with reporting(as_json, debug):
        parameters = policy_parameters.parse_assignments(policy_param or ())
        host = load_plugins()
        seed_project = host.seed(seed)
        policies = host.policies_for(
            seed_project,
            switch_on=policy or (),
            switch_off=no_policy or (),
            parameters=parameters,
        )
        for path in plans:
            try:
                plan = read_plan_file(path, seed_project)
                rejections = orchestrator.check_plan(plan, seed_project, policies)
            except PlanRejected as error:
                rejections = list(error.rejections)
            except UsageError as error:
                rejections = [Rejection(policy="agent", rule="plan-file", message=error.message)]
            all_ok = all_ok and not rejections
            if as_json:
                verdict = {
                    "file": str(path),
                    "ok": not rejections,
                    "rejections": to_jsonable(rejections),
                }
                print_json(verdict)
            elif rejections:
                echo(f"rejected {path}:")
                for rejection in rejections:
                    echo(f"  {rejection.describe()}")
            else:
                echo(f"ok {path}")
    raise typer.Exit(EXIT_TESTS_PASSED if all_ok else EXIT_CODES["policy"])

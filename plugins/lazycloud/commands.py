"""``agent lazycloud ...``: configure, deploy, status, sandboxes, cleanup.

This module imports typer and ``core`` only; the SDK is imported inside each
command, when it runs, so ``agent --help`` stays fast.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from sandboxed_coding_agent.core.commands import echo, print_json, reporting, say
from sandboxed_coding_agent.core.errors import UsageError
from sandboxed_coding_agent.core.provider import PROVIDER_SECRET_NAMES

from .names import APP_SLUG, FUNCTION_NAME, SANDBOX_NAME

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show the traceback of any error.")]


def build_group(help_text: str) -> typer.Typer:
    group = typer.Typer(help=help_text, no_args_is_help=True)

    @group.command("configure")
    def configure(as_json: JsonOption = False, debug: DebugOption = False) -> None:
        """Store CODING_AGENT_BASE_URL, _MODEL and _API_KEY as workspace secrets (replacing)."""
        with reporting(as_json, debug):
            from .remote import Deadlines
            from .workspace import configure as store

            stored = store(os.environ, Deadlines.from_environment())
            if as_json:
                print_json({"stored": stored})
            else:
                echo(f"stored the secrets {', '.join(stored)} (values not shown)")
                echo("next: agent lazycloud deploy")

    @group.command("deploy")
    def deploy(as_json: JsonOption = False, debug: DebugOption = False) -> None:
        """Deploy the planner function plan-patch (only the code it needs is uploaded)."""
        with reporting(as_json, debug):
            from .remote import Deadlines
            from .workspace import deploy as deploy_planner

            if not as_json:
                say(f"deploying {FUNCTION_NAME} of app {APP_SLUG} (building its image if needed)")
            done = deploy_planner(Deadlines.from_environment())
            if as_json:
                print_json(done, indent=2)
                return
            releases = ", ".join(f"{r['name']} {r['release_id']}" for r in done["releases"])
            echo(f"deployed {FUNCTION_NAME} ({releases}), {len(done['files'])} files uploaded")
            echo("next: agent run --planner lazycloud --runner lazycloud")

    @group.command("status")
    def status(as_json: JsonOption = False, debug: DebugOption = False) -> None:
        """What is deployed, which secrets exist (names only), the workspace and endpoint."""
        with reporting(as_json, debug):
            from .remote import Deadlines
            from .workspace import status as read_status

            found = read_status(Deadlines.from_environment())
            if as_json:
                print_json(found, indent=2)
                return
            echo(_status_text(found))

    @group.command("sandboxes")
    def sandboxes(
        limit: Annotated[int, typer.Option(min=1, max=1000, help="How many to list.")] = 20,
        as_json: JsonOption = False,
        debug: DebugOption = False,
    ) -> None:
        """Recent sandboxes of test-patch: ID, status, created at."""
        with reporting(as_json, debug):
            from .remote import Deadlines
            from .workspace import sandboxes as list_sandboxes

            rows = list_sandboxes(Deadlines.from_environment(), limit)
            if as_json:
                print_json(rows, indent=2)
                return
            if not rows:
                echo(f"no sandboxes of {SANDBOX_NAME} yet")
            for row in rows:
                echo(f"{row['sandbox_id']}  {row['status']:<8}  created {row['created_at']}")

    @group.command("cleanup")
    def cleanup(
        yes: Annotated[bool, typer.Option("--yes", help="Delete without asking.")] = False,
        as_json: JsonOption = False,
        debug: DebugOption = False,
    ) -> None:
        """Delete the plan-patch deployment and the three secrets, after a confirmation."""
        with reporting(as_json, debug):
            from .remote import Deadlines
            from .workspace import cleanup as delete
            from .workspace import cleanup_plan

            deadlines = Deadlines.from_environment()
            plan = cleanup_plan(deadlines)
            if not plan["deployment"] and not plan["secrets"]:
                if as_json:
                    print_json({"deleted": {"deployment": None, "secrets": []}})
                else:
                    echo("nothing to delete: no deployment of plan-patch and none of the secrets")
                return
            if not yes:
                if as_json:
                    raise UsageError("cleanup with --json needs --yes (nothing was deleted)")
                echo(f"this deletes: {_listing(plan)}")
                try:
                    confirmed = typer.confirm("delete them?", default=False, err=True)
                except typer.Abort:  # no terminal to answer from (end of input)
                    raise UsageError(
                        "cleanup asks before deleting: answer at the prompt, or pass --yes; "
                        "nothing was deleted"
                    ) from None
                if not confirmed:
                    echo("nothing was deleted")
                    return
            deleted = delete(plan, deadlines)
            if as_json:
                print_json({"deleted": deleted})
            else:
                echo(f"deleted {_listing(deleted)}")

    return group


def _listing(plan: dict[str, Any]) -> str:
    parts = [f"the deployment {plan['deployment']}"] if plan["deployment"] else []
    if plan["secrets"]:
        parts.append(f"the secrets {', '.join(plan['secrets'])}")
    return " and ".join(parts)


def _status_text(found: dict[str, Any]) -> str:
    deployed = found["deployed"]
    lines = [
        f"workspace:  {found['workspace']}",
        f"endpoint:   {found['endpoint']}",
        f"app:        {found['app']}",
        f"function:   {found['function']}: "
        + (
            ", ".join(
                f"deployed, {d['state']}, version {d['version']} at {d['deployed_at']}"
                for d in deployed
            )
            if deployed
            else "not deployed (agent lazycloud deploy)"
        ),
        f"sandbox:    {found['sandbox']} (one per run, created by `agent run --runner lazycloud`)",
    ]
    secrets = found["secrets"]
    present = [name for name in PROVIDER_SECRET_NAMES if secrets.get(name)]
    missing = [name for name in PROVIDER_SECRET_NAMES if not secrets.get(name)]
    lines.append(f"secrets:    {', '.join(present) or 'none'}")
    if missing:
        lines.append(f"missing:    {', '.join(missing)} (agent lazycloud configure)")
    return "\n".join(lines)

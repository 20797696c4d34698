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

    group.add_typer(_sandboxes_group(), name="sandboxes")

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


def _sandboxes_group() -> typer.Typer:
    sandboxes = typer.Typer(
        help="Recent sandboxes of test-patch, and which are stale; `stop` stops them.",
        invoke_without_command=True,
    )

    @sandboxes.callback(invoke_without_command=True)
    def listing(
        context: typer.Context,
        limit: Annotated[int, typer.Option(min=1, max=1000, help="How many to list.")] = 20,
        as_json: JsonOption = False,
        debug: DebugOption = False,
    ) -> None:
        """Recent sandboxes of test-patch: ID, status, created at, the agent that started
        it (from this machine's ledger) and whether it is stale."""
        if context.invoked_subcommand is not None:
            return
        with reporting(as_json, debug):
            from .remote import Deadlines
            from .workspace import sandboxes as list_sandboxes

            rows = list_sandboxes(Deadlines.from_environment(), limit)
            if as_json:
                print_json(rows, indent=2)
                return
            if not rows:
                echo(f"no sandboxes of {SANDBOX_NAME} yet")
                return
            echo(f"{'SANDBOX':<36}  {'STATUS':<8}  {'CREATED':<32}  {'AGENT':<14}  STALE")
            for row in rows:
                echo(
                    f"{row['sandbox_id'] or '(being created)':<36}  {row['status']:<8}  "
                    f"{row['created_at']:<32}  {_agent(row):<14}  "
                    f"{'stale' if row['stale'] else '-'}"
                )

    @sandboxes.command("stop")
    def stop(
        sandbox_id: Annotated[
            str | None, typer.Argument(help="The sandbox to stop (its ID).", show_default=False)
        ] = None,
        every: Annotated[
            bool, typer.Option("--all", help="Stop every running sandbox of test-patch.")
        ] = False,
        stale: Annotated[
            bool,
            typer.Option(
                "--stale",
                help="Stop those whose agent is gone or whose run is long over.",
            ),
        ] = False,
        as_json: JsonOption = False,
        debug: DebugOption = False,
    ) -> None:
        """Stop a sandbox of test-patch by ID, every running one (--all), or the stale ones
        (--stale), and forget them in this machine's ledger."""
        with reporting(as_json, debug):
            from .remote import Deadlines
            from .workspace import stop_sandboxes

            if (sandbox_id is not None) + every + stale != 1:
                raise UsageError("name one sandbox ID, or pass --all or --stale (one of them)")
            done = stop_sandboxes(
                Deadlines.from_environment(), sandbox_id, every=every, stale=stale
            )
            if as_json:
                print_json({"stopped": done}, indent=2)
                return
            if not done:
                echo("no sandbox to stop")
            for row in done:
                state = "stopped" if row["stopped"] else "gone already"
                echo(f"{row['sandbox_id']}  {state}")

    return sandboxes


def _agent(row: dict[str, Any]) -> str:
    if row["agent_pid"] is None:
        return "-"
    return f"{row['agent_pid']} {'running' if row['agent_alive'] else 'gone'}"


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

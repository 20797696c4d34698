"""What ``agent lazycloud`` does in the workspace: secrets, the deployment, sandboxes.

Each operation returns plain data for :mod:`.commands` to print, and raises the
agent's errors (through :func:`.remote.translated`): a deploy or a secret that
fails remotely is a provider error (exit 3), as it concerns the planner; a
sandbox listing that fails is a sandbox error (exit 5).
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sandboxed_coding_agent.core.errors import (
    AgentWarning,
    ConfigurationError,
    RemoteError,
    SandboxError,
    UsageError,
)
from sandboxed_coding_agent.core.provider import (
    ALLOW_HTTP_ENV,
    API_VERSION_ENV,
    AUTH_HEADER_ENV,
    BASE_URL_ENV,
    PROVIDER_SECRET_NAMES,
    is_loopback,
    settings_from_environment,
)

from .names import APP_SLUG, FUNCTION_NAME, SANDBOX_NAME
from .remote import Deadlines, bounded, endpoint_in_use, translated

#: A running sandbox the ledger does not know is stale after this long: longer than any
#: run of the agent takes (an image build, a test at a long timeout, the calls).
STALE_AGE_SECONDS = 2 * 3600


def configure(environ: Mapping[str, str], deadlines: Deadlines) -> list[str]:
    """Store the three provider variables of ``environ`` as workspace secrets; their names.

    :raises ConfigurationError: a variable is missing or invalid (checked as the
        local planner checks it), or one the deployed function cannot receive is set
        (``CODING_AGENT_API_VERSION``, ``CODING_AGENT_AUTH_HEADER``), before anything
        is stored.
    """
    # The function is deployed with exactly the three secrets; an Azure-style provider
    # configured here would be called remotely without its api-version or header.
    unsupported = [name for name in (API_VERSION_ENV, AUTH_HEADER_ENV) if environ.get(name, "")]
    if environ.get(ALLOW_HTTP_ENV, "").strip() not in ("", "0"):
        unsupported.append(ALLOW_HTTP_ENV)
    if unsupported:
        named = " and ".join(unsupported)
        raise ConfigurationError(
            f"{named} {'is' if len(unsupported) == 1 else 'are'} not supported by the "
            f"LazyCloud planner, whose function receives only {', '.join(PROVIDER_SECRET_NAMES)}; "
            f"nothing was stored (unset {named}, or use the openai planner on this machine "
            "for a provider that needs them)"
        )
    settings = settings_from_environment(
        environ, missing_hint="before `agent lazycloud configure` stores them as secrets"
    )
    if is_loopback(urlsplit(settings.base_url).hostname or ""):
        # Stored all the same: a control plane run on this machine reaches it.
        warnings.warn(
            f"{BASE_URL_ENV} names this machine ({settings.base_url}): a planner deployed "
            "on the hosted LazyCloud cannot reach it, only one whose control plane runs here",
            AgentWarning,
            stacklevel=2,
        )
    values = dict(
        zip(
            PROVIDER_SECRET_NAMES,
            (settings.base_url, settings.model, settings.api_key),
            strict=True,
        )
    )
    from lazycloud import Secret

    stored = []
    for name, value in values.items():
        with translated(RemoteError, f"storing the secret {name}"):
            bounded(partial(Secret(name).set, value), deadlines.call, f"storing {name}")
        stored.append(name)
    return stored


def deploy(deadlines: Deadlines) -> dict[str, Any]:
    """Deploy the ``plan-patch`` function from a staged source root; what was deployed."""
    from .app import planner_app
    from .staging import stage_source, staged_handler

    with tempfile.TemporaryDirectory(prefix="agent-lazycloud-source-") as folder:
        root = Path(folder)
        files = stage_source(root)
        with translated(RemoteError, f"deploying {FUNCTION_NAME}"), staged_handler(root) as fn:
            app = planner_app(fn)
            deployment = bounded(
                lambda: app.deploy(source_root=root), deadlines.start, f"deploying {FUNCTION_NAME}"
            )
    releases = [
        {"name": release.name, "release_id": str(release.id)} for release in deployment.releases
    ]
    return {"app": APP_SLUG, "function": FUNCTION_NAME, "releases": releases, "files": files}


def _deployments(deadlines: Deadlines) -> list[Any]:
    from lazycloud.session.deployment import DeploymentClient

    found = bounded(
        lambda: DeploymentClient().list(app=APP_SLUG, name=FUNCTION_NAME),
        deadlines.call,
        "listing the deployments",
    )
    return [
        item
        for item in found
        if item.app == APP_SLUG
        and item.name == FUNCTION_NAME
        and str(getattr(item.state, "value", item.state)) != "deleted"
    ]


def _secret_names(deadlines: Deadlines) -> list[str]:
    from lazycloud.control import api_client, require_workspace, resolve_control_client_config

    def names() -> list[str]:
        config = resolve_control_client_config()
        client, workspace = api_client(config), require_workspace(config)
        found: list[str] = []
        cursor: str | None = None
        while True:
            page = client.list_secrets(workspace, cursor=cursor)
            found.extend(secret.name for secret in page.secrets)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    return bounded(names, deadlines.call, "listing the secrets")


def _workspace() -> str:
    from lazycloud.control import resolve_control_client_config

    return resolve_control_client_config().workspace


def status(deadlines: Deadlines) -> dict[str, Any]:
    """What is deployed, which of the three secrets exist (names only), where."""
    with translated(RemoteError, "reading the LazyCloud workspace"):
        workspace = _workspace()
        deployments = _deployments(deadlines)
        existing = set(_secret_names(deadlines))
    return {
        "app": APP_SLUG,
        "function": FUNCTION_NAME,
        "sandbox": SANDBOX_NAME,
        "workspace": workspace,
        "endpoint": endpoint_in_use(),
        "deployed": [
            {
                "name": item.name,
                "state": str(getattr(item.state, "value", item.state)),
                "version": item.version,
                "deployed_at": item.deployed_at.isoformat() if item.deployed_at else None,
            }
            for item in deployments
        ],
        "secrets": {name: name in existing for name in PROVIDER_SECRET_NAMES},
    }


def sandboxes(
    deadlines: Deadlines, limit: int, environ: Mapping[str, str] = os.environ
) -> list[dict[str, Any]]:
    """The recent sandboxes of ``test-patch``, newest first, each with what the ledger says
    of it (the agent process that started it, whether it is alive) and whether it is stale;
    then the ledger's creates whose sandbox is not known yet."""
    from .ledger import Ledger
    from .sandboxes import Where, running_rows

    ledger = Ledger.of(environ)
    with translated(SandboxError, f"listing the sandboxes of {SANDBOX_NAME}"):
        where = Where.current()
        rows = running_rows(where, deadlines, limit)
    entries = [entry for entry in ledger.entries() if where.holds(entry)]
    noted = {entry.sandbox_id: entry for entry in entries if entry.sandbox_id is not None}
    now = time.time()
    listed = []
    for row in rows:
        status = str(getattr(row.status, "value", row.status))
        entry = noted.get(str(row.id))
        running = row.stopped_at is None and status not in ("stopped", "failed")
        if entry is not None:
            stale = running and entry.stale(now)
        else:
            stale = running and now - row.created_at.timestamp() > STALE_AGE_SECONDS
        listed.append(
            {
                "sandbox_id": str(row.id),
                "status": status,
                "created_at": row.created_at.isoformat(),
                "stopped_at": row.stopped_at.isoformat() if row.stopped_at else None,
                "agent_pid": entry.pid if entry else None,
                "agent_alive": entry.agent_alive() if entry else None,
                "stale": stale,
            }
        )
    for entry in entries:
        if entry.sandbox_id is None:
            listed.append(
                {
                    "sandbox_id": None,
                    "status": "creating",
                    "created_at": datetime.fromtimestamp(entry.created_at, UTC).isoformat(),
                    "stopped_at": None,
                    "agent_pid": entry.pid,
                    "agent_alive": entry.agent_alive(),
                    "stale": entry.stale(now),
                }
            )
    return listed


def stop_sandboxes(
    deadlines: Deadlines,
    sandbox_id: str | None,
    *,
    every: bool = False,
    stale: bool = False,
    environ: Mapping[str, str] = os.environ,
) -> list[dict[str, Any]]:
    """Stop one sandbox of the workspace, every running one of ``test-patch``, or the stale
    ones (the ledger's whose agent is gone or whose run is long over, and those not in the
    ledger that have run longer than any run of the agent); what was stopped.

    :raises UsageError: ``sandbox_id`` is not a sandbox ID (a UUID).
    """
    from .ledger import Ledger, sandbox_id_shape
    from .sandboxes import Where, running_rows, stop_entries, stop_sandbox

    ledger = Ledger.of(environ)
    if sandbox_id is not None:
        try:
            sandbox_id = sandbox_id_shape(sandbox_id.strip().lower())
        except ValueError as error:
            raise UsageError(str(error)) from None
    done: list[dict[str, Any]] = []
    with translated(SandboxError, "stopping sandboxes", sandbox_id=sandbox_id):
        where = Where.current()
        if sandbox_id is not None:
            stopped = stop_sandbox(where, sandbox_id, deadlines)
            for entry in ledger.entries():
                if entry.sandbox_id == sandbox_id:
                    ledger.forget(entry.run_id)
            return [{"sandbox_id": sandbox_id, "stopped": stopped}]
        now = time.time()
        for item in stop_entries(ledger, deadlines, lambda entry: every or entry.stale(now)):
            done += [{"sandbox_id": each, "stopped": True} for each in item.sandbox_ids]
        seen = {row["sandbox_id"] for row in done}
        for row in running_rows(where, deadlines):
            if row.stopped_at is not None or str(row.id) in seen:
                continue
            status = str(getattr(row.status, "value", row.status))
            if status in ("stopped", "failed"):
                continue
            old = now - row.created_at.timestamp() > STALE_AGE_SECONDS
            if every or (stale and old):
                stopped = stop_sandbox(where, str(row.id), deadlines)
                done.append({"sandbox_id": str(row.id), "stopped": stopped})
    return done


def cleanup_plan(deadlines: Deadlines) -> dict[str, Any]:
    """What a cleanup would delete: the deployment if there is one, the secrets that exist."""
    with translated(RemoteError, "reading the LazyCloud workspace"):
        deployed = bool(_deployments(deadlines))
        existing = set(_secret_names(deadlines))
    return {
        "deployment": FUNCTION_NAME if deployed else None,
        "secrets": [name for name in PROVIDER_SECRET_NAMES if name in existing],
    }


def cleanup(plan: Mapping[str, Any], deadlines: Deadlines) -> dict[str, Any]:
    """Delete what ``plan`` names; what was deleted."""
    from lazycloud import Secret
    from lazycloud.session.deployment import DeploymentClient

    deleted: dict[str, Any] = {"deployment": None, "secrets": []}
    if plan["deployment"]:
        with translated(RemoteError, f"deleting the deployment {FUNCTION_NAME}"):
            bounded(
                lambda: DeploymentClient().delete(FUNCTION_NAME, app=APP_SLUG),
                deadlines.call,
                f"deleting {FUNCTION_NAME}",
            )
        deleted["deployment"] = FUNCTION_NAME
    for name in plan["secrets"]:
        with translated(RemoteError, f"deleting the secret {name}"):
            bounded(Secret(name).delete, deadlines.call, f"deleting {name}")
        deleted["secrets"].append(name)
    return deleted

"""The LazyCloud backend: a remote planner and a remote sandbox, as two plugins' worth of hooks.

* Planner ``lazycloud``: calls the deployed function ``plan-patch``, which runs
  the built-in OpenAI-compatible planner with the provider settings stored as
  workspace secrets (:mod:`.handler`, :mod:`.planner`).
* Runner ``lazycloud``: one ``test-patch`` sandbox per run, network blocked,
  no secrets, terminated whatever happens (:mod:`.runner`).
* Commands ``agent lazycloud configure|deploy|status|sandboxes [stop]|cleanup``
  (:mod:`.commands`); the sandboxes a killed agent left running are stopped by
  the next run or by ``sandboxes stop --stale`` (:mod:`.ledger`, :mod:`.sandboxes`).

Either works alone: ``--planner lazycloud`` with the local sandbox, or
``--runner lazycloud`` with ``--plan FILE`` or the local planner. The SDK
(pydantic, httpx, rich) is imported only when one of them runs; this module
imports nothing heavy, and the deployed function imports it too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import Finding
from sandboxed_coding_agent.core.protocols import Check, CommandGroup, Planner, Runner

from .names import APP_SLUG, FUNCTION_NAME, SANDBOX_NAME

if TYPE_CHECKING:
    import typer

__all__ = ["APP_SLUG", "FUNCTION_NAME", "SANDBOX_NAME", "LazyCloudClient", "LazyCloudCommands"]


@attrs.frozen
class LazyCloudCommands:
    """``agent lazycloud ...``: set up, inspect and remove the backend in a workspace."""

    name: str = "lazycloud"
    help: str = (
        f"The LazyCloud backend: configure secrets, deploy {FUNCTION_NAME}, status, "
        f"{SANDBOX_NAME} sandboxes (list, stop), cleanup."
    )

    def build(self) -> typer.Typer:
        from .commands import build_group

        return build_group(self.help)


@attrs.frozen
class LazyCloudClient:
    """For ``agent doctor``: the pinned LazyCloud client imports (imported only when checked)."""

    name: str = "lazycloud-client"
    description: str = "the LazyCloud client library, for the LazyCloud backend"

    def run(self) -> list[Finding]:
        try:
            module = importlib.import_module("lazycloud")
        except Exception as error:
            return [
                Finding(
                    "lazycloud client",
                    ok=False,
                    detail=f"cannot import lazycloud: {type(error).__name__}: {error}",
                    fix="reinstall sandboxed-coding-agent (it pins lazycloud-client)",
                    required=False,
                )
            ]
        version = getattr(module, "__version__", None) or _distribution_version()
        return [Finding("lazycloud client", ok=True, detail=f"{version} imports")]


def _distribution_version() -> str:
    from importlib import metadata

    try:
        return f"lazycloud-client {metadata.version('lazycloud-client')}"
    except metadata.PackageNotFoundError:
        return "lazycloud (version unknown)"


@hookimpl
def register_planners(register: Callable[[Planner], None]) -> None:
    from .planner import LazyCloudPlanner

    register(LazyCloudPlanner())


@hookimpl
def register_runners(register: Callable[[Runner], None]) -> None:
    from .runner import LazyCloudRunner

    register(LazyCloudRunner())


@hookimpl
def register_commands(register: Callable[[CommandGroup], None]) -> None:
    register(LazyCloudCommands())


@hookimpl
def register_checks(register: Callable[[Check], None]) -> None:
    register(LazyCloudClient())

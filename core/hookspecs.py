"""The hooks a plugin implements; the contract every extension author codes against.

A plugin is a module (or object) with functions named after these hooks,
decorated with :data:`hookimpl`. Third-party plugins are found through the
``sandboxed_coding_agent`` entry-point group; the built-in ones use the very
same hooks. Each hook receives a ``register`` callback; call it once for every
thing the plugin adds. The hooks are called once per process, the first time
the agent needs the things they register.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from .model import SeedProject
from .protocols import PatchPolicy, Planner, Runner

__all__ = [
    "hookimpl",
    "hookspec",
    "register_planners",
    "register_policies",
    "register_runners",
    "register_seeds",
]

hookspec = pluggy.HookspecMarker("sandboxed_coding_agent")
hookimpl = pluggy.HookimplMarker("sandboxed_coding_agent")


@hookspec
def register_seeds(register: Callable[[SeedProject], None]) -> None:
    """Add seed projects that ``agent run --seed NAME`` can select.

    :param register: call with each :class:`~sandboxed_coding_agent.core.model.SeedProject`.
    """


@hookspec
def register_planners(register: Callable[[Planner], None]) -> None:
    """Add planner backends that ``agent run --planner NAME`` can select.

    :param register: call with each object satisfying
        :class:`~sandboxed_coding_agent.core.protocols.Planner`.
    """


@hookspec
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    """Add patch policies; every registered policy checks every plan before it is tested.

    :param register: call with each object satisfying
        :class:`~sandboxed_coding_agent.core.protocols.PatchPolicy`.
    """


@hookspec
def register_runners(register: Callable[[Runner], None]) -> None:
    """Add test runners (sandboxes) that ``agent run --runner NAME`` can select.

    :param register: call with each object satisfying
        :class:`~sandboxed_coding_agent.core.protocols.Runner`.
    """

"""The hooks a plugin implements; the contract every extension author codes against.

A plugin is a module (or object) with functions named after these hooks,
decorated with :data:`hookimpl`. Third-party plugins are found through the
``sandboxed_coding_agent`` entry-point group (the entry point's name is the
plugin's name); the built-in ones use the very same hooks. Each hook receives
a ``register`` callback; call it once for every thing the plugin adds. The
hooks are called once per process, the first time the agent needs the things
they register.

Names are first come, first served, and the built-in plugins come first: a
plugin cannot replace the patch contract or a built-in seed by registering the
same name. A plugin that fails to import, implements a hook under a wrong name
or with wrong arguments, or raises in a hook is reported in one line naming it
and its distribution, and left out; the rest of the agent keeps working.
``agent plugins list`` shows every plugin, and ``--disable-plugin NAME`` or
``SANDBOXED_CODING_AGENT_DISABLE_PLUGINS=name,...`` runs without one.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from .model import SeedProject
from .protocols import Check, PatchPolicy, Planner, Runner

__all__ = [
    "hookimpl",
    "hookspec",
    "register_checks",
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

    A seed shipped as a folder with a ``seed.toml`` (package data of the
    plugin) is read with :func:`sandboxed_coding_agent.core.manifest.load_seed`.

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
    """Add patch policies: rules a plan must keep before it reaches a sandbox.

    Each policy's ``activation`` says whether it runs always, unless switched
    off (``--no-policy NAME``), or only when switched on (a seed's
    ``[policies.NAME]`` table, or ``--policy NAME``); its ``configure`` receives
    the parameters a seed gives it. Every active policy checks every plan, and
    all their reasons are reported together.

    :param register: call with each object satisfying
        :class:`~sandboxed_coding_agent.core.protocols.PatchPolicy`.
    """


@hookspec
def register_runners(register: Callable[[Runner], None]) -> None:
    """Add test runners (sandboxes) that ``agent run --runner NAME`` can select.

    :param register: call with each object satisfying
        :class:`~sandboxed_coding_agent.core.protocols.Runner`.
    """


@hookspec
def register_checks(register: Callable[[Check], None]) -> None:
    """Add checks that ``agent doctor`` runs, for what the plugin needs on this machine.

    The checks run only in ``agent doctor``; each tries what it checks for real
    and reports one :class:`~sandboxed_coding_agent.core.model.Finding` per
    item, OK or with its fix. For example, a plugin for a cloud backend checks
    that its client imports and its credentials are set (never printing them)::

        @hookimpl
        def register_checks(register):
            register(CloudCredentials())

    :param register: call with each object satisfying
        :class:`~sandboxed_coding_agent.core.protocols.Check`.
    """

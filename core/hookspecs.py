"""The hooks a plugin implements: the contract every extension author codes against.

A plugin is a module with functions named after these hooks, each marked with
:data:`hookimpl`; it implements only the hooks it needs. Third-party plugins
are found through the ``sandboxed_coding_agent`` entry-point group of any
installed distribution (the entry point's name is the plugin's name, its value
the module); the built-in ones use the very same hooks.

Every hook receives a ``register`` callback: call it once for each thing the
plugin adds, and return nothing. Every ``agent`` command except ``agent logs``
imports every plugin and calls each hook once, the built-in plugins first
(``agent --help`` too, to list the plugins' command groups). Names are first
come, first served: a plugin cannot replace the patch contract or a built-in
seed by registering the same name.

Names follow one convention. A plugin's name is its entry point's name, a
Python identifier with underscores (``agent_policy_example``): it is what
``agent plugins list`` shows and ``--disable-plugin`` takes. What a plugin
registers for users to type (seeds, policies, planners, runners, checks and
command groups) is named in lower case words joined by hyphens (``small-diff``,
``python-ast``); ``agent plugins list`` warns about a name that is not.

A plugin that fails to import, implements a hook under a wrong name or with
other arguments, defines a hook without :data:`hookimpl`, raises in a hook, or
registers something that does not fit, is reported in one line naming it and
its distribution, and left out (wholly, or that one thing); the rest of the
agent keeps working. ``agent plugins list`` shows every plugin and its
problem, and ``--disable-plugin NAME`` or
``SANDBOXED_CODING_AGENT_DISABLE_PLUGINS=name,...`` runs without one.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from .model import SeedProject
from .protocols import Check, CommandGroup, PatchPolicy, Planner, Runner

__all__ = [
    "hookimpl",
    "hookspec",
    "register_checks",
    "register_commands",
    "register_planners",
    "register_policies",
    "register_runners",
    "register_seeds",
]

hookspec = pluggy.HookspecMarker("sandboxed_coding_agent")
hookimpl = pluggy.HookimplMarker("sandboxed_coding_agent")
"""Marks a plugin's function as the implementation of the hook of the same name.

Use it bare (``@hookimpl``). A function without it is never called (the agent
warns about one named like a hook).
"""


@hookspec
def register_seeds(register: Callable[[SeedProject], None]) -> None:
    """Add seed projects that ``agent run --seed NAME`` can select.

    Called once per command, when the plugins are loaded. A seed shipped as a
    folder with a ``seed.toml`` (package data of the plugin) is read with
    :func:`~sandboxed_coding_agent.core.seeds.manifest.load_seed`; a seed can also
    be built directly as a :class:`~sandboxed_coding_agent.core.model.SeedProject`::

        from pathlib import Path

        from sandboxed_coding_agent.core.hookspecs import hookimpl
        from sandboxed_coding_agent.core.seeds.manifest import load_seed


        @hookimpl
        def register_seeds(register):
            register(load_seed(Path(__file__).parent / "seeds" / "roman"))

    The seed is listed by ``agent seeds list`` with the plugin and its
    distribution as its source.

    :param register: call once with each
        :class:`~sandboxed_coding_agent.core.model.SeedProject` (named in lower
        case words joined by ``-``); a seed whose name is taken is left out with
        a warning.
    """


@hookspec
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    """Add patch policies: rules a plan must keep before it reaches a sandbox.

    Called once per command, when the plugins are loaded; each policy's
    :meth:`~sandboxed_coding_agent.core.protocols.PatchPolicy.check` is called
    later, for every plan of a run where the policy is active (its
    ``activation``, the seed's ``[policies.NAME]`` tables and the user's
    ``--policy`` / ``--no-policy`` decide)::

        from sandboxed_coding_agent.core.hookspecs import hookimpl

        from .small_diff import SmallDiff


        @hookimpl
        def register_policies(register):
            register(SmallDiff())

    :param register: call once with each object that has the members of
        :class:`~sandboxed_coding_agent.core.protocols.PatchPolicy` (an
        instance, not the class, named in lower case words joined by ``-``); an
        object that lacks one, or whose name is taken, is left out with a warning.
    """


@hookspec
def register_planners(register: Callable[[Planner], None]) -> None:
    """Add planners that ``agent run --planner NAME`` can select.

    Called once per command, when the plugins are loaded; the selected
    planner's :meth:`~sandboxed_coding_agent.core.protocols.Planner.plan` is
    called once per ``agent run`` that has no ``--plan FILE``, or once per
    attempt and candidate with ``--attempts N`` and ``--candidates K``: a repair
    attempt's request carries
    :class:`~sandboxed_coding_agent.core.model.Feedback` on the attempt before, and
    candidates call it from several threads at once. Requests never hold a seed's
    hidden test files.

    :param register: call once with each object that has the members of
        :class:`~sandboxed_coding_agent.core.protocols.Planner`, named in lower
        case words joined by ``-``; ``agent planners list`` shows each.
    """


@hookspec
def register_runners(register: Callable[[Runner], None]) -> None:
    """Add test runners (sandboxes) that ``agent run --runner NAME`` can select.

    Called once per command, when the plugins are loaded; the selected
    runner's :meth:`~sandboxed_coding_agent.core.protocols.Runner.run_test` is
    called for every plan of a run that every policy accepted (once per attempt
    and candidate), from several threads at once with ``--candidates K``; a runner
    that also has
    :meth:`~sandboxed_coding_agent.core.protocols.StoppableRunner.run_test_until`
    lets ``--first-pass`` and Ctrl-C stop its running sandboxes at once. The job
    holds every seed file, hidden tests included.

    :param register: call once with each object that has the members of
        :class:`~sandboxed_coding_agent.core.protocols.Runner`, named in lower
        case words joined by ``-``; ``agent runners list`` shows each, with its
        description (say there if the runner is not a sandbox).
    """


@hookspec
def register_checks(register: Callable[[Check], None]) -> None:
    """Add checks that ``agent doctor`` runs, for what the plugin needs on this machine.

    Called once per command, when the plugins are loaded; only ``agent doctor``
    runs the checks. Each tries what it checks for real and reports one
    :class:`~sandboxed_coding_agent.core.model.Finding` per item, OK or with its
    fix. For example, a plugin for a cloud backend checks that its client
    imports and its credentials are set (never printing them)::

        @hookimpl
        def register_checks(register):
            register(CloudCredentials())

    ``agent doctor --planner NAME --runner NAME`` says which planner and runner
    the user will run (``--no-planner``: plan files only). A check of a plugin
    that registers planners or runners, none of them in use, still runs, but its
    failed items are shown as information (``required`` false), never as
    failures. A check whose ``run`` takes a parameter named ``context`` is given
    a :class:`~sandboxed_coding_agent.core.protocols.DoctorContext` naming them::

        def run(self, context: DoctorContext | None = None) -> list[Finding]:
            if context is not None and context.runner != "cloud":
                return [Finding("cloud credentials", ok=True, detail="runner not in use")]
            ...

    :param register: call once with each object that has the members of
        :class:`~sandboxed_coding_agent.core.protocols.Check`.
    """


@hookspec
def register_commands(register: Callable[[CommandGroup], None]) -> None:
    """Add a group of commands to ``agent``: ``agent NAME COMMAND ...``.

    Called when ``agent`` starts with a command line that may name a plugin's
    group (``agent NAME ...``, ``agent --help``); the built-in commands
    (``run``, ``doctor``, ...) never call it. Build the commands with typer in a
    module of your plugin and import nothing heavy there: the libraries a
    command needs are imported inside the command, when it runs. Raise an
    :class:`~sandboxed_coding_agent.core.errors.AgentError` for a failure and
    let :func:`~sandboxed_coding_agent.core.commands.reporting` turn it into one
    message and its exit code::

        import attrs
        import typer

        from sandboxed_coding_agent.core.commands import reporting
        from sandboxed_coding_agent.core.hookspecs import hookimpl


        @attrs.frozen
        class ReplayCommands:
            name: str = "replay"
            help: str = "Run recorded plans again."

            def build(self) -> typer.Typer:
                group = typer.Typer(help=self.help, no_args_is_help=True)

                @group.command("list", help="List the recorded plans.")
                def list_(as_json: bool = typer.Option(False, "--json")) -> None:
                    with reporting(as_json):
                        ...

                return group


        @hookimpl
        def register_commands(register):
            register(ReplayCommands())

    :param register: call once with each object that has the members of
        :class:`~sandboxed_coding_agent.core.protocols.CommandGroup`; a group
        whose name a built-in command or another group has is left out with a
        warning.
    """

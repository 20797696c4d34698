"""Commands that plugins add (``register_commands``): how ``agent`` mounts them, and their helpers.

A plugin's group is mounted only for a command line that may name it
(``agent NAME ...``, ``agent --help``, ``agent`` alone): ``agent run`` and the
other built-in commands never build one. A command reports a failure by
raising an :class:`~sandboxed_coding_agent.core.errors.AgentError` inside
:func:`reporting`, which maps it, as it does for every built-in command, to
one message on stderr (one JSON object on stdout with ``--json``) and the
documented exit code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .errors import AgentError

if TYPE_CHECKING:
    import typer

__all__ = ["echo", "mount_plugin_commands", "print_json", "reporting", "say"]


@contextmanager
def reporting(as_json: bool = False, debug: bool = False) -> Iterator[None]:
    """Run a command's body: every failure becomes one message and its exit code.

    With ``as_json`` stdout holds only the JSON the command prints with
    :func:`print_json` (or the error object); ``debug`` adds the traceback on
    stderr, as ``agent --debug`` does.
    """
    from .cli import terminal

    with terminal.reporting(as_json, debug):
        yield


def echo(text: str, err: bool = False) -> None:
    """Print text for a person, with control characters from elsewhere shown escaped."""
    from .cli import terminal

    terminal.echo(text, err=err)


def say(message: str) -> None:
    """One line of progress or warning on stderr, as ``agent: MESSAGE``."""
    from .cli import terminal

    terminal.say(message)


def print_json(value: object, indent: int | None = None) -> None:
    """Print ``value`` as JSON on stdout (the one object a ``--json`` command prints)."""
    from .cli import terminal

    terminal.print_json(value, indent=indent)


def mount_plugin_commands(app: typer.Typer, args: Sequence[str]) -> None:
    """Add each plugin's command group to ``app``, for a command line that may name one.

    :param app: the ``agent`` typer app.
    :param args: the command line after ``agent``.
    """
    from .plugins import PluginHost, disabled_from_environment

    builtin = _builtin_names(app)
    word, disabled = _first_word(args)
    if word in builtin:
        return
    try:
        host = PluginHost(disabled=[*disabled_from_environment(), *disabled])
    except AgentError:
        return  # the command (or the help) reports it when it loads the plugins
    for name, registered in host.commands.items():
        group = registered.item
        if name in builtin:
            if word is None or word == name:
                say(
                    f"warning: {host.describe(registered.plugin)} registered commands {name!r}, "
                    "which is a built-in command; they were ignored"
                )
            continue
        try:
            app.add_typer(group.build(), name=name, help=group.help)
        except Exception as error:  # a broken plugin must not break the CLI
            if word is None or word == name:
                say(
                    f"warning: {host.describe(registered.plugin)} failed to build its commands "
                    f"{name!r}: {type(error).__name__}: {error}"
                )
    if word is not None and word in host.commands:
        for problem in host.problems:
            say(f"warning: {problem}")


def _builtin_names(app: typer.Typer) -> set[str]:
    from .cli import COMMANDS

    names = {*COMMANDS, *(info.name for info in app.registered_groups if info.name)}
    for command in app.registered_commands:
        callback_name = getattr(command.callback, "__name__", "")
        names.add(command.name or callback_name.replace("_", "-"))
    return names


def _first_word(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """The command's name (its first word not an option), and the ``--disable-plugin`` values."""
    disabled: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            return (args[index + 1] if index + 1 < len(args) else None), disabled
        if arg == "--disable-plugin":
            if index + 1 < len(args):
                disabled.append(args[index + 1])
            index += 2
            continue
        if arg.startswith("--disable-plugin="):
            disabled.append(arg.split("=", 1)[1])
        elif not arg.startswith("-"):
            return arg, disabled
        index += 1
    return None, disabled

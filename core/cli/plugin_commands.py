"""How ``agent`` mounts the command groups that plugins add (``register_commands``).

A plugin's group is mounted only for a command line that may name it
(``agent NAME ...``, ``agent --help``, ``agent`` alone): ``agent run`` and the
other built-in commands never build one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import typer

from ..commands import say
from ..errors import AgentError


def mount_plugin_commands(app: typer.Typer, args: Sequence[str], commands: Iterable[str]) -> None:
    """Add each plugin's command group to ``app``, for a command line that may name one.

    :param app: the ``agent`` typer app.
    :param args: the command line after ``agent``.
    :param commands: the names of the built-in commands ``app`` loads when named.
    """
    from ..plugins import PluginHost, disabled_from_environment

    builtin = _builtin_names(app, commands)
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


def _builtin_names(app: typer.Typer, commands: Iterable[str]) -> set[str]:
    names = {*commands, *(info.name for info in app.registered_groups if info.name)}
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

"""Helpers for the commands that plugins add (``register_commands``).

``agent`` mounts a plugin's group only for a command line that may name it
(``agent NAME ...``, ``agent --help``, ``agent`` alone). A command reports a failure by
raising an :class:`~sandboxed_coding_agent.core.errors.AgentError` inside
:func:`reporting`, which maps it, as it does for every built-in command, to
one message on stderr (one JSON object on stdout with ``--json``) and the
documented exit code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["echo", "print_json", "reporting", "say"]


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

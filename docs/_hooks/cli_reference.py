"""MkDocs hook: the command-line reference, generated from the ``agent`` app when the site is built.

``docs/cli.md`` holds the prose and a marker line; the marker becomes one section
per command with its help, usage, arguments and options. Commands are found as
``agent --help`` finds them, through the click group's ``list_commands`` and
``get_command`` after the plugins' command groups are mounted as ``agent``
mounts them, so a new command, option or plugin command group shows up without
editing the page, and one that is gone disappears.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterator
from typing import Any

import typer

MARKER = "<!-- cli-reference -->"
PAGE = "cli.md"
PROGRAM = "agent"

_CODE_SPAN = re.compile(r"(`[^`]*`)")


def on_page_markdown(markdown: str, *, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} has no {MARKER} line for the generated reference")
    return markdown.replace(MARKER, reference())


def reference() -> str:
    """The Markdown of every command of ``agent``."""
    group = typer.main.get_command(_agent_app())
    root = group.context_class(group, info_name=PROGRAM)
    sections = [_section(command, context) for command, context in _walk(root)]
    return "\n\n".join(sections) + "\n"


@functools.cache  # once per process: `mkdocs serve` builds again in the same one
def _agent_app() -> typer.Typer:
    """The ``agent`` app with every plugin's command group, as for ``agent --help``."""
    from sandboxed_coding_agent.core import cli
    from sandboxed_coding_agent.core.cli.plugin_commands import mount_plugin_commands

    mount_plugin_commands(cli.app, [], cli.COMMANDS)
    return cli.app


def _walk(context: Any) -> Iterator[tuple[Any, Any]]:
    """``context``'s command, then each one under it as the groups list them (not hidden ones)."""
    yield context.command, context
    for name, command in _subcommands(context):
        yield from _walk(command.context_class(command, info_name=name, parent=context))


def _subcommands(context: Any) -> list[tuple[str, Any]]:
    group = context.command
    if not hasattr(group, "list_commands"):
        return []
    found = [(name, group.get_command(context, name)) for name in group.list_commands(context)]
    return [(name, command) for name, command in found if command and not command.hidden]


def _section(command: Any, context: Any) -> str:
    path = context.command_path
    # `agent` and its commands are sections of the page; a group's commands, their subsections.
    level = max(2, len(path.split()))
    parts = [f"{'#' * min(level, 4)} `{path}`"]
    help_text = _help(command)
    if help_text:
        parts.append(help_text)
    parts.append(f"```text\n{command.get_usage(context).strip()}\n```")
    params = [param for param in command.params if not getattr(param, "hidden", False)]
    arguments = [param for param in params if param.param_type_name == "argument"]
    options = [param for param in params if param.param_type_name == "option"]
    if arguments:
        rows = [_row(param, context, f"`{param.human_readable_name}`") for param in arguments]
        parts.append(_table("argument", rows))
    if options:
        rows = [_row(param, context, _option_names(param)) for param in options]
        parts.append(_table("option", rows))
    subcommands = [f"{path} {name}" for name, _ in _subcommands(context)]
    if subcommands:
        links = ", ".join(f"[`{sub}`](#{_anchor(sub)})" for sub in subcommands)
        parts.append(f"Commands: {links}.")
    return "\n\n".join(parts)


def _help(command: Any) -> str:
    """The command's help as Markdown paragraphs (click's ``\\f`` cut and ``\\b`` marks applied)."""
    text = (command.help or command.short_help or "").split("\f")[0]
    lines = [line for line in text.strip().splitlines() if line.strip() != "\b"]
    return _escape("\n".join(lines))


def _row(param: Any, context: Any, name: str) -> list[str]:
    help_text = _escape(" ".join((getattr(param, "help", None) or "").split()))
    return [name, _type(param), _default(param, context), help_text]


def _option_names(param: Any) -> str:
    shown = ", ".join(f"`{name}`" for name in param.opts)
    if param.secondary_opts:  # a --flag / --no-flag pair
        shown += " / " + ", ".join(f"`{name}`" for name in param.secondary_opts)
    if not param.is_flag and param.metavar:
        shown += f" `{param.metavar}`"
    return shown


_TYPE_NAMES = {"str": "text", "text": "text", "int": "integer", "integer": "integer"}
_TYPE_NAMES |= {"float": "number", "boolean": "true or false", "file": "file", "path": "path"}


def _type(param: Any) -> str:
    kind_of = param.type
    if getattr(param, "is_flag", False) and not param.secondary_opts:
        kind = "flag"
    elif kind_of.name == "choice":
        kind = ", ".join(f"`{choice}`" for choice in kind_of.choices)
    elif hasattr(kind_of, "min") and hasattr(kind_of, "max"):
        kind = "integer" if "int" in kind_of.name else "number"
        kind += _bounds(kind_of.min, kind_of.max, kind_of.min_open, kind_of.max_open)
    else:
        kind = _TYPE_NAMES.get(kind_of.name, kind_of.name)
    if getattr(param, "multiple", False) or param.nargs == -1:
        kind += ", repeatable"
    return kind


def _bounds(low: Any, high: Any, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None and not (low_open or high_open):
        return f", {low} to {high}"
    shown = []
    if low is not None:
        shown.append(f"{'>' if low_open else '≥'} {low}")
    if high is not None:
        shown.append(f"{'<' if high_open else '≤'} {high}")
    return f", {' and '.join(shown)}" if shown else ""


def _default(param: Any, context: Any) -> str:
    if param.required:
        return "*required*"
    default = param.get_default(context, call=False)
    if callable(default) or default is None or default == () or default == []:
        return ""
    if getattr(param, "is_flag", False) and not param.secondary_opts:
        return "" if default is False else "on"
    if isinstance(default, bool) and param.secondary_opts:
        return f"`{(param.opts if default else param.secondary_opts)[0]}`"
    if isinstance(default, (list, tuple)):
        return ", ".join(f"`{item}`" for item in default)
    return f"`{default}`"


def _table(kind: str, rows: list[list[str]]) -> str:
    lines = [f"| {kind} | type | default | description |", "| --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """``text`` with its pipes escaped from the table, except those in code spans."""
    pieces = _CODE_SPAN.split(text)
    pieces[::2] = [piece.replace("|", "\\|") for piece in pieces[::2]]
    return "".join(pieces)


def _escape(text: str) -> str:
    """``text`` as Markdown: code spans kept, markup characters elsewhere shown as they are."""
    pieces = _CODE_SPAN.split(text)
    for index in range(0, len(pieces), 2):
        piece = html.escape(pieces[index], quote=False)
        pieces[index] = re.sub(r"([\\*_\[\]])", r"\\\1", piece)
    return "".join(pieces)


def _anchor(title: str) -> str:
    """The id MkDocs' toc gives a heading ``title`` (a command path in a code span)."""
    return re.sub(r"[^\w]+", "-", title.lower()).strip("-")

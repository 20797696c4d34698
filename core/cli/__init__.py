"""The ``agent`` command: translates between the terminal and ``core``, nothing more.

Exit codes (also in the README):

* 0 the test passed; 1 the test ran and failed, timed out or hit a sandbox limit;
* 2 usage or configuration error; 3 provider error; 4 plan rejected by a policy;
* 5 sandbox error; 70 unexpected internal error; 130 interrupted (Ctrl-C or SIGTERM);
* 141 stdout or stderr closed by its reader (``agent ... | head``), quietly.

``agent doctor`` exits 0 when every required item is OK, 2 when one is not.

Each command (or command group) is one module of this package, named in
:data:`COMMANDS` with its one-line summary: ``agent --help`` lists them from
that table without importing any, and a command's module is imported only when
that command runs or shows its own help. A new command is one new module and
one line in the table. Commands that plugins add (``register_commands``) are
mounted by :func:`~sandboxed_coding_agent.core.cli.plugin_commands.mount_plugin_commands`.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from ..errors import EXIT_OUTPUT_CLOSED, UsageError
from . import terminal
from .options import DebugOption

#: Every built-in command: name -> (module of this package, the command's function or
#: typer group in it, the summary ``agent --help`` shows, the first line of its docstring).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("run", "run", "Plan a change to a seed project and test it in a sandbox."),
    "validate": (
        "validate",
        "validate",
        "Check plan files against a seed's policies without running anything.",
    ),
    "logs": (
        "logs",
        "logs",
        "Show a run's record (plans, tests, error) or a planner call's (each attempt, the answer).",
    ),
    "runs": ("runs", "app", "Records of past runs: list them, delete old ones."),
    "seeds": ("seeds", "app", "Seed projects a run can use."),
    "plugins": ("plugins", "app", "Installed plugins."),
    "policies": ("policies", "app", "Policies that check plans before a sandbox."),
    "planners": ("planners", "app", "Planners a run can use (agent run --planner NAME)."),
    "runners": (
        "runners",
        "app",
        "Runners, the sandboxes, a run can use (agent run --runner NAME).",
    ),
    "doctor": (
        "doctor",
        "doctor",
        "Check that this machine has what a run needs: each item OK, or how to fix it.",
    ),
    "batch": (
        "batch",
        "batch",
        "Run a file of tasks, a few at once, one result line per task; resumable.",
    ),
    "report": (
        "report",
        "report",
        "Write batches' results as one self-contained HTML report (no network resources).",
    ),
    "replay": (
        "replay",
        "replay",
        "Re-test a recorded run's plans in fresh sandboxes; exit 0 when every verdict matches.",
    ),
    "diff": (
        "diff",
        "diff",
        "Print the patch a recorded run chose, as a diff `git apply` accepts.",
    ),
    "apply": (
        "apply",
        "apply",
        "Write the change a recorded run proved into a folder (default: the current one).",
    ),
    "serve": (
        "serve",
        "serve",
        "Answer verdicts over HTTP: POST /v1/verify, POST /v1/verify/batch, GET /v1/health.",
    ),
    "swebench": (
        "swebench",
        "app",
        "SWE-bench task instances in as seeds, predictions out, predictions evaluated.",
    ),
}


def load_command(name: str) -> Any:
    """The click command (or group) of the built-in command ``name``, its module imported."""
    module_name, attribute, _ = COMMANDS[name]
    target = getattr(importlib.import_module(f"{__name__}.{module_name}"), attribute)
    command: Any
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
    else:
        single = typer.Typer(add_completion=False, rich_markup_mode=None)
        single.command(name)(target)
        command = typer.main.get_command(single)
    command.name = name
    return command


def _asks_for_json(args: Sequence[str]) -> bool:
    options = list(args)
    if "--" in options:
        options = options[: options.index("--")]
    return "--json" in options


class _AgentCommands(TyperGroup):
    """The ``agent`` command group: commands loaded when named; JSON usage errors.

    With ``--json``, even a usage error is a JSON error object: click reports a
    bad option, a bad value or a missing argument itself (exit 2), before any
    command runs; this prints the JSON object a script reading stdout expects,
    and leaves click's message on stderr as it is.
    """

    def main(self, *args: Any, **extra: Any) -> Any:
        try:
            return super().main(*args, **extra)
        except BrokenPipeError:  # click's own message (a usage error) met the closed pipe
            terminal.discard_output()
            raise SystemExit(EXIT_OUTPUT_CLOSED) from None
        except SystemExit as leaving:
            # Click ends a command whose output pipe closed (`agent --help | true`, a
            # usage error into `| head`) with 1 after wrapping the streams; the agent's
            # documented code for that is the one its commands give.
            wrapped = type(sys.stdout).__name__ == "PacifyFlushWrapper"
            if leaving.code == 1 and wrapped:
                raise SystemExit(EXIT_OUTPUT_CLOSED) from None
            raise

    # Contexts are typed loosely: typer versions differ in where their click comes from.
    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # From the table, so that the help imports no command's module.
        rows = []
        for name in self.list_commands(ctx):
            if name in COMMANDS and name not in self.commands:
                rows.append((name, COMMANDS[name][2]))
            elif not (command := self.commands[name]).hidden:
                rows.append((name, command.get_short_help_str(limit=300)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        as_json = _asks_for_json(args)
        with _usage_error_as_json(as_json):
            ctx = super().make_context(info_name, args, parent, **extra)
        ctx.meta["agent.json"] = as_json
        return ctx

    def invoke(self, ctx: Any) -> Any:
        with _usage_error_as_json(bool(ctx.meta.get("agent.json"))):
            return super().invoke(ctx)


@contextmanager
def _usage_error_as_json(as_json: bool) -> Iterator[None]:
    try:
        yield
    except Exception as error:
        message = _usage_message(error) if as_json else None
        if message is not None:
            ctx = getattr(error, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            terminal.print_json(terminal.error_json(UsageError(message.rstrip(".") + hint)))
        raise


def _usage_message(error: Exception) -> str | None:
    """What click says about a usage error, or ``None`` if ``error`` is not one.

    Told by shape rather than class, as typer itself does: some typer versions
    vendor their own click. A bare ``agent`` (help, not an error) is not one.
    """
    format_message = getattr(error, "format_message", None)
    if (
        type(error).__name__ == "NoArgsIsHelpError"
        or not callable(format_message)
        or not isinstance(getattr(error, "exit_code", None), int)
    ):
        return None
    return str(format_message())


# Plain click formatting (rich_markup_mode=None): importing rich's help renderer would
# cost more than the rest of the start-up, and its boxes cut long lines.
app = typer.Typer(
    cls=_AgentCommands,
    help="Let a language model propose a code change and prove it in a network-blocked sandbox.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _show_version(wanted: bool) -> None:
    """``agent --version``: the installed distribution's version, and the Python running it."""
    if not wanted:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("sandboxed-coding-agent")
    except PackageNotFoundError:
        installed = "unknown (not installed as a distribution)"
    python = ".".join(map(str, sys.version_info[:3]))
    typer.echo(f"sandboxed-coding-agent {installed} (Python {python})")
    raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help="Show the agent's version and exit.",
        ),
    ] = False,
    debug: DebugOption = False,
    disable_plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--disable-plugin",
            metavar="NAME",
            help="Run without this plugin (repeatable; see `agent plugins list`). "
            "Also SANDBOXED_CODING_AGENT_DISABLE_PLUGINS=name,...",
        ),
    ] = None,
) -> None:
    terminal.state["debug"] = debug
    terminal.state["disabled_plugins"] = disable_plugin or []


def _terminate(signum: int, _: FrameType | None) -> NoReturn:
    # Unwind like Ctrl-C so every `finally` (sandbox kill, workspace removal) runs.
    raise KeyboardInterrupt


def _open_standard_streams() -> None:
    """Put ``/dev/null`` where the caller closed standard input, output or error.

    ``agent ... <&-`` or ``>&-`` leaves that descriptor free, and the next file the
    agent opens would take its number: output meant for the terminal would go
    into it, or a child's standard stream would replace it. Output to a closed
    stream is discarded, as the caller asked; the exit code still gives the verdict.
    """
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:  # Python found it closed at start-up
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115


def main() -> None:
    """Entry point of the ``agent`` console script."""
    _open_standard_streams()
    signal.signal(signal.SIGTERM, _terminate)
    warnings.showwarning = terminal.show_warning
    # Plugins' command groups (register_commands), only when the command line may name one.
    from .plugin_commands import mount_plugin_commands

    mount_plugin_commands(app, sys.argv[1:], COMMANDS)
    app(prog_name="agent")


if __name__ == "__main__":
    main()

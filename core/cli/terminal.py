"""What every command shares: text for a person, JSON for a script, one message per failure.

A command runs its body inside :func:`reporting`, which maps every error to one
line on stderr (and, with ``--json``, one JSON object on stdout) and the
documented exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import typer

from ..errors import (
    EXIT_CODES,
    EXIT_OUTPUT_CLOSED,
    AgentError,
    AgentWarning,
    Interrupted,
    PlanRejected,
)

if TYPE_CHECKING:
    from ..plugins import PluginHost

#: What ``agent --debug`` and ``agent --disable-plugin`` set for the command that runs.
state: dict[str, Any] = {"debug": False, "disabled_plugins": []}

_INTERRUPTED = "interrupted; the sandbox (if any) was terminated and its workspace removed"

# Control characters in text the agent does not write itself (a hostile test's output,
# a model's answer, a seed's description) could move the cursor and overwrite what a
# person reads, the verdict included; they are shown escaped instead. Newline and tab
# stay, and so does the carriage return of a CRLF line end. A lone surrogate (a byte of
# a file name that is not UTF-8, or a plugin's text) cannot be written as UTF-8 at all:
# it is shown escaped too, a byte as \xNN.
_TERMINAL_CONTROL = re.compile(r"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def for_terminal(text: str) -> str:
    """``text`` with control characters and lone surrogates shown escaped."""
    return _TERMINAL_CONTROL.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    char = found.group()
    if 0xDC80 <= ord(char) <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{ord(char) - 0xDC00:02x}"
    return repr(char)[1:-1]


def one_line(text: str) -> str:
    """``text`` as :func:`for_terminal` shows it, with line breaks escaped too: for a field
    of one line (a name, a path, a message), which outside text must not split into lines
    of its own making."""
    return for_terminal(text).replace("\r", "\\r").replace("\n", "\\n")


def echo(text: str, err: bool = False) -> None:
    """Print text meant for a person, with control characters shown escaped."""
    typer.echo(for_terminal(text), err=err)


def say(message: str) -> None:
    """One line of progress or warning on stderr, as ``agent: MESSAGE`` (a line break in
    ``MESSAGE`` shown escaped)."""
    echo(f"agent: {one_line(message)}", err=True)


#: The real stdout while a ``--json`` command works with file descriptor 1 on stderr.
_json_stdout: list[TextIO] = []


def print_json(value: object, indent: int | None = None) -> None:
    """Print ``value`` as JSON on stdout: always valid UTF-8, whatever text it holds.

    A file name that is not UTF-8 reaches Python as lone surrogates; written raw,
    they would make stdout undecodable, so such text is written with JSON escapes.
    """
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, indent=indent, ensure_ascii=True)
    typer.echo(text, file=_json_stdout[-1] if _json_stdout else None)


@contextmanager
def _stdout_for_json_only(as_json: bool) -> Iterator[None]:
    """With ``--json``, let nothing but the JSON reach stdout.

    While the command works, file descriptor 1 points at stderr, so whatever a
    plugin prints, or a process it starts, lands there; the JSON is written to
    the real stdout, kept aside.
    """
    if not as_json:
        yield
        return
    sys.stdout.flush()
    try:
        kept = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no stdout or no stderr to begin with: nothing to keep apart
        yield
        return
    stream = os.fdopen(kept, "w", encoding="utf-8")
    _json_stdout.append(stream)
    try:
        yield
    finally:
        _json_stdout.pop()
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        os.dup2(kept, 1)
        with contextlib.suppress(OSError):  # a full disk was reported already
            stream.close()


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` for the CLI: what a plugin warns of is one line on stderr."""
    if issubclass(category, AgentWarning):
        say(f"warning: {message}")
    else:
        _original_showwarning(message, category, filename, lineno, file, line)


_original_showwarning = warnings.showwarning


def load_plugins() -> PluginHost:
    """The plugin host, without the plugins the user disabled; its problems as warnings."""
    from ..plugins import PluginHost, disabled_from_environment

    host = PluginHost(disabled=[*disabled_from_environment(), *state["disabled_plugins"]])
    for problem in host.problems:
        say(f"warning: {problem}")
    return host


def error_json(error: AgentError) -> dict[str, Any]:
    """The JSON object a ``--json`` command prints for ``error``."""
    from ..serialization import to_jsonable

    body: dict[str, Any] = {
        "kind": error.kind,
        "message": error.message,
        "planner_task_id": error.planner_task_id,
        "sandbox_id": error.sandbox_id,
    }
    if isinstance(error, PlanRejected):
        body["rejections"] = to_jsonable(list(error.rejections))
    # What a run with --attempts or --candidates made before the error ended it.
    if error.attempts:
        body["attempts"] = to_jsonable(list(error.attempts))
    if error.candidates:
        body["candidates"] = to_jsonable(list(error.candidates))
    if error.spend is not None:  # what the run's planner calls spent before it
        body["spend"] = to_jsonable(error.spend)
    return {"error": body}


@contextmanager
def reporting(as_json: bool, debug: bool) -> Iterator[None]:
    """Turn every failure into one message and its documented exit code.

    With ``--json`` the failure is also the one JSON object on stdout. ``--debug``
    adds the traceback on stderr and changes nothing else, exit code included.
    """
    debug = debug or state["debug"]
    try:
        with _stdout_for_json_only(as_json):
            try:
                yield
            except (typer.Exit, typer.Abort, BrokenPipeError):
                raise
            except KeyboardInterrupt:
                _fail(Interrupted(_INTERRUPTED), as_json)
            except AgentError as error:
                _fail(error, as_json, show_traceback=error if debug else None)
            except Exception as error:
                hint = "" if debug else " (rerun with --debug for details)"
                internal = AgentError(f"{type(error).__name__}: {error}{hint}")
                _fail(internal, as_json, show_traceback=error if debug else None)
    except BrokenPipeError:  # also when reporting another error met the closed pipe
        _output_closed()


def _output_closed() -> NoReturn:
    """End a command whose reader went away (``agent ... | head``) as Unix tools end.

    No message (the reader is gone, and a person piping into ``head`` asked for
    less), no traceback, and :data:`EXIT_OUTPUT_CLOSED`. Whatever is still in
    Python's buffers goes to ``/dev/null``: its flush at exit would fail again and
    print "Exception ignored ... BrokenPipeError". Sandboxes are gone by then: the
    error unwound through every ``finally`` like any other.
    """
    discard_output()
    raise typer.Exit(EXIT_OUTPUT_CLOSED) from None


def discard_output() -> None:
    """Point standard output and error (and a ``--json`` command's) at ``/dev/null``."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    for stream in (sys.stdout, sys.stderr, *_json_stdout):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _fail(
    error: AgentError, as_json: bool, show_traceback: BaseException | None = None
) -> NoReturn:
    if show_traceback is not None:
        # Escaped like every other message: a traceback quotes the input that caused it.
        sys.stderr.write(for_terminal("".join(traceback.format_exception(show_traceback))))
    if as_json:
        # When stdout itself failed (a full disk), the message on stderr has to do.
        with contextlib.suppress(OSError):
            print_json(error_json(error))
    if isinstance(error, Interrupted):
        say(error.message)
        raise typer.Exit(EXIT_CODES[error.kind])
    ids = [
        f"{label} {value}"
        for label, value in (
            ("planner task", error.planner_task_id),
            ("sandbox", error.sandbox_id),
        )
        if value
    ]
    message, reasons = error.message, []
    if isinstance(error, PlanRejected):  # a line per reason, each reason on its one line
        message = error.message.split("\n", 1)[0]
        reasons = [f"  {one_line(rejection.describe())}" for rejection in error.rejections]
    spend = error.spend
    if spend is not None and (spend.planner_calls > 1 or error.kind == "budget"):
        say(f"spent: {spend.describe()}")  # every attempt's and candidate's calls
    say(f"{error.kind} error: {message}" + (f" ({', '.join(ids)})" if ids else ""))
    for reason in reasons:
        echo(reason, err=True)
    if error.planner_task_id and has_record(error.planner_task_id):
        say(f"every attempt is recorded: agent logs {error.planner_task_id}")
    raise typer.Exit(EXIT_CODES[error.kind])


def has_record(task_id: str) -> bool:
    """Whether ``agent logs TASK_ID`` has something to show."""
    from ..errors import UsageError
    from ..records import planner_calls

    try:
        return planner_calls.record_path(task_id).is_file()
    except UsageError:
        return False

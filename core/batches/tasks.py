"""A batch's tasks file: one JSON object per line, each a task; read as untrusted input.

A tasks file holds one JSON object per line (blank lines and lines starting
with ``#`` are skipped), each naming a ``seed`` and optionally an ``id``, a
``prompt``, ``attempts``, ``candidates``, a ``planner``, a ``runner``, a
``model`` and an ``edit_format``. A
task's ID is its ``id`` or ``line-N`` (its line number); results are keyed by
it, so ``--resume`` can skip what is done.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import stat
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import UsageError
from ..model import MAX_ATTEMPTS, MAX_CANDIDATES, LimitError, edit_format_name, model_name
from ..plans.contract import _no_duplicate_keys
from ..runs import orchestrator
from ..seeds import manifest
from ..serialization import describe_structure_error, structure

#: Options a task line may give that only some versions of ``orchestrator.run`` take.
RUN_OPTIONS = ("attempts", "candidates")
#: The longest line of a tasks file that is read.
MAX_TASK_LINE_BYTES = 1024 * 1024
#: The largest tasks file that is read.
MAX_TASKS_FILE_BYTES = 64 * 1024 * 1024
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_BOM = b"\xef\xbb\xbf"


def _between(low: int, high: int) -> Any:
    """A validator: a whole number from ``low`` to ``high``; the message names the field."""

    def check(_: object, attribute: Any, value: int | None) -> None:
        if value is None:
            return
        if type(value) is not int or not low <= value <= high:
            raise LimitError(
                f"{attribute.name!r} must be a whole number from {low} to {high}, not {value!r}"
            )

    return check


def _task_id(_: object, attribute: Any, value: str | None) -> None:
    if value is not None and not _TASK_ID.fullmatch(value):
        raise LimitError(
            f"{attribute.name!r} must be 1 to 128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )


@attrs.frozen
class BatchTask:
    """One line of a tasks file.

    :ivar seed: the seed, as ``agent run --seed`` takes it (a relative folder is
        relative to the directory ``agent batch`` runs in).
    :ivar id: the task's ID in the results; ``line-N`` when not given.
    :ivar prompt: the instruction; the seed's own when not given.
    :ivar attempts: as ``agent run --attempts``.
    :ivar candidates: as ``agent run --candidates``.
    :ivar planner: the planner backend.
    :ivar runner: the test runner.
    :ivar model: the model to ask the planner for (``agent run --model``); ``agent
        batch --model``'s, or the planner's default, when not given.
    :ivar edit_format: how the model writes its plan (``agent run --edit-format``):
        ``whole`` (the default), ``search-replace`` or ``udiff``.
    """

    seed: str
    id: str | None = attrs.field(default=None, validator=_task_id)
    prompt: str | None = None
    attempts: int | None = attrs.field(default=None, validator=_between(1, MAX_ATTEMPTS))
    candidates: int | None = attrs.field(default=None, validator=_between(1, MAX_CANDIDATES))
    planner: str = "openai"
    runner: str = "local"
    model: str | None = attrs.field(default=None, validator=model_name)
    edit_format: str = attrs.field(default="whole", validator=edit_format_name)


@attrs.frozen
class TaskLine:
    """A task and where it came from."""

    line: int
    task_id: str
    task: BatchTask


@attrs.frozen
class InvalidLine:
    """A line of the tasks file that is not a task, and why."""

    line: int
    message: str


def supported_run_options() -> frozenset[str]:
    """Which of :data:`RUN_OPTIONS` this agent's ``orchestrator.run`` takes."""
    parameters = inspect.signature(orchestrator.run).parameters
    return frozenset(name for name in RUN_OPTIONS if name in parameters)


def read_task_lines(path: Path) -> list[bytes]:
    """The lines of the tasks file at ``path``, read with bounded memory.

    A line longer than :data:`MAX_TASK_LINE_BYTES` is kept only as its first bytes
    past the limit (so :func:`read_tasks` reports it); a UTF-8 byte order mark
    at the start is dropped (some editors write one).

    :raises UsageError: it is not a regular file, is larger than
        :data:`MAX_TASKS_FILE_BYTES`, or cannot be read.
    """
    name = str(path)
    try:
        # O_NONBLOCK: a FIFO must not hang the open; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise UsageError(f"cannot read the tasks file {name!r}: {error.strerror}") from None
    with open(fd, "rb") as stream:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise UsageError(f"the tasks file {name!r} is not a regular file")
        if status.st_size > MAX_TASKS_FILE_BYTES:
            raise UsageError(
                f"the tasks file {name!r} is larger than {MAX_TASKS_FILE_BYTES} bytes; split it"
            )
        lines: list[bytes] = []
        total = 0
        limit = MAX_TASK_LINE_BYTES + 2  # room for the line's own "\r\n"
        try:
            while line := stream.readline(limit):
                total += len(line)
                if len(line) == limit and not line.endswith(b"\n"):  # too long: skip its rest
                    while total <= MAX_TASKS_FILE_BYTES and (rest := stream.readline(1 << 16)):
                        total += len(rest)
                        if rest.endswith(b"\n"):
                            break
                if total > MAX_TASKS_FILE_BYTES:  # it grew while being read
                    raise UsageError(
                        f"the tasks file {name!r} is larger than {MAX_TASKS_FILE_BYTES} bytes"
                    )
                lines.append(line)
        except OSError as error:
            raise UsageError(f"cannot read the tasks file {name!r}: {error.strerror}") from None
    if lines and lines[0].startswith(_BOM):
        lines[0] = lines[0][len(_BOM) :]
    return lines


def read_tasks(
    lines: Iterable[bytes], supported: frozenset[str]
) -> tuple[list[TaskLine], list[InvalidLine]]:
    """The tasks of a tasks file, and the lines that are not tasks (each with its number)."""
    tasks: list[TaskLine] = []
    invalid: list[InvalidLine] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        try:
            task = _parse_task(raw, supported)
        except ValueError as problem:
            invalid.append(InvalidLine(number, str(problem)))
            continue
        if task is None:
            continue
        task_id = task.id or f"line-{number}"
        if task_id in seen:
            invalid.append(
                InvalidLine(number, f"the ID {task_id!r} was already given on line {seen[task_id]}")
            )
            continue
        seen[task_id] = number
        tasks.append(TaskLine(number, task_id, task))
    return tasks, invalid


#: The commands that list what a task may name, by the kind of name.
_LISTED_BY = {
    "seed": "agent seeds list",
    "planner": "agent planners list",
    "runner": "agent runners list",
}
#: The most unknown names one refusal of a tasks file lists.
MAX_NAMES_SHOWN = 10


def unknown_names(tasks: Sequence[TaskLine], known: Mapping[str, Collection[str]]) -> str | None:
    """Why the tasks cannot all start, naming each line and task whose seed, planner or runner
    is unknown, and what is known; ``None`` if every name is known, or its folder is there.

    Checked before the first task starts, so a misspelt name refuses the file rather than
    end a task hours into a batch. A seed folder is looked for (its ``seed.toml``), not
    read: a bad one still ends its task in a usage error.

    :param known: the names of the seeds, planners and runners installed, by kind.
    """
    problems: list[str] = []
    kinds: set[str] = set()
    for task_line in tasks:
        task = task_line.task
        where = f"line {task_line.line} (task {task_line.task_id})"
        if manifest.looks_like_path(task.seed):
            if not _has_manifest(task.seed):
                problems.append(f"{where}: no seed folder at {task.seed!r} (no seed.toml there)")
        elif task.seed not in known["seed"]:
            problems.append(f"{where}: unknown seed {task.seed!r}")
            kinds.add("seed")
        for kind, name in (("planner", task.planner), ("runner", task.runner)):
            if name not in known[kind]:
                problems.append(f"{where}: unknown {kind} {name!r}")
                kinds.add(kind)
    if not problems:
        return None
    more = len(problems) - MAX_NAMES_SHOWN
    shown = "; ".join(problems[:MAX_NAMES_SHOWN]) + (f"; and {more} more" if more > 0 else "")
    listed = "; ".join(
        f"known {kind}s: {', '.join(sorted(known[kind])) or 'none'} (`{_LISTED_BY[kind]}`)"
        for kind in _LISTED_BY
        if kind in kinds
    )
    return "; ".join(filter(None, (shown, listed, "nothing was run")))


def _has_manifest(seed: str) -> bool:
    """Whether the seed folder a task names has a ``seed.toml``, found as
    ``manifest.load_seed`` finds it."""
    path = Path(seed)
    try:
        if path.name != manifest.MANIFEST and not path.is_file():
            path = path / manifest.MANIFEST
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL: no such folder either
        return False


def _parse_task(raw: bytes, supported: frozenset[str]) -> BatchTask | None:
    if len(raw.rstrip(b"\r\n")) > MAX_TASK_LINE_BYTES:
        raise ValueError(f"the line is longer than {MAX_TASK_LINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError("the line is not UTF-8 text") from None
    if not text or text.startswith("#"):
        return None
    try:
        # A repeated key is refused, as in a plan: JSON parsers disagree on which one wins.
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    except RecursionError:
        raise ValueError("not JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    _refuse_lone_surrogates(data)
    try:
        task = structure(data, BatchTask)
    except Exception as error:  # cattrs raises a tree of ordinary exceptions
        raise ValueError("; ".join(describe_structure_error(error, root="task"))) from None
    for option in RUN_OPTIONS:
        if getattr(task, option) is not None and option not in supported:
            raise ValueError(f"{option!r} is not supported by this version of the agent")
    return task


def _refuse_lone_surrogates(data: dict[str, Any]) -> None:
    """Refuse a lone surrogate (a JSON escape such as ``\\udcff``): it is not text, and no
    file name, prompt, record or results line can hold it."""
    for key, value in data.items():
        try:
            json.dumps({key: value}, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{key!r} holds a lone surrogate (an escape such as \\udcff), which is not text"
            ) from None

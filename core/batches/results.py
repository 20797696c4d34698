"""A batch's results file: one JSON line per finished task, and what each line holds.

The results file gets one JSON line per finished task, appended, flushed and
synced as each task ends: a crash or a kill loses no finished task, and at
worst leaves a torn last line, which a resume cuts off before appending.

The results file is created owner-only (it holds prompts and outputs), must be a
regular file (never followed through a symbolic link, never a FIFO or a device,
never the tasks file itself), and is locked for the whole batch, so two batches
never write the same file. The API key never reaches it: every line is written
with the key blanked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import stat
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
from attrs import validators as v

from .. import provider
from ..errors import Rejection, UsageError
from ..model import Candidate, LimitError, RunResult
from ..plans.budget import Spend
from ..provider import API_KEY_ENV
from ..serialization import describe_structure_error, structure, to_json, to_jsonable
from .environment import BatchEnvironment
from .tasks import InvalidLine

RESULT_FORMAT = 1
#: What became of a task, in the order the summary lists them.
STATUSES = (
    "passed",
    "failed",
    "rejected",
    "budget",
    "no-submission",
    "provider-error",
    "sandbox-error",
    "usage-error",
    "internal-error",
)
#: How every results line begins (``id`` is the first field of :class:`TaskResult`): a torn
#: last line is cut by a resume only when it begins so.
_RESULT_LINE_START = b'{"id": '


def _count(_: object, attribute: Any, value: Any) -> None:
    """A validator: a finite number, not negative (a damaged or hand-made line may hold NaN)."""
    if isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise LimitError(f"{attribute.name!r} must be a finite number of at least 0, not {value!r}")


@attrs.frozen
class TaskError:
    """The error a task ended in.

    :ivar rejections: for a policy error, every reason.
    :ivar candidates: every attempt the run made before it ended in this error, candidate
        by candidate (those refused before any sandbox included, each with its planner
        task ID, rejections, answer and tokens); empty when it made none, and in results
        older than this field.
    """

    kind: str
    message: str
    planner_task_id: str | None = None
    sandbox_id: str | None = None
    rejections: tuple[Rejection, ...] = ()
    candidates: tuple[Candidate, ...] = ()


def _resolution_of_the_result(result: TaskResult, _: Any, value: str | None) -> None:
    """A validator: the resolution is the one of the result's grade, or ``None`` without one."""
    grade = result.result.grade if result.result is not None else None
    expected = grade.resolution if grade is not None else None
    if value != expected:
        raise ValueError(f"'resolution' is {value!r}, but the result's grade says {expected!r}")


@attrs.frozen
class TaskResult:
    """One line of a results file: what became of one task.

    :ivar id: the task's ID.
    :ivar line: its line in the tasks file.
    :ivar seed: the seed it named.
    :ivar status: one of :data:`STATUSES`.
    :ivar seconds: its wall time.
    :ivar tokens: tokens of every planner call of the run that reported them.
    :ivar run_id: its run record (``agent replay``, ``agent diff``), when one was kept.
    :ivar result: the run's result, when it ended in one.
    :ivar error: the error it ended in, when it did.
    :ivar resolution: for a graded seed, the run's resolution (``FULL``, ``PARTIAL``,
        ``NO``; the grade itself is ``result.grade``); ``None`` otherwise.
    :ivar model: the model the planner was asked for (the task's ``model``, or ``agent
        batch --model``); ``None`` for the planner's default. The model that answered
        is ``result.model``.
    :ivar spend: what the task's planner calls spent (every attempt of every candidate,
        whatever the task ended in), with the cost when a price table was given.
    :ivar started_at: when the task started, ISO 8601 UTC; ``None`` in older results.
    :ivar env: where the batch ran (agent version, Python, host, command line without
        secrets); ``None`` in older results.
    :ivar instruction: the instruction the task ran with: its ``prompt``, or the seed's
        default prompt when it gave none (``prompt`` is then ``null``); ``None`` when the
        seed could not be loaded, and in older results.
    :ivar executor: where the task ran: ``local`` (this machine's threads) or ``ray``
        (a node of a Ray cluster, ``agent batch --executor ray``); ``None`` in older
        results.
    :ivar worker: the machine that ran it: the host's name for ``local``, the Ray node's
        ID for ``ray`` (its record, ``run_id``, is kept there); ``None`` in older results.
    """

    id: str
    line: int = attrs.field(validator=_count)
    seed: str
    status: str = attrs.field(validator=v.in_(STATUSES))
    seconds: float = attrs.field(validator=_count)
    resolution: str | None = attrs.field(default=None, validator=_resolution_of_the_result)
    prompt: str | None = None
    planner: str | None = None
    runner: str | None = None
    model: str | None = None
    tokens: int = attrs.field(default=0, validator=_count)
    run_id: str | None = None
    result: RunResult | None = None
    error: TaskError | None = None
    spend: Spend | None = None
    started_at: str | None = None
    env: BatchEnvironment | None = None
    instruction: str | None = None
    executor: str | None = None
    worker: str | None = None
    format: int = RESULT_FORMAT


@attrs.frozen
class ModelTally:
    """How the tasks that asked for one model did, so that one batch compares models.

    :ivar model: the model asked for; ``None`` for the planner's default.
    :ivar tasks: the tasks that asked for it.
    :ivar passed: those whose tests passed.
    :ivar tokens: tokens of their planner calls.
    :ivar cost: US dollars their planner calls cost; ``None`` when no task's cost is known.
    """

    model: str | None
    tasks: int
    passed: int
    tokens: int
    cost: float | None = None

    @property
    def pass_rate(self) -> float:
        return self.passed / self.tasks if self.tasks else 0.0

    @property
    def label(self) -> str:
        return self.model if self.model is not None else "(default model)"


def per_model(results: Iterable[TaskResult]) -> list[ModelTally]:
    """A tally per model asked for, in the order each first appears; empty when the
    tasks asked for fewer than two models (there is nothing to compare)."""
    tallies: dict[str | None, ModelTally] = {}
    for result in results:
        tally = tallies.get(result.model, ModelTally(result.model, 0, 0, 0))
        cost = result.spend.cost if result.spend is not None else None
        tallies[result.model] = ModelTally(
            result.model,
            tally.tasks + 1,
            tally.passed + (result.status == "passed"),
            tally.tokens + result.tokens,
            None if tally.cost is None and cost is None else (tally.cost or 0.0) + (cost or 0.0),
        )
    return list(tallies.values()) if len(tallies) > 1 else []


def total_spend(results: Iterable[TaskResult]) -> Spend:
    """What ``results`` spent together."""
    total = Spend()
    for result in results:
        if result.spend is not None:
            total = total.plus(result.spend)
    return total


def latest(results: Iterable[TaskResult]) -> list[TaskResult]:
    """Each task's last result, in the order the tasks first appear: a task that a budget
    stopped has a line of its own before the one of its resumed run."""
    found: dict[str, TaskResult] = {}
    for result in results:
        found[result.id] = result  # a key given again keeps its place and takes the value
    return list(found.values())


def blank_key(text: str, environ: Mapping[str, str] = os.environ) -> str:
    """``text`` with the API key blanked: verbatim, JSON-escaped and URL-quoted."""
    return provider.blank_key(text, environ.get(API_KEY_ENV, ""))


def without_key(result: TaskResult, environ: Mapping[str, str] = os.environ) -> TaskResult:
    """``result`` with the API key blanked in every text it holds."""
    line = to_json(result)
    blanked = blank_key(line, environ)
    return result if blanked == line else structure(json.loads(blanked), TaskResult)


def read_results(path: Path) -> tuple[list[TaskResult], list[InvalidLine], int]:
    """The results in ``path``, its damaged lines, and where its last whole line ends.

    A last line without its newline was torn by a kill while being written: it is
    left out (and its bytes are past the returned offset).

    :raises UsageError: the file cannot be read or is not a regular file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return [], [], 0
    except OSError as error:
        raise UsageError(f"cannot read {str(path)!r}: {error.strerror}") from None
    try:
        return parse_results(_read_regular(fd, path))
    finally:
        os.close(fd)


def _read_regular(fd: int, path: Path) -> bytes:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise UsageError(f"{str(path)!r} is not a regular file")
    chunks: list[bytes] = []
    try:
        while chunk := os.pread(fd, 1 << 20, sum(map(len, chunks))):
            chunks.append(chunk)
    except OSError as error:
        raise UsageError(f"cannot read {str(path)!r}: {error.strerror}") from None
    return b"".join(chunks)


def parse_results(data: bytes) -> tuple[list[TaskResult], list[InvalidLine], int]:
    """The results in a results file's bytes, its damaged lines, and where its last whole
    line ends (what follows is a torn last line)."""
    end = data.rfind(b"\n") + 1
    results: list[TaskResult] = []
    damaged: list[InvalidLine] = []
    for number, raw in enumerate(data[:end].splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            results.append(structure(json.loads(raw), TaskResult))
        except Exception as error:  # not JSON, or not a result of this format
            if isinstance(error, ValueError | RecursionError):
                reason = str(error)
            else:
                reason = "; ".join(describe_structure_error(error, root="result"))
            damaged.append(InvalidLine(number, reason))
    return results, damaged, end


class ResultsFile:
    """The results file, open for appending one line per finished task, and locked.

    Without ``resume`` any file that is not empty is refused (it is never
    overwritten). With it, the results in it are the done tasks, and a torn last
    line is cut off first, but only when every whole line is a result and the
    torn one begins as a result line does.

    :raises UsageError: the file cannot be opened, is not a regular file (a
        symbolic link, a FIFO, a device, a directory), is the tasks file, is
        being written by another batch, holds damaged lines, or is not empty and
        ``resume`` is not set.
    """

    def __init__(
        self,
        path: Path,
        *,
        resume: bool,
        tasks_file: Path | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self.path = path
        self._environ = environ
        name = str(path)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            # O_NOFOLLOW: never write through a link; O_NONBLOCK: a FIFO must not hang us.
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UsageError(
                    f"{name!r} is a symbolic link; name the results file itself"
                ) from None
            raise UsageError(f"cannot write {name!r}: {error.strerror}") from None
        try:
            self._stream: IO[str] = self._open(fd, path, resume=resume, tasks_file=tasks_file)
        except BaseException:
            os.close(fd)
            raise
        self._lock = threading.Lock()

    def _open(self, fd: int, path: Path, *, resume: bool, tasks_file: Path | None) -> IO[str]:
        name = str(path)
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise UsageError(f"{name!r} is not a regular file; name a results file")
        if tasks_file is not None:
            with contextlib.suppress(OSError):
                tasks = tasks_file.stat()
                if (tasks.st_dev, tasks.st_ino) == (status.st_dev, status.st_ino):
                    raise UsageError(f"{name!r} is the tasks file; name another results file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"another agent batch is writing {name!r}; wait for it to end, "
                "or name another results file"
            ) from None
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        data = _read_regular(fd, path)
        results, damaged, end = parse_results(data)
        if data and not resume:
            held = f"already holds {len(results)} results" if results else "is not empty"
            raise UsageError(
                f"{name!r} {held}; add --resume to run only the tasks not in it, "
                "or name another file"
            )
        if damaged:
            first = damaged[0]
            raise UsageError(
                f"{name!r} line {first.line} is not a result ({first.message}); "
                "it is not a results file of this agent, or it was edited"
            )
        torn = data[end:]
        if torn and not torn.startswith(_RESULT_LINE_START):
            raise UsageError(
                f"{name!r} ends in a line that is not a result and has no newline; "
                "it is not a results file of this agent, or it was edited"
            )
        self.done: dict[str, TaskResult] = {result.id: result for result in results}
        #: What every task already in the file spent, each line counted (a task run again
        #: after a budget stopped it spent twice): where a resumed batch's budget starts.
        self.spent = total_spend(results)
        try:
            if torn:
                os.ftruncate(fd, end)  # a torn last line, from a kill mid-write
            return open(fd, "a", encoding="utf-8", closefd=True)
        except OSError as error:
            raise UsageError(f"cannot write {name!r}: {error.strerror}") from None

    def append(self, result: TaskResult) -> TaskResult:
        """Write one result line, the API key blanked, and make it durable before returning.

        :returns: the result as written.
        """
        line = blank_key(_result_line(result), self._environ)
        written = structure(json.loads(line), TaskResult)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()
            os.fsync(self._stream.fileno())
            self.done[written.id] = written
        return written

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.close()


def _result_line(result: TaskResult) -> str:
    """``result`` as one JSON line that is UTF-8 whatever it holds: text with a lone
    surrogate (a plugin's message, say) is written with JSON escapes instead."""
    line = to_json(result)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(to_jsonable(result), ensure_ascii=True)
    return line

"""Batch runs: a file of tasks, run with bounded concurrency, one result line per task.

A tasks file holds one JSON object per line (blank lines and lines starting
with ``#`` are skipped), each naming a ``seed`` and optionally an ``id``, a
``prompt``, ``attempts``, ``candidates``, a ``planner`` and a ``runner``. A
task's ID is its ``id`` or ``line-N`` (its line number); results are keyed by
it, so ``--resume`` can skip what is done.

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
import inspect
import json
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import IO, Any, TypeVar

import attrs
from attrs import validators as v

from . import orchestrator, provider, run_records
from .contract import _no_duplicate_keys
from .errors import AgentError, PlanRejected, Rejection, UsageError
from .model import MAX_ATTEMPTS, MAX_CANDIDATES, LimitError, RunResult, TokenUsage
from .plugins import PluginHost, PluginInfo
from .provider import API_KEY_ENV
from .serialization import describe_structure_error, structure, to_json, to_jsonable

RESULT_FORMAT = 1
#: What became of a task, in the order the summary lists them.
STATUSES = (
    "passed",
    "failed",
    "rejected",
    "provider-error",
    "sandbox-error",
    "usage-error",
    "internal-error",
)
_STATUS_OF_KIND = {
    "policy": "rejected",
    "provider": "provider-error",
    "sandbox": "sandbox-error",
    "usage": "usage-error",
    "configuration": "usage-error",
}
#: Options a task line may give that only some versions of ``orchestrator.run`` take.
RUN_OPTIONS = ("attempts", "candidates")
#: The longest line of a tasks file that is read.
MAX_TASK_LINE_BYTES = 1024 * 1024
#: The largest tasks file that is read.
MAX_TASKS_FILE_BYTES = 64 * 1024 * 1024
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_BOM = b"\xef\xbb\xbf"
#: How every results line begins (``id`` is the first field of :class:`TaskResult`): a torn
#: last line is cut by a resume only when it begins so.
_RESULT_LINE_START = b'{"id": '
#: What :func:`run_tasks` runs, and what each task gives.
Job = TypeVar("Job")
Done = TypeVar("Done")


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


def _count(_: object, attribute: Any, value: Any) -> None:
    """A validator: a finite number, not negative (a damaged or hand-made line may hold NaN)."""
    if isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise LimitError(f"{attribute.name!r} must be a finite number of at least 0, not {value!r}")


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
    """

    seed: str
    id: str | None = attrs.field(default=None, validator=_task_id)
    prompt: str | None = None
    attempts: int | None = attrs.field(default=None, validator=_between(1, MAX_ATTEMPTS))
    candidates: int | None = attrs.field(default=None, validator=_between(1, MAX_CANDIDATES))
    planner: str = "openai"
    runner: str = "local"


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


@attrs.frozen
class TaskError:
    """The error a task ended in.

    :ivar rejections: for a policy error, every reason.
    """

    kind: str
    message: str
    planner_task_id: str | None = None
    sandbox_id: str | None = None
    rejections: tuple[Rejection, ...] = ()


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
    tokens: int = attrs.field(default=0, validator=_count)
    run_id: str | None = None
    result: RunResult | None = None
    error: TaskError | None = None
    format: int = RESULT_FORMAT


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


def blank_key(text: str, environ: Mapping[str, str] = os.environ) -> str:
    """``text`` with the API key blanked: verbatim, JSON-escaped and URL-quoted."""
    return provider.blank_key(text, environ.get(API_KEY_ENV, ""))


def without_key(result: TaskResult, environ: Mapping[str, str] = os.environ) -> TaskResult:
    """``result`` with the API key blanked in every text it holds."""
    line = to_json(result)
    blanked = blank_key(line, environ)
    return result if blanked == line else structure(json.loads(blanked), TaskResult)


def tokens_of(result: RunResult) -> int:
    """Tokens of every planner call the run made (every attempt of every candidate)."""
    attempts = [a for c in result.candidates for a in c.attempts] or list(result.attempts)
    usages: list[TokenUsage | None] = [a.usage for a in attempts] or [result.usage]
    return sum((u.prompt_tokens or 0) + (u.completion_tokens or 0) for u in usages if u)


def run_task(
    task_line: TaskLine,
    host: PluginHost,
    *,
    plugins: Sequence[PluginInfo],
    environ: Mapping[str, str] = os.environ,
) -> TaskResult:
    """Run one task as ``agent run`` would, recorded; any error becomes its result."""
    task = task_line.task
    started = time.monotonic()
    run_id = run_records.new_run_id()
    result: RunResult | None = None
    error: TaskError | None = None
    try:
        seed = host.seed(task.seed)
        options = {name: getattr(task, name) for name in RUN_OPTIONS}
        result = run_records.run_recorded(
            seed,
            runner=host.runner(task.runner),
            planner=host.planner(task.planner),
            policies=host.policies_for(seed),
            instruction=task.prompt,
            plugins=plugins,
            run_id=run_id,
            environ=environ,
            **{name: value for name, value in options.items() if value is not None},
        )
        status = "passed" if result.tests_passed else "failed"
    except AgentError as failure:
        status = _STATUS_OF_KIND.get(failure.kind, "internal-error")
        error = TaskError(
            kind=failure.kind,
            message=failure.message,
            planner_task_id=failure.planner_task_id,
            sandbox_id=failure.sandbox_id,
            rejections=failure.rejections if isinstance(failure, PlanRejected) else (),
        )
    except Exception as failure:  # one task's bug must not end the batch
        status = "internal-error"
        error = TaskError(kind="internal", message=f"{type(failure).__name__}: {failure}")
    kept = run_records.record_path(run_id, environ).is_file()
    return TaskResult(
        id=task_line.task_id,
        line=task_line.line,
        seed=task.seed,
        status=status,
        seconds=round(time.monotonic() - started, 3),
        resolution=result.grade.resolution if result is not None and result.grade else None,
        prompt=task.prompt,
        planner=task.planner,
        runner=task.runner,
        tokens=tokens_of(result) if result is not None else 0,
        run_id=run_id if kept else None,
        result=result,
        error=error,
    )


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


def run_tasks(
    tasks: Sequence[Job],
    run_one: Callable[[Job], Done],
    *,
    jobs: int,
    started: Callable[[Job], None],
    finished: Callable[[Done], None],
    interrupted: Callable[[int], None],
) -> None:
    """Run ``tasks``, at most ``jobs`` at once, calling ``finished`` as each ends.

    Tasks and results may be of any type: ``agent swebench evaluate`` runs its
    instances through it too.

    On Ctrl-C (``KeyboardInterrupt``) no further task starts; the running ones
    end their sandboxes and are reported (``interrupted`` is told how many are
    left), and then the ``KeyboardInterrupt`` is raised again.
    """
    stop = threading.Event()

    def work(task_line: Job) -> None:
        if stop.is_set():
            return
        started(task_line)
        finished(run_one(task_line))

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="agent-batch")
    pending: set[Future[None]] = set()
    try:
        pending = {pool.submit(work, task_line) for task_line in tasks}
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()
    except KeyboardInterrupt:
        stop.set()
        for future in pending:
            future.cancel()
        _wait_for_running(pending, interrupted)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _wait_for_running(pending: set[Future[None]], interrupted: Callable[[int], None]) -> None:
    """Wait for the tasks already running: their sandboxes end and their results are kept."""
    while True:
        running = {future for future in pending if not future.done()}
        if not running:
            return
        interrupted(len(running))
        try:
            wait(running)
        except KeyboardInterrupt:
            continue

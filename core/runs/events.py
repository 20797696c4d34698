"""A batch's events, one JSON line each, for dashboards and CI (``agent batch --events``).

Every line is a JSON object with ``event`` (one of :data:`EVENT_FIELDS`), ``time`` (ISO
8601 in UTC, milliseconds), ``seq`` (from 1, in the order written) and the fields
:data:`EVENT_FIELDS` lists for its kind, always all of them (``null`` when not known).
Events of one task come in the order they happened; those of tasks running at once
interleave. Lines never hold a prompt, a file, a diff or a test's output, and the API
key is blanked in every line.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from .. import provider
from ..errors import UsageError

#: Each kind of event and its fields besides ``event``, ``time`` and ``seq``: the schema.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "batch-started": ("tasks", "jobs", "shard", "resumed", "executor"),
    "task-started": ("task", "line", "seed", "model"),
    "plan-received": ("task", "candidate", "attempt", "planner_task_id", "model", "files"),
    "policy-verdict": ("task", "candidate", "attempt", "accepted", "rules"),
    "sandbox-started": ("task", "candidate", "attempt", "runner"),
    "sandbox-ended": (
        "task",
        "candidate",
        "attempt",
        "sandbox_id",
        "exit_code",
        "timed_out",
        "limit_hit",
        "seconds",
    ),
    "attempt-done": (
        "task",
        "candidate",
        "attempt",
        "verdict",
        "prompt_tokens",
        "completion_tokens",
    ),
    "task-done": ("task", "status", "seconds", "run_id", "tokens", "cost"),
    "budget-reached": ("task", "reason"),
    "interrupted": ("running",),
    "batch-done": ("counts", "tasks", "seconds", "interrupted"),
}

#: What a run emits: an event's kind and its fields (a batch adds ``task``).
Emit = Callable[[str, Mapping[str, Any]], None]


def no_events(kind: str, fields: Mapping[str, Any]) -> None:
    """An :data:`Emit` that drops every event."""


class EventLog:
    """The events file (or standard output), one line per event, flushed as written.

    A file is opened to append (a resumed batch continues it), created owner-only,
    and must be a regular file: never a symbolic link, a FIFO or a device.

    :raises UsageError: the file cannot be opened or is not a regular file.
    """

    def __init__(self, where: str, environ: Mapping[str, str] = os.environ) -> None:
        self._key = environ.get(provider.API_KEY_ENV, "")
        self._lock = threading.Lock()
        self._seq = 0
        self._own = where != "-"
        self._stream: IO[str] = _open(Path(where)) if self._own else sys.stdout

    def emit(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Write one event; the fields its kind does not list are not written."""
        names = EVENT_FIELDS[kind]
        with self._lock:
            self._seq += 1
            body: dict[str, Any] = {
                "event": kind,
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "seq": self._seq,
            }
            body.update({name: fields.get(name) for name in names})
            line = provider.blank_key(json.dumps(body, ensure_ascii=True), self._key)
            with contextlib.suppress(OSError):  # a full disk must not end the batch
                self._stream.write(line + "\n")
                self._stream.flush()

    def for_task(self, task: str) -> Emit:
        """An :data:`Emit` for one task's run: each event says which task."""

        def emit(kind: str, fields: Mapping[str, Any]) -> None:
            self.emit(kind, {**fields, "task": task})

        return emit

    def close(self) -> None:
        if self._own:
            with contextlib.suppress(OSError):
                self._stream.close()


def _open(path: Path) -> IO[str]:
    name = str(path)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UsageError(f"--events {name!r} is a symbolic link; name the file") from None
        raise UsageError(f"cannot write events file {name!r}: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"--events {name!r} is not a regular file; name a file, or - for stdout")
    os.set_blocking(fd, True)
    return open(fd, "a", encoding="utf-8", closefd=True)

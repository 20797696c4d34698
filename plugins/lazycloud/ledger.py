"""The ledger: every LazyCloud sandbox the agent starts, noted on this machine first.

A LazyCloud sandbox carries no label the agent could find it by again, so the
agent notes each one in a small file of its own under
``$XDG_STATE_HOME/sandboxed-coding-agent/lazycloud/sandboxes/`` before asking
for it: written whole and fsynced before the create is sent, rewritten with the
sandbox's ID as soon as the control plane gives it (before the sandbox is used),
removed once the sandbox is stopped. An entry also holds the agent's process ID
and that process's start time, so a later command can tell that the agent which
started a sandbox is gone (killed with SIGKILL, say) and stop the sandbox itself.

The folder and its files are the user's own: a folder or file that is a symlink,
belongs to someone else, is not private, is large or does not parse is never
trusted, and an ID read from the ledger reaches nothing but the SDK's stop call,
after its shape was checked (a UUID).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.records.planner_calls import state_directory

#: The most an entry may hold; a real one is about 400 bytes.
MAX_ENTRY_BYTES = 4096
#: How an entry's name (and the run's ID before the sandbox has one) looks.
RUN_ID = re.compile(r"lazycloud-[0-9a-f]{12}")
ENTRY_FORMAT = 1


def ledger_directory(environ: Mapping[str, str] = os.environ) -> Path:
    return state_directory(environ) / "lazycloud" / "sandboxes"


def sandbox_id_shape(text: str) -> str:
    """``text`` as a LazyCloud sandbox ID (a UUID, lower case), or :class:`ValueError`."""
    if not isinstance(text, str) or len(text) != 36:
        raise ValueError(f"{text!r:.80} is not a LazyCloud sandbox ID (a UUID)")
    parsed = str(uuid.UUID(text))
    if parsed != text.lower():
        raise ValueError(f"{text!r:.80} is not a LazyCloud sandbox ID (a UUID)")
    return parsed


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, from ``/proc``); ``None``
    when there is no such process or no ``/proc`` to ask."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as source:
            text = source.read(4096).decode("ascii", errors="replace")
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces; the fields follow the last ")".
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


@attrs.frozen
class Entry:
    """One sandbox the agent started (or was starting: ``sandbox_id`` is ``None`` until
    the control plane answered the create).

    :ivar run_id: names the entry's file; the run's ID until the sandbox has one.
    :ivar pid: the agent process that started it, and ``pid_start``, that process's
        start time, so a new process with a reused PID is not taken for it.
    :ivar created_at: when the create was sent (seconds since the epoch).
    :ivar stale_after: when the sandbox should be gone even if its agent still runs:
        the longest its run may take (image build, the test's timeout, the calls) plus a margin.
    :ivar endpoint: the control plane and the ``workspace`` it is in.
    :ivar release_id: the release it was created from.
    """

    run_id: str = attrs.field(validator=attrs.validators.matches_re(RUN_ID))
    pid: int = attrs.field(validator=attrs.validators.instance_of(int))
    pid_start: str | None
    created_at: float
    stale_after: float
    endpoint: str
    workspace: str
    release_id: str | None = None
    sandbox_id: str | None = None
    format: int = ENTRY_FORMAT

    def agent_alive(self) -> bool:
        """Whether the process that started the sandbox still runs."""
        if self.pid <= 0:
            return False
        started = process_start(self.pid)
        if started is not None:
            return self.pid_start is None or started == self.pid_start
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not os.path.isdir("/proc")  # /proc exists and has no such process

    def stale(self, now: float | None = None) -> bool:
        """Whether nobody should be using the sandbox any more: its agent is gone, or the
        longest its run could take is over."""
        return not self.agent_alive() or (now or time.time()) > self.stale_after

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Entry:
        """The entry ``text`` holds; :class:`ValueError` for anything else."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != ENTRY_FORMAT:
            raise ValueError("not a ledger entry")
        fields = {field.name for field in attrs.fields(cls)}
        if set(data) != fields:
            raise ValueError("not a ledger entry")
        for name in ("created_at", "stale_after"):
            if not isinstance(data[name], int | float) or isinstance(data[name], bool):
                raise ValueError(f"{name} is not a number")
        if isinstance(data["pid"], bool) or not isinstance(data["pid"], int):
            raise ValueError("pid is not a number")
        for name in ("endpoint", "workspace"):
            if not isinstance(data[name], str) or len(data[name]) > 1000:
                raise ValueError(f"{name} is not text")
        if data["pid_start"] is not None and not str(data["pid_start"]).isdigit():
            raise ValueError("pid_start is not a number")
        for name in ("sandbox_id", "release_id"):
            if data[name] is not None:
                data[name] = sandbox_id_shape(data[name])
        return cls(**data)


class Ledger:
    """The ledger's folder: note, read and forget entries.

    :raises SandboxError: (from :meth:`note`) the folder cannot be made private, or is
        not the user's own: the agent starts no sandbox it cannot note.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def of(cls, environ: Mapping[str, str] = os.environ) -> Ledger:
        return cls(ledger_directory(environ))

    def _checked_folder(self, create: bool) -> bool:
        """Whether the folder exists and is safe to use; made (0700) when ``create``."""
        if create:
            try:
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as error:
                raise SandboxError(
                    f"cannot make the sandbox ledger {self.folder} ({error.strerror}); "
                    "no sandbox was started"
                ) from None
        try:
            found = os.lstat(self.folder)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o077:
            raise SandboxError(
                f"the sandbox ledger {self.folder} is not a private folder of yours "
                "(a symlink, another user's, or open to others); remove it or make it "
                "mode 0700. No sandbox was started"
            )
        return True

    def path(self, run_id: str) -> Path:
        if not RUN_ID.fullmatch(run_id):
            raise ValueError(f"{run_id!r} is not a ledger entry's name")
        return self.folder / f"{run_id}.json"

    def note(self, entry: Entry) -> None:
        """Write ``entry`` whole and durably (fsynced, then its folder) before returning."""
        self._checked_folder(create=True)
        target = self.path(entry.run_id)
        temporary = self.folder / f".{entry.run_id}.{uuid.uuid4().hex[:8]}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            handle = os.open(temporary, flags, 0o600)
            try:
                os.write(handle, entry.to_json().encode())
                os.fsync(handle)
            finally:
                os.close(handle)
            os.replace(temporary, target)
            self._sync_folder()
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise SandboxError(
                f"cannot note the sandbox in the ledger {self.folder} ({error.strerror}); "
                "no sandbox was started"
            ) from None

    def _sync_folder(self) -> None:
        """Make the rename durable too; some file systems cannot sync a folder (the entry
        itself is synced already, so that is no reason to start no sandbox)."""
        handle = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with contextlib.suppress(OSError):
                os.fsync(handle)
        finally:
            os.close(handle)

    def forget(self, run_id: str) -> None:
        """Remove the entry (the sandbox is stopped, or was never created)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(run_id))

    def entries(self) -> list[Entry]:
        """Every valid entry, oldest first; files that are not valid entries are skipped."""
        return [entry for entry in self._read_all() if entry is not None]

    def _read_all(self) -> Iterator[Entry | None]:
        try:
            if not self._checked_folder(create=False):
                return
        except SandboxError:
            return
        found = []
        for path in self.folder.iterdir():
            if path.suffix != ".json" or not RUN_ID.fullmatch(path.stem):
                continue
            entry = _read_entry(path)
            if entry is not None and entry.run_id == path.stem:
                found.append(entry)
        yield from sorted(found, key=lambda entry: entry.created_at)


def _read_entry(path: Path) -> Entry | None:
    """The entry in ``path``, or ``None`` if it is not a small regular file of the user's
    holding one (a symlink, another user's file or a huge one is not even opened)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        found = os.fstat(handle)
        if (
            not stat.S_ISREG(found.st_mode)
            or found.st_uid != os.geteuid()
            or found.st_size > MAX_ENTRY_BYTES
        ):
            return None
        data = os.read(handle, MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(handle)
    try:
        return Entry.from_json(data[:MAX_ENTRY_BYTES].decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return None


def this_process() -> dict[str, Any]:
    """The ``pid`` and ``pid_start`` of an entry this process writes."""
    pid = os.getpid()
    return {"pid": pid, "pid_start": process_start(pid)}

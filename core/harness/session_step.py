"""One command of a session, run by the harness as the sandbox's PID 1.

The command runs as ``bash -c COMMAND`` (the runner's job says so) in the project
folder. When it ends, or when its time is up, every other process of the sandbox
(for a harness that is not the sandbox's PID 1, every process the command started,
whatever its group or session) is killed and reaped, so nothing the command left
running can change a file while they are read; then the project folder's files are
handed back in the report, one signed line each, for the agent to carry into the next
command:

* ``{"kind": "step", "exit_code": N or null, "timed_out": bool}``;
* ``{"kind": "file", "path": P, "data": BASE64}`` for every regular file on the
  project folder's own file system that is not one of the seed's read-only files
  (a git seed's tree, bound read-only, is on another one and is never read);
* ``{"kind": "files", "count": N, "skipped": [...]}`` at the end, or
  ``{"kind": "too-large", "bytes": N, "files": N, "path_bytes": N}`` when the files
  passed one of the step's bounds: bytes, files, bytes of their paths (none are handed
  back then). Links, special files, files and folders that cannot be read, and paths
  longer than the step's ``longest_path``, are named in ``skipped``.

The agent treats every line as the work of the command, which it is: hostile data,
checked there. This module uses the standard library only, and runs on Python 3.8.
"""

from __future__ import annotations

import base64
import contextlib
import os
import select
import signal
import stat
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: How often the harness looks at the command when it cannot wait on a pidfd (Python 3.8).
POLL_SECONDS = 0.01
#: The most files handed back when the settings do not say: past that, none (as past the
#: step's bytes).
MAX_FILES = 1000
#: The most bytes the paths of the files handed back may come to when the settings do not say.
MAX_PATH_BYTES = 128 * 1024
#: The most bytes one path handed back may have when the settings do not say.
LONGEST_PATH = 2048
#: What the command starts with as the default action of these signals, which Python (and so
#: the harness) ignores or handles: a ``yes | head`` ends with no error, a ``kill -INT 1``
#: does not end the harness.
RESET_SIGNALS = ("SIGINT", "SIGPIPE", "SIGXFSZ")


def run_step(
    argv: list[str], collect: dict[str, Any], fixed: set[str], write: Callable[..., None]
) -> int:
    """Run ``argv``, end every process, report the files; the command's exit status."""
    timeout = float(collect["timeout"])
    # As PID 1, the harness gets only the signals it handles; a command's SIGINT is ignored.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.getpid() != 1:
        _adopt_orphans()
    pid = os.fork()
    if pid == 0:
        try:
            for name in RESET_SIGNALS:
                signal.signal(getattr(signal, name), signal.SIG_DFL)
            os.setsid()  # a group of its own, for a harness that is not PID 1 to end
            os.execvp(argv[0], argv)  # noqa: S606 - the session's command, in the sandbox
        except OSError as error:
            os.write(2, f"harness: cannot run {argv[0]}: {error.strerror}\n".encode())
        except BaseException as error:
            # A command no system call takes (a lone surrogate is no byte): said, and ended
            # without returning into the harness's code, whose report it would share.
            os.write(2, f"harness: cannot run the command: {type(error).__name__}\n".encode())
        os._exit(127)
    status = _wait(pid, timeout)
    _end_every_other_process(pid)
    timed_out = status is None
    code = None if status is None else _exit_code(status)
    write("step", exit_code=code, timed_out=timed_out)
    _hand_back(fixed, collect, write)
    return 0 if code is None else code


def _exit_code(status: int) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return 1


def _wait(pid: int, timeout: float) -> int | None:
    """The command's wait status, reaping whatever else ends meanwhile; ``None`` once its
    time is up."""
    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    try:
        while True:
            ended, status = os.waitpid(-1, os.WNOHANG)
            while ended not in (0, pid):
                ended, status = os.waitpid(-1, os.WNOHANG)
            if ended == pid:
                return status
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if pidfd is not None:
                # Wakes when the command ends; orphans reparented here are reaped above.
                select.select([pidfd], [], [], min(left, 0.25))
            else:
                time.sleep(min(left, POLL_SECONDS))
    except ChildProcessError:
        return 0
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _end_every_other_process(command: int) -> None:
    """As PID 1, kill every other process of the sandbox, and reap them all.

    A harness that is not PID 1 (a runner whose container has an init of its own) kills
    the command's process group, then every process descended from it, whatever its group
    or session (``setsid``), until none is left: ``kill(-1)`` there would reach every
    process its user may signal, the runner's own among them. As the subreaper
    (:func:`_adopt_orphans`), it is the parent of whatever a command's process left when it
    ended, so nothing it started can leave its tree.
    """
    with contextlib.suppress(OSError):
        if os.getpid() == 1:
            os.kill(-1, signal.SIGKILL)
        else:
            os.killpg(command, signal.SIGKILL)
    if os.getpid() == 1:
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
    while True:
        for pid in _descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        except ChildProcessError:
            return
        time.sleep(POLL_SECONDS)


PR_SET_CHILD_SUBREAPER = 36


def _adopt_orphans() -> None:
    """For a harness that is not PID 1: be the parent of every process the command leaves
    when its own parent ends (a child subreaper), as PID 1 is; without ``prctl``, only
    the command's process group is ended."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _descendants(root: int) -> list[int]:
    """The processes descended from ``root``, as ``/proc`` lists them now."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open("/proc/" + name + "/stat", "rb") as stream:
                    fields = stream.read().rpartition(b")")[2].split()
                children.setdefault(int(fields[1]), []).append(int(name))
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), ()):
            found.append(child)
            pending.append(child)
    return found


def _hand_back(fixed: set[str], collect: dict[str, Any], write: Callable[..., None]) -> None:
    max_bytes = int(collect["max_bytes"])
    max_files = int(collect.get("max_files", MAX_FILES))
    max_path_bytes = int(collect.get("max_path_bytes", MAX_PATH_BYTES))
    longest = int(collect.get("longest_path", LONGEST_PATH))
    found, skipped = _project_files(fixed, max_files, longest)
    total = sum(size for _, size in found)
    names = sum(len(os.fsencode(relative)) for relative, _ in found)
    if total > max_bytes or len(found) > max_files or names > max_path_bytes:
        write("too-large", bytes=total, files=len(found), path_bytes=names)
        return
    kept = 0
    for relative, _ in found:
        try:
            with open(relative, "rb") as stream:
                data = stream.read(max_bytes + 1)
        except OSError:  # made unreadable (mode 000): named, not kept
            skipped.append(relative)
            continue
        kept += 1
        write("file", path=relative, data=base64.b64encode(data).decode("ascii"))
    write("files", count=kept, skipped=skipped[:100])


def _project_files(
    fixed: set[str], most: int, longest: int
) -> tuple[list[tuple[str, int]], list[str]]:
    """Each regular file of the project folder's own file system (its path and size) that
    is not one of ``fixed``, and what is not kept: other kinds of file, folders that
    cannot be read, and paths of more than ``longest`` bytes. Once past ``most`` files, it
    stops (at the end of a folder).

    Folder by folder from a list of its own, not ``os.walk``: a command may leave folders
    nested deeper than Python's recursion (``os.walk`` recurses before Python 3.12).
    """
    device = os.stat(".").st_dev
    found: list[tuple[str, int]] = []
    skipped: list[str] = []
    pending = [""]
    while pending and len(found) <= most:
        folder = pending.pop()
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            skipped.append(folder or ".")
            continue
        inner = []
        for name in names:
            relative = folder + "/" + name if folder else name
            if relative in fixed:
                continue
            if len(os.fsencode(relative)) > longest:
                skipped.append(relative[:200])
                continue
            try:
                status = os.lstat(relative)
            except OSError:  # a path longer than the system takes
                skipped.append(relative)
                continue
            if status.st_dev != device:
                continue
            if stat.S_ISDIR(status.st_mode):
                inner.append(relative)
            elif stat.S_ISREG(status.st_mode):
                found.append((relative, status.st_size))
            else:
                skipped.append(relative)
        pending.extend(reversed(inner))
    return found, skipped

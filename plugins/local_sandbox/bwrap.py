"""The ``bwrap`` command line of a sandbox: namespaces, mounts, environment.

Inside, the test sees a read-only view of the system directories and of the
Python installation (and of the seed's prepared runtime, if any); size-limited
private tmpfs mounts at ``/workspace`` (the seed files with the replacement
applied, copied in from memory), ``/tmp`` and ``/dev/shm``; and nothing else of
the host: not the caller's environment (its own is ``PATH``, ``HOME``, ``LANG``,
``PYTHONDONTWRITEBYTECODE`` and ``MALLOC_ARENA_MAX``), home, ``/etc`` or project checkout.
Everything else, the root included, is read-only, so the test can only fill
the bounded tmpfs mounts. The sandbox lives in new user, PID, network, IPC and
UTS namespaces and may not create further user namespaces (which would let it
mount an unbounded tmpfs of its own).

What it still sees of the machine, and why that is acceptable: ``/proc`` is
the sandbox's own (its processes only), but shows machine-wide facts such as
``cpuinfo``, ``meminfo``, the kernel's version and command line and the
``/proc/sys`` settings (mounted read-only, like ``/proc``'s other kernel
interfaces), and the host paths of what is bound in (in
``mountinfo``, and in the command line of PID 1, which is ``bwrap``). None of
that is the caller's secret, and with no network the test's output is the only
way out. ``/sys`` is not mounted.
"""

from __future__ import annotations

import os
import site
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.model import SandboxJob

WORKSPACE = "/workspace"
#: Where the harness's files are bound, read-only, inside the sandbox.
HARNESS_DIR = "/.sandboxed-coding-agent/harness"
#: For a seed without a runtime: ``python`` and ``python3`` here are the agent's interpreter,
#: whatever else its own folder holds (a distribution's ``/usr/bin`` has no ``python``), so
#: that a test's subprocess or a session's command finds it by either name. A runtime's
#: ``bin`` folder has both names already (a link to a virtual environment's interpreter
#: would leave the environment, so none is made for it).
PYTHON_LINKS = "/.sandboxed-coding-agent/bin"
SANDBOX_TMP = "/tmp"  # noqa: S108 - a private tmpfs inside the sandbox, not the host's
#: Every folder the test may write inside: everything else is read-only.
WRITABLE_FOLDERS = (WORKSPACE, SANDBOX_TMP, "/dev/shm")  # noqa: S108 - the sandbox's own
MIB = 1024 * 1024
#: glibc's ``MALLOC_ARENA_MAX`` in the sandbox: one malloc arena for all of a process's threads,
#: so that what a thread reserves does not grow with the host's CPU cores (see :mod:`.limits`).
MALLOC_ARENAS = 1
#: What a process with privilege could change the whole machine through: sysctls, the
#: magic SysRq trigger, interrupt affinity, bus devices.
PROC_KERNEL_INTERFACES = ("sys", "sysrq-trigger", "irq", "bus")
#: Lists of the keys the sandbox's host user may view (names of the caller's keys, for one):
#: covered with the host's ``/dev/null``, which the sandbox may not open (its mounts allow
#: no devices). The keys themselves are out of reach through :mod:`.seccomp`.
PROC_KEY_LISTS = ("keys", "key-users")
#: Where a distribution keeps its Python packages (Debian's ``dist-packages`` among them).
SYSTEM_SITE_FOLDERS = (
    "usr/lib/python3*/dist-packages",
    "usr/lib/python3*/site-packages",
    "usr/local/lib/python3*/dist-packages",
    "usr/local/lib/python3*/site-packages",
)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def workspace_path(relative: str) -> str:
    """Where a seed file lives in the sandbox; refuses any path that would leave the workspace."""
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or any(p in ("..", ".", "") for p in parts):
        raise SandboxError(f"refusing to write {relative!r} outside the workspace")
    return str(PurePosixPath(WORKSPACE, *parts))


def _system_mounts() -> list[str]:
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        path = Path(directory)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), directory]
        elif path.is_dir():
            args += ["--ro-bind", directory, directory]
    return args


def installation_folders(interpreter: str, prefixes: Sequence[str]) -> list[str]:
    """What an interpreter needs of its installation: its own folder and each prefix's ``lib``.

    Not the whole prefix: a Python built with ``--prefix=$HOME/.local`` (or
    ``$HOME``) shares it with the caller's own files (``~/.local/share``,
    ``~/.local/state``, ``~/.ssh``).
    """
    folders = {os.path.dirname(interpreter)}
    for prefix in prefixes:
        for lib in ("lib", "lib64"):
            folder = os.path.join(os.path.realpath(prefix), lib)
            if os.path.isdir(folder):
                folders.add(os.path.realpath(folder))
    return sorted(folders)


def host_python() -> tuple[str, list[str]]:
    """The agent's own interpreter, and the folders it needs of its installation."""
    interpreter = os.path.realpath(sys.executable)
    return interpreter, installation_folders(interpreter, [sys.base_prefix, sys.base_exec_prefix])


def host_site_folders() -> list[str]:
    """The folders of the agent's interpreter where packages are installed globally.

    A seed without a runtime is promised the standard library only. Hiding
    these folders (rather than starting Python without ``site``) keeps every
    way of starting Python inside alike, ``python -m unittest`` from the project
    folder and a subprocess of the test included, and none of them sees a host
    package or runs a host ``.pth`` file: the result does not depend on what
    happens to be installed on the machine. ``site`` answers for any layout
    (pyenv's ``site-packages``, a distribution's ``dist-packages``, a
    ``--prefix`` install); the user's own site folder is never bound. The
    system's own Python package folders under ``/usr``, which every sandbox
    sees, are hidden too, so that a test adding them to ``sys.path`` finds
    nothing there either.
    """
    found = site.getsitepackages([sys.base_prefix, sys.base_exec_prefix])
    found += [str(folder) for pattern in SYSTEM_SITE_FOLDERS for folder in Path("/").glob(pattern)]
    return sorted({os.path.realpath(f) for f in found if os.path.isdir(f)})


def runtime_site_folders(prefixes: Sequence[str], environment: str) -> list[str]:
    """The global package folders a seed runtime's sandbox sees empty.

    A runtime's environment has no system site packages, so nothing there is on
    its ``sys.path``; hiding them keeps a test that adds one from finding host
    packages, as for a seed without a runtime. Found by pattern, since the
    runtime's Python may be another version than the agent's: each base
    prefix's ``lib*/python3*/{site,dist}-packages``, and the system's own. A
    folder holding the runtime's environment is never hidden.

    :param prefixes: the base prefixes of the runtime's interpreter.
    :param environment: the runtime's virtual environment.
    """
    found = [
        str(folder)
        for prefix in prefixes
        for pattern in ("lib*/python3*/site-packages", "lib*/python3*/dist-packages")
        for folder in Path(os.path.realpath(prefix)).glob(pattern)
    ]
    found += [str(folder) for pattern in SYSTEM_SITE_FOLDERS for folder in Path("/").glob(pattern)]
    inside = os.path.realpath(environment)
    return sorted(
        {
            real
            for real in map(os.path.realpath, found)
            if os.path.isdir(real) and not (inside + "/").startswith(real + "/")
        }
    )


def hidden(folders: Sequence[str]) -> list[str]:
    """Cover each folder with an empty, read-only tmpfs inside the sandbox."""
    args: list[str] = []
    for folder in folders:
        args += ["--perms", "0555", "--size", "4096", "--tmpfs", folder, "--remount-ro", folder]
    return args


def read_only_binds(folders: Sequence[str]) -> list[str]:
    args: list[str] = []
    for folder in sorted(set(folders)):
        # Folders under the system directories are visible already.
        inside = folder in SYSTEM_DIRS or folder.startswith(tuple(d + "/" for d in SYSTEM_DIRS))
        if not inside:
            args += ["--ro-bind", folder, folder]
    return args


def _kernel_interfaces_read_only() -> list[str]:
    """Mount ``/proc``'s writable kernel interfaces read-only, for any caller.

    The sandbox is never host root, so the kernel refuses its writes there
    anyway; this is the second wall, should a caller's privilege ever reach it.
    """
    args: list[str] = []
    for name in PROC_KERNEL_INTERFACES:
        args += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    for name in PROC_KEY_LISTS:
        args += ["--ro-bind-try", "/dev/null", f"/proc/{name}"]
    return args


def test_argv(job: SandboxJob, python: str) -> list[str]:
    """The test command as the sandbox runs it: a leading ``python`` is ``python``."""
    test_command = list(job.test_command)
    if any("\0" in argument for argument in test_command):
        raise SandboxError("the test command contains a NUL character, which no command line holds")
    if test_command[0] in ("python", "python3"):
        test_command[0] = python
    return test_command


def harness_argv(python: str, setup_fd: int, *, site: bool, main: str = "main.py") -> list[str]:
    """How the sandbox's PID 1, the harness, is started (see ``core/harness``) for a job
    whose report it signs (otherwise PID 1 is the shell of :mod:`.init`).

    :param site: whether it needs ``site`` (a runtime's packages: pytest); without a
        runtime the site folders are empty anyway, and skipping ``site`` starts it faster.
    :param main: the file it starts from: ``main.py``, or ``main.pyc`` where the harness is
        bound compiled (:func:`sandboxed_coding_agent.core.harness.compiled_files`).
    """
    site_flags = [] if site else ["-S"]
    return [python, "-I", "-B", *site_flags, f"{HARNESS_DIR}/{main}", str(setup_fd)]


def build_command(
    bwrap: Path,
    job: SandboxJob,
    *,
    status_fd: int,
    files: Sequence[tuple[int, str]],
    python: str,
    bin_dirs: Sequence[str],
    read_only: Sequence[str],
    hide: Sequence[str] = (),
    seccomp_fd: int | None = None,
    read_only_files: Sequence[tuple[int, str]] = (),
    command: Sequence[str] | None = None,
    tree: Sequence[str] = (),
    programs: Sequence[tuple[int, str]] = (),
) -> list[str]:
    """The full ``bwrap`` argv for ``job``.

    :param files: (descriptor, path in the sandbox) of each seed file to copy in
        writable (the editable files).
    :param python: the interpreter a leading ``python`` in the test command means.
    :param bin_dirs: folders put first on the sandbox's ``PATH``.
    :param read_only: host folders bound read-only at the same path (interpreter, runtime).
    :param hide: folders inside those that the sandbox sees empty (global site-packages).
    :param seccomp_fd: a descriptor holding the system call filter (:mod:`.seccomp`).
    :param read_only_files: (descriptor, path in the sandbox) of each file bound
        read-only: the seed's other files (its tests above all) and the harness. Such a
        file cannot be written, replaced, renamed or deleted inside.
    :param command: what the sandbox's PID 1 runs (the harness, or the shell of
        :mod:`.init`); the test command if not given.
    :param tree: the arguments binding a git seed's tree into the workspace
        (:func:`.tree.tree_mounts`), placed before the seed's files.
    :param programs: (descriptor, path in the sandbox) of each program bound read-only and
        execute-only (mode ``0111``): the shell of :mod:`.init`.
    """
    test_command = test_argv(job, python) if command is None else list(command)
    size = str(job.limits.disk_mb * MIB)
    copies: list[str] = []
    for fd, path in files:
        copies += ["--perms", "0644", "--file", str(fd), path]
    for fd, path in read_only_files:
        copies += ["--perms", "0444", "--ro-bind-data", str(fd), path]
    for fd, path in programs:
        copies += ["--perms", "0111", "--ro-bind-data", str(fd), path]
    links: list[str] = []
    if job.runtime is None:
        links = [PYTHON_LINKS]
        for name in ("python", "python3"):
            copies += ["--symlink", python, f"{PYTHON_LINKS}/{name}"]
    path = ":".join([*links, *bin_dirs, "/usr/local/bin", "/usr/bin", "/bin"])
    return [
        str(bwrap),
        "--json-status-fd", str(status_fd),
        "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try",
        # The first process is the harness (or the shell of .init), not bwrap's own init:
        # its exit status, which bwrap's monitor outside reads with waitpid, is held by no
        # process inside, and it is not dumpable.
        "--as-pid-1",
        "--disable-userns",
        "--uid", "1000", "--gid", "1000",
        "--cap-drop", "ALL",
        "--hostname", "sandbox",
        "--die-with-parent",
        "--new-session",
        *([] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]),
        # The private /tmp comes first: a later bind under /tmp would be hidden by it.
        "--size", size, "--tmpfs", SANDBOX_TMP,
        "--proc", "/proc",
        *_kernel_interfaces_read_only(),
        "--dev", "/dev",
        "--size", size, "--tmpfs", "/dev/shm",  # noqa: S108 - the sandbox's own
        *_system_mounts(),
        *read_only_binds(read_only),
        *hidden(hide),
        "--size", size, "--tmpfs", WORKSPACE,
        *tree,
        *copies,
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--chdir", WORKSPACE,
        "--clearenv",
        "--setenv", "PATH", path,
        "--setenv", "HOME", SANDBOX_TMP,
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "MALLOC_ARENA_MAX", str(MALLOC_ARENAS),
        "--",
        *test_command,
    ]  # fmt: skip

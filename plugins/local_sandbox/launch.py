"""The first process of a sandbox: join its control groups, lower its rlimits, leave the
caller's session keyring, drop to the sandbox user if the caller is root, become ``bwrap``.

Run as ``python -I -S launch.py CONFIG -- BWRAP ARGV...`` with an empty
environment. Doing this in a process of its own, rather than in a
``preexec_fn`` of the agent, keeps it safe when the agent has threads. It uses
the standard library only and imports nothing of the agent.

CONFIG is JSON: ``{"cgroups": [procs file, ...], "rlimits": {"RLIMIT_AS": [soft, hard], ...},
"user": [uid, gid] or null, "expose": [folder, ...]}``.
Every process of the sandbox descends from this one, so all of them are in the
groups, inherit the limits and are the sandbox user to the kernel: the user is
changed here, before bwrap creates any namespace, so no process of the sandbox
is ever host root. The folders that user must reach (bwrap's, the
interpreter's) are made reachable first, in a mount namespace of this process's
own: see :func:`expose`. A session keyring is inherited across
namespaces, and a process that possesses a keyring may read the keys in it
(Kerberos tickets, tokens a login session stored), so this process joins a new,
empty one first. Any failure stops here (exit 125) with one line
on stderr, before ``bwrap`` or the test could start.
"""

import ctypes
import errno
import json
import os
import resource
import stat
import sys

EXIT_LAUNCH_FAILED = 125
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


def leave_session_keyring() -> None:
    """Join a new, empty session keyring, so the sandbox possesses none of the caller's keys."""
    machine = os.uname().machine
    number = KEYCTL_SYSCALL.get((machine, ctypes.sizeof(ctypes.c_void_p) * 8))
    if number is None:
        raise OSError(f"cannot leave the session keyring: unknown system call number on {machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        code = ctypes.get_errno()
        if code != errno.ENOSYS:  # a kernel without keyrings has none to leak
            raise OSError(code, f"cannot leave the session keyring: {os.strerror(code)}")


def become(uid: int, gid: int) -> None:
    """Become ``uid``:``gid`` for good (real, effective and saved IDs), with no other group."""
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as error:
        raise OSError(
            f"cannot become the sandbox user (uid {uid}, gid {gid}): {error.strerror}; "
            "set SANDBOXED_CODING_AGENT_SANDBOX_USER to a user this system (or container) maps"
        ) from None
    if os.getresuid() != (uid, uid, uid) or os.getgroups() not in ([], [gid]):
        raise OSError(f"the sandbox user (uid {uid}) was not taken on")


CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18


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


def expose(folders: list[str], uid: int, gid: int) -> None:
    """Make ``folders`` reachable by the user, in a mount namespace of this process's own.

    Each closed folder above them (``/root``, say) is covered with an empty tmpfs,
    and only ``folders`` are bound back into it at their own paths, so nothing
    else of the closed folder is revealed. The host's mounts stay as they were.
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
    for cover in sorted(covers):
        _mount(libc, "tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    os.umask(0o022)
    for folder, fd in opened.items():
        os.makedirs(folder, mode=0o755, exist_ok=True)
        _mount(libc, f"/proc/self/fd/{fd}", folder, None, MS_BIND | MS_REC)
        os.close(fd)


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    command = argv[3:]
    pid = str(os.getpid())
    for procs in config["cgroups"]:
        with open(procs, "w") as handle:
            handle.write(pid)
    for name, (soft, hard) in config["rlimits"].items():
        kind = getattr(resource, name)
        _, current_hard = resource.getrlimit(kind)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(kind, (soft, hard))
    leave_session_keyring()
    if config["user"] is not None:
        uid, gid = config["user"]
        expose(config["expose"], uid, gid)
        become(uid, gid)
    os.execve(command[0], command, {})  # noqa: S606 - bwrap, with an empty environment


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception as error:
        sys.stderr.write(f"could not start the sandbox: {type(error).__name__}: {error}\n")
        sys.exit(EXIT_LAUNCH_FAILED)

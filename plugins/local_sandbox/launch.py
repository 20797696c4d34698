"""The first process of a sandbox: join its control groups, lower its rlimits, leave the
caller's session keyring, become ``bwrap``.

Run as ``python -I -S launch.py CONFIG -- BWRAP ARGV...`` with an empty
environment. Doing this in a process of its own, rather than in a
``preexec_fn`` of the agent, keeps it safe when the agent has threads. It uses
the standard library only and imports nothing of the agent.

CONFIG is JSON: ``{"cgroups": [procs file, ...], "rlimits": {"RLIMIT_AS": [soft, hard], ...}}``.
Every process of the sandbox descends from this one, so all of them are in the
groups and inherit the limits. A session keyring is inherited across
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
    os.execve(command[0], command, {})  # noqa: S606 - bwrap, with an empty environment


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception as error:
        sys.stderr.write(f"could not start the sandbox: {type(error).__name__}: {error}\n")
        sys.exit(EXIT_LAUNCH_FAILED)

"""A system call filter: calls no test needs, which would let a patch reach past its limits.

Three groups of system calls fail inside the sandbox, on x86-64 and arm64:

* **Keyrings**, always. Keys are checked against the host uid, not the sandbox's
  namespaces: a sandbox running as the caller could list, read, add and unlink
  keys in the caller's own user keyring (and read any key whose ID it guesses),
  and sandboxes running as the same unprivileged user could pass keys to each
  other or to a later run. ``add_key``, ``request_key`` and ``keyctl`` fail with
  ``ENOSYS``, as on a kernel built without keyrings.
* **Memory held outside any mapping**, where no memory control group bounds the
  sandbox (:attr:`.SandboxGroups.bounds_memory`; :mod:`.limits` says how memory
  is bounded either way). Memory is then bounded by ``RLIMIT_AS`` in every
  process (``memory_mb``, and room for every thread's stack), which counts what
  a process maps and nothing else: pages written to a ``memfd`` (or a
  ``memfd_secret`` mapped a piece at a time) and the segments, semaphore arrays
  and message queues of SysV IPC stay allocated after they are unmapped, or were
  never mapped, so one process could hold gigabytes under the default limit of
  about 1 GiB. ``memfd_create``, ``memfd_secret``, ``shmget``, ``semget`` and
  ``msgget`` then fail with ``ENOSYS``, as on a kernel built without them, which
  is what a library checks before it falls back (Python's ``multiprocessing``
  uses files in ``/dev/shm``, a bounded tmpfs, and never these). What would act
  on an existing object (``shmat``, ``shmctl``, ``semop``, ``msgsnd``, ...)
  stays allowed: the sandbox has an IPC namespace of its own, so no object
  exists that it did not make, and it can make none. Neither x86-64 nor arm64
  has the ``ipc`` multiplexer of 32-bit machines. Where a memory group bounds
  the sandbox these calls are allowed, and no process has an ``RLIMIT_AS``: the
  group counts every page the sandbox holds, those pages (and the kernel memory
  of SysV objects) included, against its limit.
* **Another process's memory and descriptors**, always: ``ptrace``,
  ``process_vm_readv``, ``process_vm_writev`` and ``pidfd_getfd`` fail with
  ``EPERM``. Those calls exist and the kernel refuses them whenever the caller
  may not act on the target (another user's process, Yama's ``ptrace_scope``),
  with ``EPERM``; a tool such as a debugger then reports "not permitted"
  instead of a missing feature, and does not go looking for another way in.
  Nothing a test runs (Python's ``subprocess`` and ``asyncio``: ``pidfd_open``,
  ``kill``, ``wait4``, ``waitid``) needs them.

System calls made through another ABI than the interpreter's (32-bit ``int
0x80`` on x86-64, x32, AArch32), which would have other numbers, all fail with
``ENOSYS``. On other machines there is no filter, and ``agent doctor`` says
what that leaves open.

The filter is classic BPF, assembled here, and handed to ``bwrap --seccomp``,
which installs it last, just before the test command starts.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

#: The audit architecture of the interpreter's ABI, by machine.
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
#: System call numbers by machine (arm64 has the generic numbers of asm-generic/unistd.h).
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "memfd_create": 319,
        "memfd_secret": 447,
        "shmget": 29,
        "semget": 64,
        "msgget": 68,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "pidfd_getfd": 438,
    },
    "aarch64": {
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "memfd_create": 279,
        "memfd_secret": 447,
        "shmget": 194,
        "semget": 190,
        "msgget": 186,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "pidfd_getfd": 438,
    },
}
KEYRING_CALLS = ("add_key", "request_key", "keyctl")
#: Calls that hold memory no mapping shows, refused where no memory group counts it.
UNMAPPED_MEMORY_CALLS = ("memfd_create", "memfd_secret", "shmget", "semget", "msgget")
OTHER_PROCESS_CALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")

#: x32 system calls on x86-64 carry this bit in their number.
_X32_BIT = 0x40000000

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO, with the errno in the low 16 bits
_NR, _ARCH = 0, 4  # offsets of the fields of struct seccomp_data


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def refused_calls(*, memory_group: bool) -> dict[str, int]:
    """The system calls the filter refuses, by name, with the errno each fails with."""
    refused = dict.fromkeys(KEYRING_CALLS, errno.ENOSYS)
    if not memory_group:
        refused.update(dict.fromkeys(UNMAPPED_MEMORY_CALLS, errno.ENOSYS))
    refused.update(dict.fromkeys(OTHER_PROCESS_CALLS, errno.EPERM))
    return refused


def sandbox_filter(*, memory_group: bool) -> bytes | None:
    """The filter for a sandbox on this machine, or ``None`` where its numbers are not known.

    :param memory_group: whether a memory control group bounds all the sandbox holds,
        memory outside any mapping included (the sandbox then has no ``RLIMIT_AS``);
        without one, that memory, which ``RLIMIT_AS`` does not see, is refused.
    """
    machine = os.uname().machine
    if machine not in _AUDIT_ARCH or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    numbers = SYSCALLS[machine]
    refused = refused_calls(memory_group=memory_group)
    # One return per errno, after the checks: ... allow, refuse with each errno.
    answers = sorted(set(refused.values()))
    checks = [(numbers[name], answers.index(code)) for name, code in refused.items()]
    other_abi = 1 + answers.index(errno.ENOSYS)  # from the end of the checks
    # Jumps count instructions from the next one.
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ, _AUDIT_ARCH[machine], jt=0, jf=2 + len(checks) + other_abi),
        _op(_LD_W_ABS, _NR),
        _op(_JGE, _X32_BIT, jt=len(checks) + other_abi, jf=0),
    ]
    for index, (number, answer) in enumerate(checks):
        program.append(_op(_JEQ, number, jt=len(checks) - index + answer, jf=0))
    program.append(_op(_RET, _ALLOW))
    program += [_op(_RET, _ERRNO | code) for code in answers]
    return b"".join(program)

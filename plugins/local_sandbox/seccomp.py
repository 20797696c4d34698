"""A system call filter that keeps the sandbox away from the kernel's keyrings.

Keys are checked against the host uid, not the sandbox's namespaces: a sandbox
running as the caller could list, read, add and unlink keys in the caller's
own user keyring (and read any key whose ID it guesses), and sandboxes running
as the same unprivileged user could pass keys to each other or to a later run.
No test needs a keyring, so ``add_key``, ``request_key`` and ``keyctl`` fail
with ``ENOSYS`` inside, as on a kernel built without keyrings. System calls
made through another ABI than the interpreter's (32-bit ``int 0x80`` on
x86-64, x32, AArch32), which would have other numbers, all fail the same way.

The filter is classic BPF, assembled here, and handed to ``bwrap --seccomp``,
which installs it last, just before the test command starts.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

#: (audit architecture, system call numbers of add_key, request_key and keyctl), by machine.
_KEYRING_CALLS = {
    "x86_64": (0xC000003E, (248, 249, 250)),
    "aarch64": (0xC00000B7, (217, 218, 219)),
}
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


def keyring_filter() -> bytes | None:
    """The filter for this machine, or ``None`` where its system call numbers are not known."""
    known = _KEYRING_CALLS.get(os.uname().machine)
    if known is None or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    arch, calls = known
    refuse = _op(_RET, _ERRNO | errno.ENOSYS)
    allow = _op(_RET, _ALLOW)
    # Jumps count instructions from the next one; both targets sit at the end:
    # ... allow, refuse.
    body = [_op(_JEQ, number) for number in calls]
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ, arch, jt=0, jf=len(body) + 3),  # another ABI: refuse
        _op(_LD_W_ABS, _NR),
        _op(_JGE, _X32_BIT, jt=len(body) + 1, jf=0),  # x32: refuse
    ]
    for index, check in enumerate(body):
        code, _, _, k = struct.unpack("=HBBI", check)
        program.append(_op(code, k, jt=len(body) - index, jf=0))
    program += [allow, refuse]
    return b"".join(program)

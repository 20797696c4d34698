"""How the local sandbox enforces a job's limits, and how it tells which one stopped a test.

Enforcement, per limit:

* ``timeout``: the agent's wall clock; then the whole sandbox is killed.
* ``output``: the agent counts the output and kills the sandbox past ``output_stop_bytes``.
* ``memory``: ``RLIMIT_AS`` in every process (a clean ``MemoryError`` in Python), and
  where a memory cgroup can be made, a group limit of memory plus disk for the whole
  sandbox, since pages of its tmpfs mounts are memory too.
* ``processes``: a ``pids`` cgroup with ``pids.max``; without one, ``RLIMIT_NPROC``
  for the sandbox's user, which is never root (a root caller's sandbox runs as an
  unprivileged user, see :mod:`.user`), so it always applies.
* ``cpu``: ``RLIMIT_CPU`` per process (``SIGXCPU``, then ``SIGKILL`` a second later).
* ``file-size``: ``RLIMIT_FSIZE`` per file.
* ``disk``: ``/workspace``, ``/tmp`` and ``/dev/shm`` are tmpfs mounts of ``disk_mb`` each.

Which limit was hit is known for sure for ``timeout`` and ``output`` (the agent
acted), for ``processes`` and ``memory`` with a cgroup (the kernel counts refused
forks and OOM kills) and for ``cpu`` and ``file-size`` when the signal killed the
test. Otherwise an rlimit or a full tmpfs makes a system call fail, and the test
fails with the error it got; the limit is then inferred from the last such error
in the test's output (``MemoryError``, ``[Errno 27] File too large``, ``[Errno 28]
No space left on device``, ``[Errno 11] Resource temporarily unavailable``). A
patch can fake that output, but it controls its own test's verdict anyway.
"""

from __future__ import annotations

import contextlib
import math
import signal
from pathlib import Path

from sandboxed_coding_agent.core.model import SandboxJob

from .bwrap import MIB
from .cgroups import Counters

# The error a refused system call leaves in a Python test's output, per limit.
_REFUSALS = {
    "MemoryError": "memory",
    "[Errno 12] Cannot allocate memory": "memory",
    "[Errno 27] File too large": "file-size",
    "[Errno 28] No space left on device": "disk",
    "[Errno 11] Resource temporarily unavailable": "processes",
}


def _processes_of(uid: int) -> int:
    count = 0
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and entry.stat().st_uid == uid:
                    count += 1
    return count


def rlimits(job: SandboxJob, *, pids_group: bool, uid: int) -> dict[str, tuple[int, int]]:
    """The (soft, hard) rlimits set on the sandbox's first process, by ``resource`` name.

    :param uid: the host uid the sandbox runs as (never 0: see :mod:`.user`).
    """
    cpu = math.ceil(job.limits.cpu_seconds)
    limits = {
        "RLIMIT_AS": (job.limits.memory_mb * MIB,) * 2,
        "RLIMIT_CPU": (cpu, cpu + 1),
        "RLIMIT_FSIZE": (job.limits.max_file_mb * MIB,) * 2,
        # No core files: they would fill the workspace, or feed the host's crash handler.
        "RLIMIT_CORE": (0, 0),
        # No realtime scheduling and no raised priority, whatever the caller may: a busy
        # loop must share the CPU with the host.
        "RLIMIT_RTPRIO": (0, 0),
        "RLIMIT_NICE": (0, 0),
    }
    if not pids_group and uid != 0:
        # The count covers all of this user's processes, not only the sandbox's.
        allowed = _processes_of(uid) + job.limits.max_processes
        limits["RLIMIT_NPROC"] = (allowed, allowed)
    return limits


def limit_hit(
    *,
    exit_code: int | None,
    timed_out: bool,
    flooded: bool,
    counters: Counters,
    output: str,
) -> str | None:
    """The limit that stopped or failed the test, or ``None`` (it passed, or failed on its own)."""
    if timed_out:
        return "timeout"
    if flooded:
        return "output"
    if exit_code == 0:
        return None
    if counters.refused_forks:
        return "processes"
    if counters.oom_kills:
        return "memory"
    if exit_code == 128 + signal.SIGXCPU:
        return "cpu"
    if exit_code == 128 + signal.SIGXFSZ:
        return "file-size"
    found = [(output.rfind(text), name) for text, name in _REFUSALS.items() if text in output]
    return max(found)[1] if found else None

"""How the local sandbox enforces a job's limits, and how it tells which one stopped a test.

Enforcement, per limit:

* ``timeout``: the agent's wall clock; then the whole sandbox is killed.
* ``output``: the agent counts the output and kills the sandbox past ``output_stop_bytes``.
* ``memory``: where a memory cgroup bounds the sandbox (:attr:`.SandboxGroups.bounds_memory`),
  that group alone: ``memory_mb`` plus ``disk_mb`` for the whole sandbox, since pages of
  its tmpfs mounts are memory too, counted as they are used; the kernel kills a process
  that would go past it (an OOM kill, which it counts). Address space is not bounded
  then: what a process reserves and never touches (a thread's stack, a malloc arena)
  costs nothing. Without such a group, ``RLIMIT_AS`` in every process (a clean
  ``MemoryError`` in Python) of :func:`address_space`: ``memory_mb``, and room for the
  stacks of ``max_processes`` threads, so that a test may start as many threads as the
  sandbox may hold tasks. Pages held outside any mapping (a memfd's, SysV IPC's) cannot
  be had then: the system calls that make them fail (see :mod:`.seccomp`).

  In every sandbox, whatever the host, two settings keep a thread's cost fixed:
  ``RLIMIT_STACK`` is :data:`THREAD_STACK` (2 MiB), which glibc takes as the stack size of
  every thread it starts (8 MiB is usual) and the kernel as the most the main thread's stack
  may grow; and ``MALLOC_ARENA_MAX`` is 1 (:data:`.bwrap.MALLOC_ARENAS`), so glibc's malloc
  keeps one arena for all threads, where by default each thread that allocates may get one
  more, up to 8 per CPU core, each reserving 64 MiB of address space (128 MiB while it is
  being made). 100 threads holding 1 MiB each took 1.83 GiB of address space on two cores,
  and more on more; they take 0.32 GiB on any number. The stack's soft limit only is
  set: a test may raise it for itself. 2 MiB is glibc's own thread stack on x86-64 where
  the stack is unlimited, and the least in which Python 3.13 reaches its C recursion limit
  (a ``RecursionError``) before the end of a thread's stack; Python 3.10 to 3.13 need
  under 0.5 MiB for the default recursion limit of 1000 frames.
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

A thread that could not be started (Python's ``RuntimeError: can't start new
thread``) is the one error two limits share: ``pthread_create`` says ``EAGAIN``
both when the kernel refused the task (``pids.max``, ``RLIMIT_NPROC``) and when
the thread's stack could not be mapped (``RLIMIT_AS``), and Python shows neither.
With a ``pids`` group, which counts every task it refuses, a thread it did not
refuse was refused memory. Without one it is reported as ``processes``:
``RLIMIT_AS`` leaves room for ``max_processes`` stacks above ``memory_mb``, so a
thread is refused for want of address space only by a process that already maps
more than ``memory_mb`` besides its threads' stacks, and nothing left after the
test tells that process apart from one that ran out of tasks.
"""

from __future__ import annotations

import contextlib
import math
import resource
import signal
from pathlib import Path

from sandboxed_coding_agent.core.model import SandboxJob, SeedLimits

from .bwrap import MIB
from .cgroups import Counters

#: The stack of every thread glibc starts in the sandbox, and the most the main thread's may
#: grow to (``RLIMIT_STACK``'s soft limit).
THREAD_STACK = 2 * MIB
#: What a thread maps besides its stack: glibc's guard page below it (a page: 4 KiB, or 64 KiB
#: where pages are that large) and what Python allocates for it (20 KiB in all, measured).
THREAD_EXTRA = 64 * 1024
#: What Python says when ``pthread_create`` fails, for a task or for a stack.
THREAD_REFUSED = "RuntimeError: can't start new thread"

# The error a refused system call leaves in a Python test's output, per limit.
_REFUSALS = {
    "MemoryError": "memory",
    "[Errno 12] Cannot allocate memory": "memory",
    "[Errno 27] File too large": "file-size",
    "[Errno 28] No space left on device": "disk",
    "[Errno 11] Resource temporarily unavailable": "processes",
}


def _processes_of(uid: int) -> int:
    """The tasks (threads included, as ``RLIMIT_NPROC`` counts them) that ``uid`` runs."""
    count = 0
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and entry.stat().st_uid == uid:
                    count += len(list((entry / "task").iterdir()))
    return count


def address_space(limits: SeedLimits) -> int:
    """``RLIMIT_AS`` where no memory group bounds the sandbox: ``memory_mb``, and the stacks
    of ``max_processes`` threads (1,040 MiB at the defaults, 4 GiB + 2,112 MiB at the ceilings)."""
    return limits.memory_mb * MIB + limits.max_processes * (THREAD_STACK + THREAD_EXTRA)


def rlimits(
    job: SandboxJob, *, pids_group: bool, memory_group: bool, uid: int
) -> dict[str, tuple[int, int]]:
    """The (soft, hard) rlimits set on the sandbox's first process, by ``resource`` name.

    :param pids_group: whether a ``pids`` group bounds the sandbox's tasks.
    :param memory_group: whether a memory group bounds all the sandbox holds
        (:attr:`.SandboxGroups.bounds_memory`).
    :param uid: the host uid the sandbox runs as (never 0: see :mod:`.user`).
    """
    cpu = math.ceil(job.limits.cpu_seconds)
    limits = {
        # A default, not a bound: the hard limit stays the caller's.
        "RLIMIT_STACK": (THREAD_STACK, resource.RLIM_INFINITY),
        "RLIMIT_CPU": (cpu, cpu + 1),
        "RLIMIT_FSIZE": (job.limits.max_file_mb * MIB,) * 2,
        # No core files: they would fill the workspace, or feed the host's crash handler.
        "RLIMIT_CORE": (0, 0),
        # No realtime scheduling and no raised priority, whatever the caller may: a busy
        # loop must share the CPU with the host.
        "RLIMIT_RTPRIO": (0, 0),
        "RLIMIT_NICE": (0, 0),
    }
    if not memory_group:
        limits["RLIMIT_AS"] = (address_space(job.limits),) * 2
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
    if THREAD_REFUSED in output:
        # A pids group counts each task it refuses, and here it counted none (see above).
        refused_by = "memory" if counters.refused_forks is not None else "processes"
        found.append((output.rfind(THREAD_REFUSED), refused_by))
    return max(found)[1] if found else None

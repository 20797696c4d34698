"""Which rlimits the sandbox asks for, and which limit a stopped test is reported as.

Fast, in-process checks of :mod:`limits`' two decisions; ``test_sandbox_limits.py``
shows each limit really stopping a test in a real sandbox.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from sandboxed_coding_agent.core.model import SandboxJob, SeedLimits
from sandboxed_coding_agent.plugins.local_sandbox import limits
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import MIB
from sandboxed_coding_agent.plugins.local_sandbox.cgroups import Counters

JOB = SandboxJob(
    seed="s",
    files={},
    test_command=("true",),
    limits=SeedLimits(memory_mb=300, max_processes=20, cpu_seconds=7.2, max_file_mb=5),
)


def test_rlimits_bound_memory_cpu_file_size_and_forbid_core_files_and_priority() -> None:
    found = limits.rlimits(JOB, pids_group=True, uid=os.getuid())

    assert found == {
        "RLIMIT_AS": (300 * MIB, 300 * MIB),
        "RLIMIT_CPU": (8, 9),
        "RLIMIT_FSIZE": (5 * MIB, 5 * MIB),
        "RLIMIT_CORE": (0, 0),
        "RLIMIT_RTPRIO": (0, 0),
        "RLIMIT_NICE": (0, 0),
    }


def test_without_a_pids_group_the_process_count_adds_the_limit_to_the_users_processes() -> None:
    uid = os.getuid() or 65534  # root is exempt: as for a root caller, count the sandbox user's
    running = sum(
        1 for entry in os.scandir("/proc") if entry.name.isdigit() and entry.stat().st_uid == uid
    )

    soft, hard = limits.rlimits(JOB, pids_group=False, uid=uid)["RLIMIT_NPROC"]

    assert soft == hard
    assert running + 20 - 5 <= soft <= running + 20 + 5  # processes come and go meanwhile


def test_a_root_sandbox_user_gets_no_process_count_rlimit_it_would_ignore() -> None:
    assert "RLIMIT_NPROC" not in limits.rlimits(JOB, pids_group=False, uid=0)


def test_a_user_without_processes_counts_none() -> None:
    assert limits._processes_of(2**31 - 7) == 0


@pytest.mark.skipif(os.getuid() != 0, reason="starts processes as another user")
def test_the_process_count_rlimit_counts_exactly_the_users_processes() -> None:
    uid = 2**31 - 9  # a user nothing else runs as
    started = [
        subprocess.Popen(["sleep", "30"], user=uid, group=uid, extra_groups=[]) for _ in range(3)
    ]
    try:
        assert limits._processes_of(uid) == 3
        assert limits.rlimits(JOB, pids_group=False, uid=uid)["RLIMIT_NPROC"] == (23, 23)
    finally:
        for process in started:
            process.kill()
            process.wait()


def hit(
    exit_code: int | None = 1,
    *,
    timed_out: bool = False,
    flooded: bool = False,
    counters: Counters = Counters(),  # noqa: B008 - frozen
    output: str = "",
) -> str | None:
    return limits.limit_hit(
        exit_code=exit_code, timed_out=timed_out, flooded=flooded, counters=counters, output=output
    )


def test_the_agents_own_stops_come_first() -> None:
    assert hit(0, timed_out=True, flooded=True) == "timeout"
    assert hit(0, flooded=True, counters=Counters(1, 1)) == "output"


def test_a_passing_test_hit_no_limit_whatever_it_printed() -> None:
    assert hit(0, counters=Counters(3, 2), output="MemoryError") is None


def test_kernel_counters_name_processes_then_memory() -> None:
    assert hit(1, counters=Counters(refused_forks=1, oom_kills=1)) == "processes"
    assert hit(137, counters=Counters(oom_kills=1)) == "memory"


@pytest.mark.parametrize(
    ("exit_code", "expected"),
    [(128 + signal.SIGXCPU, "cpu"), (128 + signal.SIGXFSZ, "file-size"), (128 + 9, None)],
)
def test_signals_name_cpu_and_file_size(exit_code: int, expected: str | None) -> None:
    assert hit(exit_code) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("Traceback ...\nMemoryError\n", "memory"),
        ("OSError: [Errno 12] Cannot allocate memory", "memory"),
        ("OSError: [Errno 27] File too large: 'big'", "file-size"),
        ("OSError: [Errno 28] No space left on device", "disk"),
        ("BlockingIOError: [Errno 11] Resource temporarily unavailable", "processes"),
        ("AssertionError: 1 != 2", None),
        # The last refusal in the output is the one that stopped the test.
        ("[Errno 28] No space left on device\nthen MemoryError", "memory"),
        ("MemoryError caught\n[Errno 28] No space left on device", "disk"),
        ("MemoryError\n[Errno 28] No space left on device\nMemoryError", "memory"),
    ],
)
def test_without_a_counter_or_signal_the_last_refusal_in_the_output_names_it(
    output: str, expected: str | None
) -> None:
    assert hit(1, output=output) == expected


def test_no_exit_code_and_nothing_else_is_no_limit() -> None:
    assert hit(None) is None

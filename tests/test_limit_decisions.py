"""Which rlimits the sandbox asks for, and which limit a stopped test is reported as.

Fast, in-process checks of :mod:`limits`' two decisions; ``test_sandbox_limits.py``
shows each limit really stopping a test in a real sandbox.
"""

from __future__ import annotations

import os
import resource
import shutil
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


def test_rlimits_bound_cpu_file_size_and_forbid_core_files_and_priority() -> None:
    found = limits.rlimits(JOB, pids_group=True, memory_group=True, uid=os.getuid())

    assert found == {
        "RLIMIT_STACK": (2 * MIB, resource.RLIM_INFINITY),
        "RLIMIT_CPU": (8, 9),
        "RLIMIT_FSIZE": (5 * MIB, 5 * MIB),
        "RLIMIT_CORE": (0, 0),
        "RLIMIT_RTPRIO": (0, 0),
        "RLIMIT_NICE": (0, 0),
    }


def test_without_a_memory_group_address_space_is_the_memory_limit_and_room_for_every_thread() -> (
    None
):
    found = limits.rlimits(JOB, pids_group=True, memory_group=False, uid=os.getuid())

    # 300 MiB, and for each of 20 threads a 2 MiB stack and 64 KiB besides: 341.25 MiB.
    assert found["RLIMIT_AS"] == (300 * MIB + 20 * (2 * MIB + 64 * 1024),) * 2
    assert found["RLIMIT_STACK"] == (2 * MIB, resource.RLIM_INFINITY)


def test_the_address_space_does_not_depend_on_the_host() -> None:
    assert limits.address_space(SeedLimits()) == 1040 * MIB


def test_without_a_pids_group_the_process_count_adds_the_limit_to_the_users_tasks() -> None:
    uid = os.getuid() or 65534  # root is exempt: as for a root caller, count the sandbox user's
    # RLIMIT_NPROC counts every thread of the user's processes.
    running = sum(
        len(os.listdir(f"/proc/{entry.name}/task"))
        for entry in os.scandir("/proc")
        if entry.name.isdigit() and entry.stat().st_uid == uid
    )

    soft, hard = limits.rlimits(JOB, pids_group=False, memory_group=True, uid=uid)["RLIMIT_NPROC"]

    assert soft == hard
    assert running + 20 - 5 <= soft <= running + 20 + 5  # processes come and go meanwhile


def test_a_root_sandbox_user_gets_no_process_count_rlimit_it_would_ignore() -> None:
    assert "RLIMIT_NPROC" not in limits.rlimits(JOB, pids_group=False, memory_group=True, uid=0)


def test_a_user_without_processes_counts_none() -> None:
    assert limits._processes_of(2**31 - 7) == 0


THREADED = (
    "import sys, threading\n"
    "done = threading.Event()\n"
    "for _ in range(3): threading.Thread(target=done.wait, daemon=True).start()\n"
    "print(flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.mark.skipif(os.getuid() != 0, reason="starts processes as another user")
def test_the_process_count_rlimit_counts_exactly_the_users_tasks_threads_included() -> None:
    uid = 2**31 - 9  # a user nothing else runs as
    # The system's interpreter: this one may sit in a folder that user cannot enter (/root).
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for another user to run")
    started: list[subprocess.Popen[bytes]] = []
    try:
        for command in (["sleep", "30"], ["sleep", "30"], [python, "-c", THREADED]):
            started.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    user=uid,
                    group=uid,
                    extra_groups=[],
                )
            )
        threaded = started[-1].stdout
        assert threaded is not None
        assert threaded.readline() == b"\n"  # its three threads run

        assert limits._processes_of(uid) == 2 + 4
        found = limits.rlimits(JOB, pids_group=False, memory_group=True, uid=uid)
        assert found["RLIMIT_NPROC"] == (2 + 4 + 20,) * 2
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


THREAD_REFUSED = """Traceback (most recent call last):
  File "/workspace/check_calculator.py", line 9, in test_workers
    worker.start()
RuntimeError: can't start new thread
"""


def test_a_refused_thread_is_the_process_limit_when_the_pids_group_counted_it() -> None:
    assert hit(1, counters=Counters(refused_forks=3, oom_kills=0), output=THREAD_REFUSED) == (
        "processes"
    )


def test_a_refused_thread_the_pids_group_did_not_count_was_refused_memory() -> None:
    assert hit(1, counters=Counters(refused_forks=0), output=THREAD_REFUSED) == "memory"
    assert hit(1, counters=Counters(refused_forks=0, oom_kills=0), output=THREAD_REFUSED) == (
        "memory"
    )


def test_without_a_pids_group_a_refused_thread_is_the_process_limit() -> None:
    # RLIMIT_NPROC counts nothing; RLIMIT_AS leaves room for every thread's stack.
    assert hit(1, counters=Counters(), output=THREAD_REFUSED) == "processes"
    assert hit(1, counters=Counters(oom_kills=0), output=THREAD_REFUSED) == "processes"


def test_a_refused_thread_is_weighed_with_the_other_refusals_by_its_place() -> None:
    later_memory = THREAD_REFUSED + "during handling...\nMemoryError\n"
    assert hit(1, counters=Counters(refused_forks=0), output=later_memory) == "memory"
    full_disk = "OSError: [Errno 28] No space left on device\n" + THREAD_REFUSED
    assert hit(1, counters=Counters(), output=full_disk) == "processes"


def test_no_exit_code_and_nothing_else_is_no_limit() -> None:
    assert hit(None) is None

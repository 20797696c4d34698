"""A patch that tries to exhaust the host is stopped by a limit, the result names it, and the
next run passes; a test that only needs many threads passes, on any number of cores.

Each hostile ``calculator.py`` does its damage when the test imports it, bounded
by the test itself so that a missing limit makes the test fail rather than the
machine fall over.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from conftest import (
    AGENT,
    FIXED_CALCULATOR,
    AgentRun,
    control_groups_here,
    host_processes_with,
    wait_until,
)

from sandboxed_coding_agent.core.model import (
    PatchFile,
    PatchPlan,
    RunResult,
    SeedLimits,
)
from sandboxed_coding_agent.core.runs import orchestrator
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox, new_sandbox_id
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import MIB
from sandboxed_coding_agent.plugins.local_sandbox.cgroups import (
    PREFIX,
    SandboxGroups,
    controllers,
)

RunAgent = Callable[..., AgentRun]
CORRECT_ADD = "\n\ndef add(left, right):\n    return left + right\n"


def hostile(body: str) -> str:
    return "import os, subprocess, sys, time\n" + textwrap.dedent(body) + CORRECT_ADD


def marker() -> str:
    return f"sca-{uuid.uuid4().hex}"


@functools.cache
def memory_group_here() -> bool:
    """Whether this caller's sandboxes have a memory group that bounds them (and so no
    ``RLIMIT_AS``): found by making one, as the agent does."""
    groups = SandboxGroups(new_sandbox_id(), max_processes=16, memory_bytes=256 * MIB)
    try:
        return groups.bounds_memory
    finally:
        groups.kill_and_remove()


def sandbox_groups(sandbox_id: str) -> list[Path]:
    """Control groups of a sandbox that still exist on the host."""
    return [
        entry
        for controller in controllers().values()
        for entry in controller.parent.glob(f"{PREFIX}*-{sandbox_id}")
    ]


@pytest.fixture
def run_limited(
    run_agent: RunAgent, write_plan: Callable[..., Path], walls_seed: Path
) -> Callable[..., dict[str, object]]:
    """Run a hostile patch with limit flags; check it left nothing; prove the next run passes."""

    def run(body: str, *flags: str) -> dict[str, object]:
        plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(body)}]})
        seed = ("--seed", str(walls_seed))
        hostile_run = run_agent("run", "--plan", str(plan), "--json", *seed, *flags)
        assert hostile_run.returncode == 1, hostile_run.stdout + hostile_run.stderr
        result: dict[str, object] = hostile_run.json()
        assert result["tests_passed"] is False
        assert sandbox_groups(str(result["sandbox_id"])) == []
        assert list(hostile_run.tmpdir.iterdir()) == []

        fixed = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
        next_run = run_agent("run", "--plan", str(fixed), "--json")
        assert next_run.returncode == 0, next_run.stderr
        assert next_run.json()["limit_hit"] is None
        return result

    return run


def run_api(body: str, limits: SeedLimits | None = None) -> RunResult:
    """Test a hostile patch through ``orchestrator.run`` with the calculator seed."""
    seed = calculator_seed()
    if limits is not None:
        seed = attrs.evolve(seed, limits=limits)
    plan = PatchPlan(files=[PatchFile("calculator.py", hostile(body))])
    return orchestrator.run(seed, runner=LocalSandbox(), policies=[], plan=plan)


def test_fork_loop_is_stopped_by_the_process_limit(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    tag = marker()

    result = run_limited(
        f"""
        started = []
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)", "{tag}"]
        for _ in range(200):  # the test's own bound, far above the limit
            pid = os.fork()
            if pid == 0:
                os.execv(sys.executable, sleeper)
            started.append(pid)
        """,
        "--max-processes",
        "32",
    )

    assert result["limit_hit"] == "processes"
    assert "BlockingIOError" in str(result["test_output"])
    assert host_processes_with(tag) == []


def test_memory_hog_is_stopped_by_the_memory_limit(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited(
        """
        hoard = []
        for _ in range(256):  # 4 GiB at most
            hoard.append(bytearray(16 * 1024 * 1024))
        """,
        "--memory-mb",
        "128",
    )

    assert result["limit_hit"] == "memory"
    if memory_group_here():
        # The group counts what is used, and the kernel kills the process past it.
        assert result["test_exit_code"] == 128 + signal.SIGKILL
    else:
        assert "MemoryError" in str(result["test_output"])


@pytest.mark.parametrize("folder", ["/workspace", "/tmp", "/dev/shm"])
def test_disk_filler_is_stopped_by_the_disk_limit(
    run_limited: Callable[..., dict[str, object]], folder: str
) -> None:
    result = run_limited(
        f"""
        chunk = b"x" * (1024 * 1024)
        for number in range(1024):  # 1 GiB at most
            with open(f"{folder}/fill-{{number}}", "wb") as f:
                f.write(chunk)
        """,
        "--disk-mb",
        "16",
    )

    assert result["limit_hit"] == "disk"
    assert "No space left on device" in str(result["test_output"])


def test_the_rest_of_the_sandbox_is_read_only(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited(
        """
        for folder in ("/", "/usr", "/dev", "/proc", os.path.dirname(sys.executable)):
            try:
                open(os.path.join(folder, "filler"), "wb").write(b"x")
            except OSError as error:
                print("REFUSED", folder, error.errno)
            else:
                print("WROTE", folder)
        raise SystemExit(3)
        """
    )

    assert "WROTE" not in str(result["test_output"])
    assert str(result["test_output"]).count("REFUSED") == 5


def test_huge_file_is_stopped_by_the_file_size_limit(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited(
        """
        chunk = b"x" * (1024 * 1024)
        with open("big", "wb") as f:
            for _ in range(1024):  # 1 GiB at most
                f.write(chunk)
                f.flush()
        """,
        "--max-file-mb",
        "4",
        "--disk-mb",
        "64",
    )

    assert result["limit_hit"] == "file-size"
    assert "File too large" in str(result["test_output"])


def test_endless_loop_is_stopped_by_the_timeout(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited("while True:\n    pass\n", "--test-timeout", "1")

    assert result["limit_hit"] == "timeout"
    assert result["test_timed_out"] is True
    assert result["test_exit_code"] is None


def test_busy_loop_is_stopped_by_the_cpu_limit(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited("while True:\n    pass\n", "--cpu-seconds", "1", "--test-timeout", "60")

    assert result["limit_hit"] == "cpu"
    assert result["test_timed_out"] is False
    assert result["test_exit_code"] == 128 + signal.SIGXCPU


def test_output_flood_is_stopped_by_the_output_limit(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited(
        """
        line = "flood " * 10000 + "\\n"
        for _ in range(20000):  # 1.2 GB at most
            sys.stdout.write(line)
        """
    )

    assert result["limit_hit"] == "output"
    assert result["test_output_truncated"] is True
    assert result["test_exit_code"] is None
    assert len(str(result["test_output"])) < 13_000


def test_the_agent_keeps_only_the_bounded_output_of_a_flood() -> None:
    # In a fresh process, so that its peak memory is this run's alone.
    script = textwrap.dedent(
        """
        from sandboxed_coding_agent.core.model import SandboxJob, SeedLimits
        from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox

        flood = "import sys\\nfor _ in range(600): sys.stdout.write('x' * 100_000)\\n"
        job = SandboxJob(
            seed="flood", files={"flood.py": flood.encode()},
            test_command=("python", "flood.py"),
            # The highest stop a seed may set: 64 MiB.
            limits=SeedLimits(max_output_bytes=12_000, output_stop_bytes=64 * 1024 * 1024),
        )
        outcome = LocalSandbox().run_test(job)
        # VmHWM, the peak of this process's own memory since its exec: ru_maxrss would
        # count the memory of the process that started it (exec keeps that high-water
        # mark), which is the whole test suite's.
        status = open("/proc/self/status").read()
        peak_kib = int(status.split("VmHWM:")[1].split()[0])
        print(outcome.exit_code, len(outcome.output), peak_kib // 1024)
        """
    )

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )

    exit_code, kept, peak_mib = map(int, done.stdout.split())
    assert exit_code == 0  # all 60 MB went through
    assert kept < 13_000
    assert peak_mib < 150


def test_limits_set_by_the_seed_apply() -> None:
    # Little disk and few threads: a memory group holds memory and disk together, and
    # RLIMIT_AS leaves room for every thread's stack, so both stay near memory_mb.
    limits = SeedLimits(memory_mb=64, disk_mb=16, max_processes=8, test_timeout_seconds=30)

    result = run_api("blob = bytearray(100 * 1024 * 1024)\n", limits)

    assert result.limit_hit == "memory"
    assert run_api("blob = bytearray(100 * 1024 * 1024)\n").tests_passed


def test_a_run_can_override_the_seeds_limits() -> None:
    seed = calculator_seed()
    plan = PatchPlan(files=[PatchFile("calculator.py", hostile("blob = bytearray(200 * 2**20)\n"))])

    result = orchestrator.run(
        seed,
        runner=LocalSandbox(),
        policies=[],
        plan=plan,
        limits=attrs.evolve(seed.limits, memory_mb=100, disk_mb=16, max_processes=8),
    )

    assert result.limit_hit == "memory"
    assert run_api("blob = bytearray(200 * 2**20)\n").tests_passed


#: A test module that starts THREADS threads, each holding about 1 MiB in 256 allocations of
#: its own (so that each thread's malloc may want an arena of its own), waits until all of
#: them hold it, reports the process's address space, and joins them.
THREADS_TEST = """\
import os, resource, threading, unittest

THREADS = {threads}


class Threads(unittest.TestCase):
    def test_threads_holding_memory(self):
        started, release, held = threading.Barrier(THREADS + 1), threading.Event(), []

        def work():
            try:
                held.append([bytes(4096) for _ in range(256)])
                started.wait()
            except BaseException:  # refused memory, or another thread was: none waits forever
                started.abort()
                return
            release.wait()

        threads = [threading.Thread(target=work) for _ in range(THREADS)]
        try:
            for thread in threads:
                thread.start()
            started.wait()
            status = dict(line.split(":", 1) for line in open("/proc/self/status"))
            print("VmPeak", status["VmPeak"].split()[0], "KiB", flush=True)
        except BaseException:
            started.abort()
            raise
        finally:
            release.set()
            for thread in threads:
                if thread.ident is not None:
                    thread.join()
        print("MALLOC_ARENA_MAX", os.environ.get("MALLOC_ARENA_MAX"), flush=True)
        print("RLIMIT_STACK", resource.getrlimit(resource.RLIMIT_STACK)[0], flush=True)
        self.assertEqual(len(held), THREADS)
"""


@pytest.fixture
def run_threads(
    run_agent: RunAgent, write_plan: Callable[..., Path], walls_seed: Path
) -> Callable[..., dict[str, object]]:
    """Run the walls seed with a second test module, :data:`THREADS_TEST`, and the fix."""

    def run(threads: int, *flags: str) -> dict[str, object]:
        (walls_seed / "check_threads.py").write_text(THREADS_TEST.format(threads=threads))
        manifest = walls_seed / "seed.toml"
        manifest.write_text(
            manifest.read_text()
            .replace('tests = ["check_calculator.py"]', 'tests = ["check_*.py"]')
            .replace('"check_calculator"]', '"check_calculator", "check_threads"]')
        )
        plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
        run = run_agent("run", "--plan", str(plan), "--json", "--seed", str(walls_seed), *flags)
        result: dict[str, object] = run.json()
        assert run.returncode == 0, result["test_output"]
        return result

    return run


def test_a_hundred_threads_holding_memory_pass_under_the_default_limits_on_any_host(
    run_threads: Callable[..., dict[str, object]],
) -> None:
    result = run_threads(100)

    output = str(result["test_output"])
    assert result["tests_passed"] is True
    assert result["limit_hit"] is None
    assert "test_threads_holding_memory (check_threads.Threads" in output
    # 1.83 GiB of address space on two cores, and more on more, before each thread had a 2 MiB
    # stack (8 MiB is usual) and all shared one malloc arena (glibc makes up to 8 per core);
    # 0.32 GiB since, on any.
    peak_kib = int(output.split("VmPeak ", 1)[1].split()[0])
    assert peak_kib * 1024 < SeedLimits().memory_mb * MIB, output
    assert "MALLOC_ARENA_MAX 1\n" in output
    assert f"RLIMIT_STACK {2 * MIB}\n" in output


def test_a_test_may_start_nearly_as_many_threads_as_tasks_whatever_its_memory_limit(
    run_threads: Callable[..., dict[str, object]],
) -> None:
    # 56 threads' stacks alone (112 MiB) would not fit in 64 MiB of address space: without a
    # memory group, RLIMIT_AS leaves room for a stack per task the sandbox may hold.
    result = run_threads(56, "--memory-mb", "64", "--max-processes", "64")

    assert result["tests_passed"] is True
    assert result["limit_hit"] is None


def test_threads_past_the_process_limit_are_stopped_by_the_process_limit(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited(
        """
        import threading
        release = threading.Event()
        try:
            for _ in range(64):  # the test's own bound, twice the limit
                threading.Thread(target=release.wait, daemon=True).start()
        finally:
            release.set()
        """,
        "--max-processes",
        "32",
    )

    assert result["limit_hit"] == "processes"
    assert "RuntimeError: can't start new thread" in str(result["test_output"])


def test_threads_that_run_out_of_memory_are_stopped_by_the_memory_limit(
    run_limited: Callable[..., dict[str, object]],
) -> None:
    result = run_limited(
        """
        import threading
        started, refused = threading.Barrier(16), []

        def hoard():
            started.wait()  # every thread runs before any of them allocates
            held = []
            try:
                for _ in range(16):  # 4 GiB in all at most
                    held.append(bytearray(16 * 1024 * 1024))
            except MemoryError as error:
                refused.append(error)

        threads = [threading.Thread(target=hoard) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if refused:
            raise refused[0]
        """,
        "--memory-mb",
        "128",
    )

    assert result["limit_hit"] == "memory"
    if not memory_group_here():
        assert "MemoryError" in str(result["test_output"])


def test_a_failing_test_names_no_limit() -> None:
    result = run_api("raise ValueError('no limit involved')\n")

    assert result.tests_passed is False
    assert result.limit_hit is None


@pytest.fixture
def agent_process(
    agent_env: dict[str, str], write_plan: Callable[..., Path], walls_seed: Path
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    tag = marker()
    body = f"""
        subprocess.Popen(["sh", "-c", "while :; do sleep 1; done", "{tag}"], start_new_session=True)
        time.sleep(60)
    """
    plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(body)}]})
    process = subprocess.Popen(
        [str(AGENT), "run", "--plan", str(plan), "--seed", str(walls_seed), "--json"],
        env=agent_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process, tag
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_agent_stopped_by_ctrl_c_or_sigterm_leaves_no_sandbox_behind(
    agent_process: tuple[subprocess.Popen[str], str],
    agent_env: dict[str, str],
    stop: signal.Signals,
) -> None:
    process, tag = agent_process
    assert wait_until(lambda: bool(host_processes_with(tag)), timeout=20)
    groups_before = {
        name: entry
        for name, c in controllers().items()
        for entry in c.parent.glob(f"{PREFIX}{process.pid}-*")
    }

    process.send_signal(stop)
    stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stdout + stderr
    assert "interrupted" in stderr
    assert host_processes_with(tag) == []
    # The sandbox had a group for each controller this caller can make one for, and no other.
    made, problems = control_groups_here()
    assert set(groups_before) == made, problems
    assert not any(group.exists() for group in groups_before.values())
    assert list(Path(agent_env["TMPDIR"]).iterdir()) == []


def test_an_agent_killed_outright_leaves_no_sandbox_process_and_the_next_run_removes_its_groups(
    agent_process: tuple[subprocess.Popen[str], str],
    run_agent: RunAgent,
    write_plan: Callable[..., Path],
) -> None:
    # SIGKILL cannot be handled: bwrap, told to die with its parent, takes the sandbox along.
    process, tag = agent_process
    assert wait_until(lambda: bool(host_processes_with(tag)), timeout=20)
    groups_left = {
        entry for c in controllers().values() for entry in c.parent.glob(f"{PREFIX}{process.pid}-*")
    }

    process.kill()
    process.wait()

    assert wait_until(lambda: host_processes_with(tag) == [], timeout=10)
    fixed = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    assert run_agent("run", "--plan", str(fixed)).returncode == 0
    assert not any(group.exists() for group in groups_left)


def test_result_json_names_the_limit(run_agent: RunAgent, write_plan: Callable[..., Path]) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    result = json.loads(run_agent("run", "--plan", str(plan), "--json").stdout)

    assert "limit_hit" in result
    assert result["limit_hit"] is None


def test_limit_flags_reject_nonsense(run_agent: RunAgent, write_plan: Callable[..., Path]) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent("run", "--plan", str(plan), "--memory-mb", "1")

    assert run.returncode == 2
    assert "--memory-mb" in run.stderr
    assert "Traceback" not in run.stderr


def test_cleanup_kills_whatever_is_left_in_the_sandbox_groups() -> None:
    # The PID namespace usually takes everything with it; the groups are the backstop.
    groups = SandboxGroups(new_sandbox_id(), max_processes=16, memory_bytes=256 * 1024 * 1024)
    if not groups.groups:
        pytest.skip(f"no control group can be made here: {groups.problems}")
    joins = "import os, sys, time\nfor p in sys.argv[1:]: open(p, 'w').write(str(os.getpid()))\n"
    member = subprocess.Popen(
        [sys.executable, "-c", joins + "print(flush=True)\ntime.sleep(60)", *groups.procs_files],
        stdout=subprocess.PIPE,
    )
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert member.stdout is not None
        assert member.stdout.readline() == b"\n"  # it has joined the groups
        paths = list(groups.groups.values())

        groups.kill_and_remove()

        assert member.wait(timeout=5) == -signal.SIGKILL
        assert [path for path in paths if path.exists()] == []
        assert bystander.poll() is None
    finally:
        for process in (member, bystander):
            process.kill()
            process.wait()

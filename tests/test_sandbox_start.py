"""The launch sequence of a sandbox (``plugins/local_sandbox/start.py``): its first process is
in every group and under every limit before it may start bwrap, and nothing of the agent's
own keyring or mounts changes on the way.

The gate is caught at the moment the agent has placed and limited it and not yet
released it, and looked at from the host; the limits are read again by the test
command itself, ``cat /proc/self/limits``, whose first instruction runs under them.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FIXED_CALCULATOR, control_groups_here

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome, SeedLimits
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox, new_sandbox_id, start
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import MIB
from sandboxed_coding_agent.plugins.local_sandbox.cgroups import SandboxGroups
from sandboxed_coding_agent.plugins.local_sandbox.limits import address_space

LIMITS = SeedLimits(
    memory_mb=300, cpu_seconds=7, max_file_mb=3, max_processes=40, test_timeout_seconds=30
)
#: /proc/PID/limits rows: name -> (soft, hard) as the kernel prints them.
EXPECTED = {
    "Max cpu time": ("7", "8"),
    "Max file size": (str(3 * MIB), str(3 * MIB)),
    "Max core file size": ("0", "0"),
    "Max realtime priority": ("0", "0"),
    "Max nice priority": ("0", "0"),
}
if "memory" not in control_groups_here()[0]:
    # Without a memory group: 300 MiB, and room for a 2 MiB stack for each of 40 threads.
    EXPECTED["Max address space"] = (str(address_space(LIMITS)),) * 2
KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING = 0, -3


def run(test_command: list[str] | None = None) -> SandboxOutcome:
    seed = calculator_seed()
    files = {**seed.read_files(), "calculator.py": FIXED_CALCULATOR.encode()}
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=tuple(test_command or seed.test_command),
        limits=LIMITS,
    )
    return LocalSandbox().run_test(job)


def limits_of(pid: int | str) -> dict[str, tuple[str, str]]:
    rows = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    # "Max cpu time              7                    8                    seconds"
    return {row[:26].strip(): (row[26:47].strip(), row[47:68].strip()) for row in rows}


def within_hard(expected: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """``expected``, lowered to this process's own hard limits, as the agent lowers them."""
    kinds = {
        "Max address space": resource.RLIMIT_AS,
        "Max cpu time": resource.RLIMIT_CPU,
        "Max file size": resource.RLIMIT_FSIZE,
        "Max core file size": resource.RLIMIT_CORE,
        "Max realtime priority": resource.RLIMIT_RTPRIO,
        "Max nice priority": resource.RLIMIT_NICE,
    }
    lowered = {}
    for name, (soft, hard) in expected.items():
        own = resource.getrlimit(kinds[name])[1]
        if own != resource.RLIM_INFINITY:
            soft, hard = str(min(int(soft), own)), str(min(int(hard), own))
        lowered[name] = (soft, hard)
    return lowered


@pytest.fixture
def gate_at_release(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """What the host sees of the gate once it is placed and limited, before it is released."""
    seen: dict[str, object] = {}
    real_holds, real_set = SandboxGroups.holds, start.set_rlimits

    def holds(groups: SandboxGroups, pid: int) -> bool:
        seen["groups"] = dict(groups.groups)  # emptied once the groups are removed
        return real_holds(groups, pid)

    def set_rlimits(pid: int, rlimits: dict[str, tuple[int, int]]) -> None:
        real_set(pid, rlimits)
        # Still before the release: the gate waits on its pipe.
        seen["cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        seen["children"] = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        seen["limits"] = limits_of(pid)
        seen["cgroup"] = Path(f"/proc/{pid}/cgroup").read_text().splitlines()

    monkeypatch.setattr(SandboxGroups, "holds", holds)
    monkeypatch.setattr(start, "set_rlimits", set_rlimits)
    return seen


def test_the_gate_is_in_every_group_and_under_every_limit_before_it_is_released(
    gate_at_release: dict[str, object],
) -> None:
    outcome = run()

    assert outcome.tests_passed, outcome.output
    assert gate_at_release["cmdline"][:3] == [b"/bin/sh", b"-c", start.GATE.encode()]
    assert gate_at_release["children"] == []  # it has started nothing
    limits = gate_at_release["limits"]
    assert isinstance(limits, dict)
    assert {name: limits[name] for name in EXPECTED} == within_hard(EXPECTED)
    groups = gate_at_release["groups"]
    assert isinstance(groups, dict)
    assert set(groups) == control_groups_here()[0]
    lines = gate_at_release["cgroup"]
    assert isinstance(lines, list)
    for controller, group in groups.items():
        # v1: the line of that controller's hierarchy; v2: the one line of the unified one.
        line = next(x for x in lines if controller in x.split(":")[1].split(",") or x[:3] == "0::")
        assert line.endswith("/" + group.name), (controller, lines)


def test_the_test_command_runs_under_its_limits_from_its_first_instruction() -> None:
    outcome = run(["cat", "/proc/self/limits"])

    assert outcome.tests_passed, outcome.output
    limits = {
        row[:26].strip(): (row[26:47].strip(), row[47:68].strip())
        for row in outcome.output.splitlines()
        if row.startswith("Max ")
    }
    assert {name: limits[name] for name in EXPECTED} == within_hard(EXPECTED)


def _launch(groups: SandboxGroups) -> start.Launch:
    return start.Launch(groups=groups, rlimits={"RLIMIT_CORE": (0, 0)})


@pytest.fixture
def groups() -> Iterator[SandboxGroups]:
    made = SandboxGroups(new_sandbox_id(), max_processes=16, memory_bytes=256 * MIB)
    yield made
    made.kill_and_remove()


def test_a_gate_that_cannot_join_its_groups_never_starts_its_command(
    tmp_path: Path, groups: SandboxGroups, monkeypatch: pytest.MonkeyPatch
) -> None:
    unwritable = str(tmp_path / "gone" / "tasks")  # as a group removed meanwhile
    monkeypatch.setattr(SandboxGroups, "join_files", property(lambda _: [unwritable]))
    trace = tmp_path / "started"

    with (
        pytest.raises(SandboxError, match=f"could not join its control groups: .*{unwritable}"),
        start.started(["/bin/sh", "-c", f"echo > {trace}"], _launch(groups), pass_fds=()),
    ):
        pass

    assert not trace.exists()


@pytest.mark.skipif(not control_groups_here()[0], reason="this caller can make no control group")
def test_a_gate_that_is_not_in_every_group_is_never_released(
    tmp_path: Path, groups: SandboxGroups, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent believes /proc, not the gate: one group left out is enough to refuse.
    every = SandboxGroups.join_files.fget
    assert every is not None
    monkeypatch.setattr(SandboxGroups, "join_files", property(lambda g: every(g)[:-1]))
    trace = tmp_path / "started"

    with (
        pytest.raises(SandboxError, match="not in every one of its control groups"),
        start.started(["/bin/sh", "-c", f"echo > {trace}"], _launch(groups), pass_fds=()),
    ):
        pass

    time.sleep(0.2)  # time enough for a released gate to leave its trace
    assert not trace.exists()


def session_keyring() -> int:
    assert KEYCTL is not None
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0))


@pytest.mark.skipif(KEYCTL is None, reason="no keyctl number known for this machine")
def test_the_sandbox_gets_a_new_session_keyring_and_the_agent_keeps_its_own(
    groups: SandboxGroups,
) -> None:
    # The system call filter hides keyrings inside bwrap; the gate's command here is a plain
    # process, which shows the session keyring every process of a sandbox starts with.
    own = session_keyring()
    if own < 0:
        pytest.skip("this process has no session keyring")
    probe = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
        f"print(libc.syscall({KEYCTL}, {KEYCTL_GET_KEYRING_ID}, {KEY_SPEC_SESSION_KEYRING}, 0))"
    )
    with start.started([sys.executable, "-c", probe], _launch(groups), pass_fds=()) as gate:
        assert gate.stdout is not None
        printed = gate.stdout.read().decode()
        gate.wait()

    inside = int(printed)
    assert inside > 0, printed
    assert inside != own
    assert session_keyring() == own


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller's sandbox changes user")
def test_a_root_caller_without_setpriv_is_told_to_install_util_linux(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(start, "SYSTEM_PATH", str(tmp_path))

    with pytest.raises(SandboxError, match="through util-linux's setpriv, which is not in"):
        run()

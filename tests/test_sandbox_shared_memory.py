"""Memory a patch holds outside its mappings counts against the memory limit, and no process
of the sandbox reaches another one's memory or descriptors.

``RLIMIT_AS`` bounds what a process maps. Pages written to a memfd, a SysV shared
memory segment once detached and the kernel's memory behind SysV semaphores stay
allocated with nothing mapped: where the sandbox has a memory control group, the
group counts them and the run is stopped by the memory limit; where it has none
(an ordinary caller on a machine like the build machine, or any caller once no
group can be made), the system calls that would make them fail inside. Each test
asserts what this caller gets, found by making a group as the agent does, and
again as if no memory group could be made.

Each program below holds 300 MiB, 10 MiB at a time, with a limit of 128 MiB: it
prints ``HELD`` only if it got all of it.
"""

from __future__ import annotations

import ctypes
import os
import textwrap
from collections.abc import Callable

import pytest
from conftest import AgentRun, control_groups_here
from test_doctor import findings_of, in_outer_sandbox

from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome, SeedLimits
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox, cgroups

#: The numbers of the system calls the programs make, by machine (the kernel's own tables).
NUMBERS = {
    "x86_64": {
        "shmget": 29, "shmat": 30, "shmdt": 67, "semget": 64, "msgget": 68, "memfd_secret": 447,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
    },
    "aarch64": {
        "shmget": 194, "shmat": 196, "shmdt": 197, "semget": 190, "msgget": 186,
        "memfd_secret": 447,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
    },
}.get(os.uname().machine)  # fmt: skip
needs_numbers = pytest.mark.skipif(
    NUMBERS is None, reason=f"no system call numbers known for {os.uname().machine}"
)

PRELUDE = """\
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NUMBERS = {numbers!r}


def call(name, *args):
    result = libc.syscall(NUMBERS[name], *(ctypes.c_long(arg) for arg in args))
    if result == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def attempt(name, *args):
    try:
        call(name, *args)
    except OSError as error:
        print(f"CALL {{name}}: refused {{errno.errorcode[error.errno]}}", flush=True)
    else:
        print(f"CALL {{name}}: allowed", flush=True)


"""
IPC_CREAT_0600 = 0o1600  # IPC_CREAT | 0600, with the key IPC_PRIVATE (0)
MIB = 1024 * 1024


def run_program(body: str, limits: SeedLimits) -> SandboxOutcome:
    program = PRELUDE.format(numbers=NUMBERS) + textwrap.dedent(body)
    job = SandboxJob(
        seed="shared-memory",
        files={"program.py": program.encode()},
        test_command=("python", "program.py"),
        limits=limits,
    )
    return LocalSandbox().run_test(job)


@pytest.fixture(params=["this caller", "no memory group"])
def memory_group(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the sandboxes of the test have a memory group: as this caller, whose groups
    are found by making one, or as if the machine let this caller make none."""
    if request.param == "no memory group":
        found = cgroups.controllers

        def without_memory(
            *, roots: cgroups.CgroupRoots = cgroups.HOST
        ) -> dict[str, cgroups.Controller]:
            return {k: v for k, v in found(roots=roots).items() if k != "memory"}

        monkeypatch.setattr(cgroups, "controllers", without_memory)
        return False
    made, _ = control_groups_here()
    return "memory" in made


#: memory_mb 128; the memory group (where there is one) is memory + disk: 144 MiB.
SMALL = SeedLimits(memory_mb=128, disk_mb=16, test_timeout_seconds=60)

HOARDS = {
    # Written, never mapped: ten files, each under the file-size limit.
    "memfd": """
        files = []
        for _ in range(10):
            files.append(os.memfd_create("hoard"))
            for _ in range(30):
                os.write(files[-1], b"x" * MIB)
        """,
    # Mapped 10 MiB at a time and detached: the segments stay, with their pages.
    "shmget": """
        for _ in range(30):
            segment = call("shmget", 0, 10 * MIB, IPC_CREAT_0600)
            address = call("shmat", segment, 0, 0)
            ctypes.memset(address, 1, 10 * MIB)
            call("shmdt", address)
        """,
    # Never mapped at all: the kernel's memory behind 32,000 semaphores (about 2 MiB) a set.
    "semget": """
        for _ in range(150):
            call("semget", 0, 32000, IPC_CREAT_0600)
        """,
}


@needs_numbers
@pytest.mark.parametrize("how", sorted(HOARDS))
def test_memory_held_outside_any_mapping_is_stopped_by_the_memory_limit(
    memory_group: bool, how: str
) -> None:
    body = f"MIB, IPC_CREAT_0600 = {MIB}, {IPC_CREAT_0600}\n" + textwrap.dedent(HOARDS[how])

    outcome = run_program(body + "print('HELD', flush=True)\n", SMALL)

    assert "HELD" not in outcome.output, outcome.output
    assert outcome.exit_code != 0, outcome.output
    if memory_group:
        # The group counts those pages: the kernel stops the sandbox at the memory limit.
        assert outcome.limit_hit == "memory", outcome.output
    else:
        # Without a group, the first call that would hold such memory fails.
        assert "[Errno 38] Function not implemented" in outcome.output, outcome.output


@needs_numbers
def test_calls_that_hold_unmapped_memory_are_refused_only_without_a_memory_group(
    memory_group: bool,
) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    assert NUMBERS is not None
    secret = libc.syscall(NUMBERS["memfd_secret"], 0)  # off on some kernels, by a boot option
    if secret >= 0:
        os.close(secret)

    outcome = run_program(
        f"""
        try:
            os.close(os.memfd_create("one"))
            print("CALL memfd_create: allowed", flush=True)
        except OSError as error:
            print(f"CALL memfd_create: refused {{errno.errorcode[error.errno]}}", flush=True)
        attempt("memfd_secret", 0)
        attempt("shmget", 0, 4096, {IPC_CREAT_0600})
        attempt("semget", 0, 1, {IPC_CREAT_0600})
        attempt("msgget", 0, {IPC_CREAT_0600})
        # Acting on an object that does not exist is left to the kernel to refuse.
        attempt("shmat", 12345, 0, 0)
        """,
        SeedLimits(test_timeout_seconds=30),
    )

    assert outcome.exit_code == 0, outcome.output
    seen = dict(
        line.removeprefix("CALL ").split(": ", 1)
        for line in outcome.output.splitlines()
        if line.startswith("CALL ")
    )
    expected = dict.fromkeys(["memfd_create", "shmget", "semget", "msgget"], "allowed")
    expected["memfd_secret"] = "allowed" if secret >= 0 else "refused ENOSYS"
    if not memory_group:
        expected = dict.fromkeys(expected, "refused ENOSYS")
    assert seen == {**expected, "shmat": "refused EINVAL"}, outcome.output


def test_doctor_says_how_memory_outside_mappings_is_bounded_for_this_caller(
    run_agent: Callable[..., AgentRun],
) -> None:
    run = run_agent("doctor", "--json")

    memory = findings_of(run.stdout)["limit memory"]
    assert memory["ok"] is True, memory
    made, _ = control_groups_here()
    if "memory" in made:
        assert "memory cgroup for the whole sandbox" in memory["detail"], memory
    else:
        assert "memfd_create and SysV IPC fail with ENOSYS inside" in memory["detail"], memory


def test_doctor_says_memfds_and_sysv_ipc_are_refused_where_no_group_can_be_made(
    agent_env: dict[str, str],
) -> None:
    done = in_outer_sandbox(
        agent_env, "--dev-bind", "/", "/", "--ro-bind", "/sys/fs/cgroup", "/sys/fs/cgroup"
    )

    memory = findings_of(done.stdout)["limit memory"]
    assert memory["ok"] is True, memory
    assert memory["detail"].startswith("RLIMIT_AS per process only (no memory cgroup: ")
    assert "memfd_create and SysV IPC fail with ENOSYS inside" in memory["detail"], memory


# --- other processes ----------------------------------------------------------------------------


@needs_numbers
def test_no_process_of_the_sandbox_reaches_anothers_memory_or_descriptors() -> None:
    # A sibling holds a secret and a descriptor; another child of the same parent, same user,
    # tries to trace it, read and write its memory, and take its descriptor.
    outcome = run_program(
        """
        import signal, subprocess, asyncio
        secret = ctypes.create_string_buffer(b"the sibling's secret", 32)
        reader, writer = os.pipe()
        sibling = os.fork()
        if sibling == 0:
            os.close(reader)
            signal.pause()

        class Iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]

        mine = ctypes.create_string_buffer(32)
        local = Iovec(ctypes.addressof(mine), 32)
        remote = Iovec(ctypes.addressof(secret), 32)

        def vm(name):
            attempt(name, sibling, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0)

        attacker = os.fork()
        if attacker == 0:
            attempt("ptrace", 16, sibling, 0, 0)  # PTRACE_ATTACH
            vm("process_vm_readv")
            print("READ", mine.value, flush=True)
            vm("process_vm_writev")
            pidfd = os.pidfd_open(sibling)  # allowed: asyncio waits on children with it
            attempt("pidfd_getfd", pidfd, writer, 0)
            os._exit(0)
        os.waitpid(attacker, 0)
        os.kill(sibling, signal.SIGKILL)
        os.waitpid(sibling, 0)

        # What a test needs of its own children still works.
        print("RUN", subprocess.run([sys.executable, "-c", "print(7)"],
                                    capture_output=True, text=True).stdout.strip())
        async def child():
            process = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
            return await process.wait()
        print("ASYNC", asyncio.run(child()))
        """,
        SeedLimits(test_timeout_seconds=30),
    )

    assert outcome.exit_code == 0, outcome.output
    calls = [line for line in outcome.output.splitlines() if line.startswith("CALL ")]
    assert calls == [
        "CALL ptrace: refused EPERM",
        "CALL process_vm_readv: refused EPERM",
        "CALL process_vm_writev: refused EPERM",
        "CALL pidfd_getfd: refused EPERM",
    ], outcome.output
    assert "READ b''" in outcome.output, outcome.output  # nothing of the sibling's memory
    assert "RUN 7" in outcome.output
    assert "ASYNC 0" in outcome.output

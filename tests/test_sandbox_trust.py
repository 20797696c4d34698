"""The sandbox's trust boundary: whoever runs the agent, root included, a patch reaches no
kernel setting, no root-only file, and no process of the sandbox is host root.

Each hostile ``calculator.py`` makes its attempt when the test imports it, prints
what happened, and then adds correctly, so the run passes; the verdict is taken
on the host: the setting's value, the processes' credentials, the mounts.
"""

from __future__ import annotations

import contextlib
import ctypes
import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from conftest import AGENT, FIXED_CALCULATOR, AgentRun, host_processes_with, wait_until
from test_sandbox_isolation import hostile, probe_line

from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome, SeedLimits
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox, cgroups, start
from sandboxed_coding_agent.plugins.local_sandbox.user import ENVIRONMENT, FRESH_RANGE

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="only a root caller's sandbox changes user")
#: A machine-wide setting any process may read and host root may write.
SETTING = Path("/proc/sys/fs/lease-break-time")
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
ROOT_ONLY = [
    p for p in ("/proc/kpageflags", "/proc/timer_list", "/proc/slabinfo") if Path(p).exists()
]


def run_in_process(body: str, limits: SeedLimits | None = None) -> SandboxOutcome:
    seed = calculator_seed()
    files = seed.read_files()
    files["calculator.py"] = hostile(body).encode()
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        limits=limits or attrs.evolve(seed.limits, test_timeout_seconds=30),
    )
    return LocalSandbox().run_test(job)


@pytest.fixture
def host_setting() -> Iterator[str]:
    """The host's value of SETTING, put back should a test have changed it."""
    before = SETTING.read_text()
    yield before
    if SETTING.read_text() != before:
        SETTING.write_text(before)


def test_patch_cannot_change_a_host_kernel_setting(host_setting: str) -> None:
    wanted = str(int(host_setting) + 1)

    outcome = run_in_process(f"probe('sysctl', lambda: open('{SETTING}', 'w').write('{wanted}'))")

    assert outcome.tests_passed, outcome.output
    assert probe_line(outcome.output, "sysctl").startswith("PROBE sysctl: refused")
    assert SETTING.read_text() == host_setting


def test_patch_cannot_hand_the_hosts_crash_handler_a_command() -> None:
    before = CORE_PATTERN.read_text()

    try:
        outcome = run_in_process(
            f"probe('core_pattern', lambda: open('{CORE_PATTERN}', 'w').write('|/bin/sh -c id'))"
        )
    finally:
        if CORE_PATTERN.read_text() != before:
            CORE_PATTERN.write_text(before)

    assert outcome.tests_passed, outcome.output
    assert probe_line(outcome.output, "core_pattern").startswith("PROBE core_pattern: refused")
    assert CORE_PATTERN.read_text() == before


def test_kernel_interfaces_under_proc_are_read_only_inside_for_any_caller() -> None:
    outcome = run_in_process(
        """
        for name in ("sys", "sysrq-trigger", "irq", "bus"):
            path = "/proc/" + name
            if os.path.exists(path):
                flags = os.statvfs(path).f_flag
                print(f"MOUNT {path}", "read-only" if flags & os.ST_RDONLY else "WRITABLE")
        """
    )

    assert outcome.tests_passed, outcome.output
    mounts = [line for line in outcome.output.splitlines() if line.startswith("MOUNT ")]
    assert "MOUNT /proc/sys read-only" in mounts
    assert not [line for line in mounts if line.endswith("WRITABLE")], mounts


@pytest.mark.skipif(not ROOT_ONLY, reason="this kernel has none of the root-only /proc files")
def test_patch_cannot_read_root_only_files_under_proc() -> None:
    outcome = run_in_process(
        "".join(f"probe({path!r}, lambda: open({path!r}, 'rb').read(16))\n" for path in ROOT_ONLY)
    )

    assert outcome.tests_passed, outcome.output
    for path in ROOT_ONLY:
        assert probe_line(outcome.output, path).startswith(f"PROBE {path}: refused")


def credentials_of(pid: int) -> dict[str, list[int]]:
    """Real, effective, saved and filesystem uids and gids, and the groups of a host process."""
    found: dict[str, list[int]] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups"):
            found[key] = [int(v) for v in value.split()]
    return found


def parent_of(pid: int) -> int | None:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def _command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def sandbox_credentials_while_running() -> dict[int, dict[str, list[int]]]:
    """Credentials of every host process of a running sandbox (bwrap and the test included).

    The test command carries a marker; its parent is the sandbox's PID 1 (for this job,
    judged by its exit status, the shell of ``local_sandbox.init``), whose parent is bwrap
    outside.
    """
    tag = f"sca-{uuid.uuid4().hex}"
    seed = calculator_seed()
    files = seed.read_files()
    files["calculator.py"] = FIXED_CALCULATOR.encode()
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=("python", "-c", f"import time; time.sleep(3)  # {tag}"),
        limits=attrs.evolve(seed.limits, test_timeout_seconds=30),
    )
    outcome: list[SandboxOutcome] = []
    run = threading.Thread(target=lambda: outcome.append(LocalSandbox().run_test(job)))
    run.start()
    try:
        # The test itself, not bwrap or PID 1, whose command lines hold its marker too.
        command = f"import time; time.sleep(3)  # {tag}"

        def tests() -> list[int]:
            return [p for p in host_processes_with(tag) if _command_line(p)[2:3] == [command]]

        assert wait_until(lambda: len(tests()) >= 1, timeout=15)
        seen = {}
        for test in tests():
            pid: int | None = test
            for _ in range(3):  # the test, PID 1, bwrap
                if pid is None:
                    break
                try:
                    seen[pid] = credentials_of(pid)
                except OSError:
                    break
                pid = parent_of(pid)
    finally:
        run.join()
    assert outcome[0].exit_code == 0, outcome[0].output
    return seen


def test_no_process_of_the_sandbox_is_host_root() -> None:
    seen = sandbox_credentials_while_running()

    assert len(seen) >= 3  # bwrap outside, the sandbox's PID 1, the test
    uids = {credentials["Uid"][0] for credentials in seen.values()}
    assert len(uids) == 1, seen
    for pid, credentials in seen.items():
        assert credentials["Uid"] == [*uids] * 4, (pid, credentials)
        assert 0 not in credentials["Gid"], (pid, credentials)
        # Root's sandbox drops every group; anyone else's keeps the caller's own, which an
        # unprivileged process cannot shed (and which give it nothing the caller lacks).
        assert credentials["Groups"] == ([] if ROOT else sorted(os.getgroups())), (pid, credentials)
    if ROOT:
        # A uid of its own, which no account has.
        (uid,) = uids
        low, high = FRESH_RANGE
        assert low <= uid <= high
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)
    else:
        assert uids == {os.getuid()}


@needs_root
def test_each_sandbox_of_a_root_caller_runs_as_a_uid_of_its_own() -> None:
    first = {c["Uid"][0] for c in sandbox_credentials_while_running().values()}
    second = {c["Uid"][0] for c in sandbox_credentials_while_running().values()}

    assert len(first) == len(second) == 1
    assert first != second


@needs_root
def test_a_root_caller_chooses_the_sandbox_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT, "54321:54322")

    seen = sandbox_credentials_while_running()

    for pid, credentials in seen.items():
        assert credentials["Uid"] == [54321] * 4, (pid, credentials)
        assert credentials["Gid"] == [54322] * 4, (pid, credentials)
        assert credentials["Groups"] == [], (pid, credentials)


@pytest.mark.parametrize(
    "value",
    ["root", "0", "0:0", "1000:0", "no-such-user-x", "a b", "-1", "4294967294", "2147483648"]
    + ["1", "daemon", "1000:1", "\u0661\u0660\u0660\u0660", "1000:\u0661"]
    + [f"1000:{g.gr_gid}" for g in grp.getgrall() if g.gr_name in ("disk", "shadow", "adm")],
)
def test_a_sandbox_user_that_cannot_be_used_is_a_configuration_error(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], value: str
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent("run", "--plan", str(plan), "--json", env={ENVIRONMENT: value})

    assert run.returncode == 2, run.stdout + run.stderr
    error = run.json()["error"]
    assert error["kind"] == "configuration"
    assert ENVIRONMENT in error["message"]
    assert "Traceback" not in run.stderr


def test_a_sandbox_without_a_pids_group_still_has_a_process_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if the machine let the agent make no control group: for a root caller too, the
    # sandbox user is not root, so RLIMIT_NPROC binds it.
    monkeypatch.setattr(cgroups, "controllers", dict)

    outcome = run_in_process(
        """
        started = []
        for _ in range(200):  # the test's own bound, far above the limit
            pid = os.fork()
            if pid == 0:
                time.sleep(5)
                os._exit(0)
            started.append(pid)
        """,
        limits=SeedLimits(max_processes=16, test_timeout_seconds=30),
    )

    assert outcome.limit_hit == "processes", outcome.output
    assert "BlockingIOError" in outcome.output


def test_a_run_leaves_the_hosts_mounts_as_they_were() -> None:
    before = Path("/proc/self/mountinfo").read_text()

    outcome = run_in_process("pass")

    assert outcome.tests_passed, outcome.output
    assert Path("/proc/self/mountinfo").read_text() == before


@needs_root
def test_the_interpreter_under_a_closed_folder_is_reached_without_revealing_the_folder(
    tmp_path: Path,
) -> None:
    # The agent's interpreter lives under a folder the sandbox user may not pass through
    # (here: /root, mode 0700): the sandbox still runs it, and sees nothing else there.
    closed = next(
        (
            p
            for p in Path(sys.executable).resolve().parents
            if p != Path("/") and not start.may_pass(str(p), 65534, 65534)
        ),
        None,
    )
    if closed is None:
        pytest.skip("this interpreter's folders are all open to other users")
    canary = closed / f"canary-{uuid.uuid4().hex}"
    canary.write_text("secret")
    try:
        outcome = run_in_process(f"print('LISTING', sorted(os.listdir({str(closed)!r})))")
    finally:
        canary.unlink()

    assert outcome.tests_passed, outcome.output
    listing = next(line for line in outcome.output.splitlines() if line.startswith("LISTING"))
    assert canary.name not in listing
    assert stat.S_IMODE(closed.stat().st_mode) & 0o001 == 0  # still closed on the host


def test_closed_ancestor_is_the_highest_folder_the_user_cannot_pass(tmp_path: Path) -> None:
    # The folders above tmp_path are open to their owner, this process's user; below, two
    # folders are closed to their owner alone (permission bits are read owner first).
    uid, other_gid = os.getuid(), os.getgid() + 1
    top = tmp_path / "open"
    deep = top / "closed" / "inner" / "closed-too" / "python"
    deep.mkdir(parents=True)
    (top / "closed" / "inner" / "closed-too").chmod(0o077)
    (top / "closed").chmod(0o077)
    try:
        assert start.closed_ancestor(str(deep), uid, other_gid) == str(top / "closed")
        assert start.closed_ancestor(str(top / "closed"), uid, other_gid) is None
        assert not start.may_pass(str(top / "closed"), uid, other_gid)
        assert start.may_pass(str(top / "closed"), uid + 1, other_gid)  # others may
        (top / "closed").chmod(0o707)
        assert start.may_pass(str(top / "closed"), uid, other_gid)
        assert not start.may_pass(str(top / "closed"), uid + 1, os.getgid())  # the group may not
    finally:
        (top / "closed").chmod(0o755)
        (top / "closed" / "inner" / "closed-too").chmod(0o755)


def test_doctor_reports_the_sandbox_user_and_proc_sys_from_a_real_probe(
    run_agent: Callable[..., AgentRun],
) -> None:
    run = run_agent("doctor", "--json")

    findings = {f["item"]: f for f in run.json()["findings"]}
    user = findings["sandbox user"]
    assert user["ok"] is True, user
    expected = f"uid {os.getuid()}" if not ROOT else "a fresh uid for each sandbox"
    assert expected in user["detail"]
    assert findings["/proc/sys"]["ok"] is True
    assert findings["/proc/sys"]["detail"].startswith("read-only inside")


def test_agent_run_from_the_command_line_runs_no_sandbox_process_as_root(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], walls_seed: Path
) -> None:
    # The whole command as a user runs it: a child the patch starts is watched from the host.
    tag = f"sca-{uuid.uuid4().hex}"
    body = (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', 'import time; time.sleep(1.5)', {tag!r}])\n"
    )
    plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(body)}]})
    seen: dict[int, dict[str, list[int]]] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in host_processes_with(tag):
                with contextlib.suppress(OSError):
                    seen[pid] = credentials_of(pid)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        run = run_agent("run", "--plan", str(plan), "--seed", str(walls_seed), "--json")
    finally:
        done.set()
        watcher.join()

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.json()["tests_passed"] is True
    assert seen, "the patch's child was never seen from the host"
    for pid, credentials in seen.items():
        assert 0 not in credentials["Uid"], (pid, credentials)
        assert 0 not in credentials["Gid"], (pid, credentials)


# --- keyrings ----------------------------------------------------------------------------------

KEY_SPEC_USER_KEYRING = -4
KEYCTL_SEARCH = 10
LIBC = ctypes.CDLL(None, use_errno=True)
KEY_CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)


def add_user_key(description: str, payload: bytes) -> int:
    assert KEY_CALLS is not None
    key = LIBC.syscall(
        KEY_CALLS[0], b"user", description.encode(), payload, len(payload), KEY_SPEC_USER_KEYRING
    )
    if key < 0:
        pytest.skip(f"this kernel keeps no keys for this user: {os.strerror(ctypes.get_errno())}")
    return int(key)


def user_key(description: str) -> int:
    """The key of that description in this user's keyring, or -1."""
    assert KEY_CALLS is not None
    return int(
        LIBC.syscall(
            KEY_CALLS[1], KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, b"user", description.encode(), 0
        )
    )


@pytest.mark.skipif(KEY_CALLS is None, reason="no keyctl numbers known for this machine")
def test_patch_can_neither_read_nor_plant_keys_in_the_callers_keyrings() -> None:
    secret, planted = f"sca-secret-{uuid.uuid4().hex}", f"sca-planted-{uuid.uuid4().hex}"
    key = add_user_key(secret, b"TOPSECRET")
    try:
        outcome = run_in_process(
            f"""
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            add_key, keyctl = {KEY_CALLS!r}
            def call(*args):
                if libc.syscall(*args) < 0:
                    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
                return "allowed"
            probe("read", lambda: call(keyctl, 11, {key}, 0, 0))
            probe("search", lambda: call(keyctl, 10, -4, b"user", {secret!r}.encode(), 0))
            probe("plant", lambda: call(add_key, b"user", {planted!r}.encode(), b"x", 1, -4))
            probe("list", lambda: open("/proc/keys").read())
            """
        )
    finally:
        LIBC.syscall(KEY_CALLS[1], 3, key)  # KEYCTL_REVOKE: leave nothing behind

    assert outcome.tests_passed, outcome.output
    for name in ("read", "search", "plant", "list"):
        assert probe_line(outcome.output, name).startswith(f"PROBE {name}: refused"), name
    assert secret not in outcome.output
    assert user_key(planted) == -1


#: ioprio_get(2)'s number by machine; the probe reads the test's own I/O priority class.
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}


@pytest.mark.skipif(
    not ROOT
    or os.uname().machine not in IOPRIO_GET
    or not all(shutil.which(tool) for tool in ("chrt", "nice", "ionice")),
    reason="starting the agent at a realtime and raised priority needs root, chrt, nice "
    "and ionice (and a known ioprio_get number)",
)
def test_a_sandbox_runs_at_an_ordinary_priority_whatever_the_caller_had(
    tmp_path: Path, agent_env: dict[str, str], walls_seed: Path
) -> None:
    number = IOPRIO_GET[os.uname().machine]
    body = f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        io_class = libc.syscall({number}, 1, 0) >> 13
        probe('priority', lambda: f"{{os.sched_getscheduler(0)}} "
              f"{{os.getpriority(os.PRIO_PROCESS, 0)}} {{io_class}}")
    """
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"files": [{"path": "calculator.py", "content": hostile(body)}]}))
    raised = ["chrt", "-f", "1", "nice", "-n", "-5", "ionice", "-c", "1", "-n", "0"]

    done = subprocess.run(
        [*raised, str(AGENT), "run", "--plan", str(plan), "--seed", str(walls_seed), "--json"],
        env=agent_env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    seen = probe_line(json.loads(done.stdout)["test_output"], "priority")
    assert "succeeded" in seen, seen
    policy, nice, io_class = seen.split("succeeded ", 1)[1].strip("'").split()
    assert int(policy) == os.SCHED_OTHER, seen  # not SCHED_FIFO (1)
    assert int(nice) >= 0, seen
    assert int(io_class) != 1, seen  # not the realtime I/O class


def _exit_status_job(*command: str) -> SandboxOutcome:
    """A job no framework reads and without output tests: its PID 1 is ``local_sandbox.init``."""
    job = SandboxJob(seed="status", files={"data.txt": b"x\n"}, test_command=command)
    return LocalSandbox().run_test(job)


def test_a_command_judged_by_its_exit_status_has_pid_1_out_of_its_reach() -> None:
    outcome = _exit_status_job(
        "sh",
        "-c",
        "for f in environ mem; do head -c 1 /proc/1/$f >/dev/null 2>&1 && echo read $f; done;"
        "readlink /proc/1/exe || echo no exe; ls -l /.sandboxed-coding-agent/",
    )

    assert outcome.exit_code == 0, outcome.output
    assert "read " not in outcome.output
    assert "no exe" in outcome.output
    # Execute-only: the kernel makes a process of a program it may not read non-dumpable.
    assert "---x--x--x" in outcome.output
    assert " sh\n" in outcome.output


def test_a_command_judged_by_its_exit_status_starts_as_through_execvp() -> None:
    echo = subprocess.run(["/usr/bin/echo", "--version"], capture_output=True, text=True)
    if "coreutils" not in echo.stdout:
        pytest.skip("this machine's /usr/bin/echo is not GNU coreutils'")

    named_like_a_builtin = _exit_status_job("echo", "--version")
    killed = _exit_status_job("sh", "-c", "kill -TERM $$")
    missing = _exit_status_job("no-such-command-here", "x")

    # The program on PATH, not the shell's builtin of the same name (which prints --version).
    assert "coreutils" in named_like_a_builtin.output
    assert named_like_a_builtin.exit_code == 0
    assert killed.exit_code == 128 + 15
    assert missing.exit_code == 127
    assert "no-such-command-here" in missing.output


def test_no_signal_to_pid_1_turns_a_failing_command_into_a_pass() -> None:
    # PID 1 (the execute-only shell) catches SIGINT, which ends it with 130: never 0.
    outcome = _exit_status_job(
        "sh", "-c", "for s in $(seq 1 64); do kill -s $s 1 2>/dev/null; done; sleep 0.2; exit 1"
    )

    assert outcome.exit_code not in (0, None), outcome.output


def test_a_command_judged_by_its_exit_status_inherits_only_its_standard_descriptors() -> None:
    # Nothing is signed: a descriptor beyond 0, 1 and 2 (the harness's report pipe) would
    # only be a channel out that no output bound counts.
    outcome = _exit_status_job(
        "python", "-c", "import os; print('open', sorted(map(int, os.listdir('/proc/self/fd'))))"
    )

    assert outcome.exit_code == 0, outcome.output
    # The fourth is the listing's own descriptor of /proc/self/fd.
    assert "open [0, 1, 2, 3]" in outcome.output, outcome.output

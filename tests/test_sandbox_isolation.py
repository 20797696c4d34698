"""A hostile patch runs inside the sandbox: each test plants one and checks the host side.

The hostile ``calculator.py`` does its attempt when the test imports it, prints
what happened (``PROBE name: refused ...`` or ``PROBE name: succeeded ...``) so a
broken attempt cannot pass silently, and then defines a correct ``add``, so the
run itself passes. Every verdict is taken on the host: the listener saw nothing,
the file does not exist, no process carries the marker.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import AGENT, API_KEY, FIXED_CALCULATOR, AgentRun, host_processes_with, wait_until

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox, bwrap_executable
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import SYSTEM_DIRS

REPO = Path(__file__).resolve().parents[1]
SEED_ROOT = calculator_seed().root.resolve()

PRELUDE = """\
import json, os, socket, subprocess, sys, time


def probe(name, attempt):
    try:
        value = attempt()
    except OSError as error:
        print(f"PROBE {name}: refused {type(error).__name__}: {error}", flush=True)
    else:
        print(f"PROBE {name}: succeeded {value!r}", flush=True)


"""
CORRECT_ADD = "\n\ndef add(left, right):\n    return left + right\n"


def hostile(body: str) -> str:
    """A ``calculator.py`` that runs ``body`` when imported, then adds correctly."""
    return PRELUDE + textwrap.dedent(body) + CORRECT_ADD


def marker() -> str:
    return f"sca-{uuid.uuid4().hex}"


def seed_digest() -> dict[str, str]:
    return {
        str(path.relative_to(SEED_ROOT)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(SEED_ROOT.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(autouse=True)
def seed_is_never_changed() -> Iterator[None]:
    before = seed_digest()
    yield
    assert seed_digest() == before


@pytest.fixture
def run_hostile(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], walls_seed: Path
) -> Callable[..., AgentRun]:
    """Run a hostile patch through ``agent run --plan``; then prove the next run still passes."""

    def run(body: str, env: dict[str, str] | None = None) -> AgentRun:
        plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(body)}]})
        before = {p.name: p.read_bytes() for p in walls_seed.iterdir()}
        hostile_run = run_agent(
            "run", "--plan", str(plan), "--seed", str(walls_seed), "--json", env=env
        )
        assert {p.name: p.read_bytes() for p in walls_seed.iterdir()} == before
        assert hostile_run.returncode == 0, hostile_run.stdout + hostile_run.stderr
        assert list(hostile_run.tmpdir.iterdir()) == [], "a workspace was left behind"

        fixed = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
        next_run = run_agent("run", "--plan", str(fixed), "--json")
        assert next_run.returncode == 0, next_run.stderr
        assert next_run.json()["tests_passed"] is True
        return hostile_run

    return run


def probe_line(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(f"PROBE {name}: "))


def output_of(run: AgentRun) -> str:
    return str(run.json()["test_output"])


def run_in_process(body: str, timeout: float = 30) -> SandboxOutcome:
    """Test a hostile patch through the Python API, in this very process."""
    seed = calculator_seed()
    files = seed.read_files()
    files["calculator.py"] = hostile(body).encode()
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        limits=attrs.evolve(seed.limits, test_timeout_seconds=timeout),
    )
    return LocalSandbox().run_test(job)


# --- network ---------------------------------------------------------------------------------


def test_patch_cannot_reach_a_tcp_listener_on_host_loopback(
    run_hostile: Callable[..., AgentRun],
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]

        run = run_hostile(
            f"""
            probe("tcp", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
            probe("interfaces", lambda: [name for _, name in socket.if_nameindex()])
            """
        )

        with pytest.raises(BlockingIOError):
            listener.accept()
    output = output_of(run)
    assert "PROBE tcp: refused" in output
    assert "PROBE interfaces: succeeded ['lo']" in output


def test_patch_cannot_send_udp_to_host_loopback(run_hostile: Callable[..., AgentRun]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.setblocking(False)
        port = receiver.getsockname()[1]

        run = run_hostile(
            f"""
            def send():
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    return s.sendto(b"leak", ("127.0.0.1", {port}))
            probe("udp", send)
            """
        )

        with pytest.raises(BlockingIOError):
            receiver.recvfrom(100)
    # The datagram leaves the socket (into the sandbox's own loopback): only the host can tell.
    assert "PROBE udp: " in output_of(run)


#: Runs inside a network namespace of its own, where it may bind port 53: listens on
#: 127.0.0.1:53, where a resolver with no configuration asks (the sandbox has no /etc), runs
#: the agent it is given there, and says what reached the listeners.
DNS_LISTENERS_THEN_RUN = """
import ctypes, json, socket, subprocess, sys
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
udp.bind(("127.0.0.1", 53))
tcp.bind(("127.0.0.1", 53))
tcp.listen()
# bwrap refuses to start for a caller holding a capability it is not root for: the agent
# gets none of the one that bound port 53.
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
ctypes.CDLL(None, use_errno=True).prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)
udp.setblocking(False)
tcp.setblocking(False)
def arrived(receive):
    try:
        return repr(receive())
    except BlockingIOError:
        return None
print(json.dumps({
    "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
    "udp": arrived(lambda: udp.recvfrom(512)), "tcp": arrived(tcp.accept),
}))
"""


def in_a_network_of_its_own(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``command`` under DNS_LISTENERS_THEN_RUN in a new network namespace, where the
    listeners can bind port 53 whoever runs the tests: root makes the namespace itself; any
    other user makes it inside a user namespace holding just the capability to bind it."""
    if os.geteuid() == 0:
        # A user namespace would map root to root, which the sandbox user cannot leave.
        outer = ["--unshare-net"]
    else:
        outer = ["--unshare-user", "--unshare-net", "--cap-add", "CAP_NET_BIND_SERVICE"]
    done = subprocess.run(
        [
            *(str(bwrap_executable()), *outer, "--dev-bind", "/", "/", "--"),
            *(sys.executable, "-c", DNS_LISTENERS_THEN_RUN, *command),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return eval_json(done.stdout)


def test_patch_cannot_resolve_any_name(
    agent_env: dict[str, str], write_plan: Callable[..., Path]
) -> None:
    name = f"{marker()}.example.com"
    body = f"""
        probe("dns", lambda: socket.getaddrinfo("{name}", 80))
        probe("dns-direct", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
            b"\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00", ("127.0.0.1", 53)))
        """
    plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(body)}]})

    seen = in_a_network_of_its_own([str(AGENT), "run", "--plan", str(plan), "--json"], agent_env)

    assert seen["returncode"] == 0, seen["stdout"] + seen["stderr"]
    assert (seen["udp"], seen["tcp"]) == (None, None)
    output = str(eval_json(seen["stdout"])["test_output"])
    assert "PROBE dns: refused gaierror" in output
    assert "PROBE dns-direct: " in output


def test_patch_cannot_reach_a_unix_socket_in_host_tmp(
    run_hostile: Callable[..., AgentRun],
) -> None:
    path = Path("/tmp") / f"{marker()}.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        listener.setblocking(False)
        try:
            run = run_hostile(
                f"""
                def connect():
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect("{path}")
                    return s
                probe("unix", connect)
                """
            )

            with pytest.raises(BlockingIOError):
                listener.accept()
        finally:
            path.unlink()
    assert "PROBE unix: refused" in output_of(run)


def test_patch_cannot_reach_an_abstract_unix_socket_on_the_host(
    run_hostile: Callable[..., AgentRun],
) -> None:
    # Abstract sockets have no file: only the network namespace keeps them apart.
    name = marker()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind("\0" + name)
        listener.listen()
        listener.setblocking(False)

        run = run_hostile(
            f"""
            def connect():
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect("\\0{name}")
                return s
            probe("abstract", connect)
            """
        )

        with pytest.raises(BlockingIOError):
            listener.accept()
    assert "PROBE abstract: refused" in output_of(run)


# --- secrets ---------------------------------------------------------------------------------

DUMP_EVERY_ENVIRONMENT = """
print("ENVIRON", json.dumps(dict(os.environ)), flush=True)
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    probe(f"environ-{pid}", lambda: open(f"/proc/{pid}/environ", "rb").read())
    probe(f"cmdline-{pid}", lambda: open(f"/proc/{pid}/cmdline", "rb").read())
"""


def test_patch_sees_no_variable_of_the_callers_environment(
    run_hostile: Callable[..., AgentRun],
) -> None:
    secret = marker()

    run = run_hostile(DUMP_EVERY_ENVIRONMENT, env={"CALLER_SECRET": secret})

    output = output_of(run)
    # PID 1 is the harness, which no other process may read (it is not dumpable); the
    # test runs in it, and reads its own /proc/self/environ instead.
    assert probe_line(output, "environ-1").startswith("PROBE environ-1: refused")
    for leaked in (API_KEY, secret, "CODING_AGENT_", "CALLER_SECRET"):
        assert leaked not in run.stdout
        assert leaked not in run.stderr
    environ = next(line for line in output.splitlines() if line.startswith("ENVIRON "))
    assert set(eval_json(environ.removeprefix("ENVIRON ")).keys()) <= {
        "PATH",
        "HOME",
        "LANG",
        "PYTHONDONTWRITEBYTECODE",
        "MALLOC_ARENA_MAX",
        "PWD",
    }


def eval_json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


#: Waits for a plan file's path on stdin, then becomes ``agent run`` on it: the agent is
#: this very process, whose /proc/PID/environ (the secret included) the test knows in time
#: to name it in the plan.
AGENT_ONCE_PLAN_IS_READY = """
import os, sys
plan = sys.stdin.readline().strip()
os.execv(sys.argv[1], [sys.argv[1], "run", "--plan", plan, "--json"])
"""


def test_patch_cannot_read_the_agent_process_environment(
    agent_env: dict[str, str], write_plan: Callable[..., Path]
) -> None:
    secret = marker()
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT_ONCE_PLAN_IS_READY, str(AGENT)],
        env={**agent_env, "CALLER_SECRET": secret},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The secret really is in the agent's environment, where the host can read it (once
        # the process has started: until its exec completes the file reads empty).
        environ = Path(f"/proc/{agent.pid}/environ")
        assert wait_until(lambda: f"CALLER_SECRET={secret}".encode() in environ.read_bytes())
        body = (
            DUMP_EVERY_ENVIRONMENT
            + f"""
probe("agent-environ", lambda: open("/proc/{agent.pid}/environ", "rb").read())
probe("agent-parent", lambda: open("/proc/{os.getpid()}/environ", "rb").read())
"""
        )
        plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(body)}]})
        stdout, stderr = agent.communicate(f"{plan}\n", timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()

    assert agent.returncode == 0, stdout + stderr
    output = str(eval_json(stdout)["test_output"])
    assert secret not in stdout + stderr
    assert probe_line(output, "agent-environ").startswith("PROBE agent-environ: refused")
    assert probe_line(output, "agent-parent").startswith("PROBE agent-parent: refused")


#: keyctl(2) and add_key(2) on this machine; other machines skip the keyring test.
KEY_SYSCALLS = {"x86_64": (250, 248), "aarch64": (219, 217)}

READ_SESSION_KEYRING = """
import ctypes, struct
KEYCTL = {keyctl}
def session_keys():
    libc = ctypes.CDLL(None, use_errno=True)
    ring = libc.syscall(KEYCTL, 0, ctypes.c_int(-3), 0)  # the session keyring's ID, not created
    if ring < 0:
        raise OSError(ctypes.get_errno(), "no session keyring")
    buffer = ctypes.create_string_buffer(4096)
    size = libc.syscall(KEYCTL, 11, ring, buffer, 4096)  # KEYCTL_READ on a keyring: its keys
    if size < 0:
        raise OSError(ctypes.get_errno(), "the session keyring cannot be read")
    payloads = []
    for key in struct.unpack(f"{{size // 4}}i", buffer.raw[:size]):
        length = libc.syscall(KEYCTL, 11, key, buffer, 4096)
        payloads.append(buffer.raw[:length] if length >= 0 else ctypes.get_errno())
    return payloads
probe("keyring", session_keys)
"""

JOIN_KEYRING_THEN_EXEC = """
import ctypes, os, sys
keyctl, add_key = int(sys.argv[1]), int(sys.argv[2])
secret = sys.argv[3].encode()
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(keyctl, 1, b"caller-session") >= 0, ctypes.get_errno()
assert libc.syscall(add_key, b"user", b"token", secret, len(secret), ctypes.c_int(-3)) >= 0
os.execv(sys.argv[4], sys.argv[4:])
"""


def test_patch_cannot_read_the_callers_session_keyring(
    agent_env: dict[str, str], write_plan: Callable[..., Path], walls_seed: Path
) -> None:
    # A login session keeps tokens in its session keyring, which every child inherits,
    # across namespaces too: an agent started there must not hand it to the patch.
    machine = os.uname().machine
    if machine not in KEY_SYSCALLS:
        pytest.skip(f"keyring system call numbers unknown on {machine}")
    keyctl, add_key = KEY_SYSCALLS[machine]
    secret = marker()
    body = READ_SESSION_KEYRING.format(keyctl=keyctl)
    plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(body)}]})

    done = subprocess.run(
        [
            *(sys.executable, "-c", JOIN_KEYRING_THEN_EXEC, str(keyctl), str(add_key), secret),
            *(str(AGENT), "run", "--plan", str(plan), "--seed", str(walls_seed), "--json"),
        ],
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert secret not in done.stdout + done.stderr
    # Keyrings are out of reach altogether: keyctl fails as on a kernel without them.
    assert probe_line(str(eval_json(done.stdout)["test_output"]), "keyring") == (
        "PROBE keyring: refused OSError: [Errno 38] no session keyring"
    )


RAISE_PRIORITY = """
probe("realtime", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
probe("nice", lambda: os.nice(-10))
"""

#: Raises the caller's RLIMIT_RTPRIO and RLIMIT_NICE (the way pam_limits grants an audio
#: group realtime priority), then becomes the command it is given.
RAISE_PRIORITY_LIMITS_THEN_EXEC = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_RTPRIO, (50, 50))
resource.setrlimit(resource.RLIMIT_NICE, (40, 40))
os.execv(sys.argv[1], sys.argv[1:])
"""

#: Takes realtime and raised priority, then gives them back (exit 0 if it could take both).
TAKE_PRIORITY = """
import os
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
os.nice(-10)
"""


def runs_cleanly(*command: str) -> bool:
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


def caller_with_priority(how: str) -> list[str]:
    """The command prefix that runs the agent as a caller allowed realtime and raised priority
    by ``how``; skips where this machine allows no caller that."""
    if how == "rlimits":
        raise_limits = [sys.executable, "-c", RAISE_PRIORITY_LIMITS_THEN_EXEC]
        if not runs_cleanly(*raise_limits, "/bin/true"):
            # Raising a hard limit takes CAP_SYS_RESOURCE, which some containers withhold
            # even from root; the hard limits here are then the ones this caller got.
            hard = [
                resource.getrlimit(r)[1] for r in (resource.RLIMIT_RTPRIO, resource.RLIMIT_NICE)
            ]
            pytest.skip(
                f"this caller may not raise RLIMIT_RTPRIO and RLIMIT_NICE (hard limits {hard}, "
                "raising them needs CAP_SYS_RESOURCE), so no caller here holds them to pass on"
            )
        return raise_limits
    if not runs_cleanly(sys.executable, "-c", TAKE_PRIORITY):
        pytest.skip(
            "this caller may not take realtime or raised priority itself (it lacks "
            "CAP_SYS_NICE, which root has unless a container withholds it)"
        )
    return []


@pytest.mark.parametrize("how", ["rlimits", "capability"])
def test_patch_cannot_take_realtime_or_higher_priority_a_caller_may_take(
    agent_env: dict[str, str], write_plan: Callable[..., Path], how: str
) -> None:
    # A caller allowed realtime priority (an audio group, say, through its rlimits; root,
    # through CAP_SYS_NICE) would pass that on to a busy loop, which could then starve the
    # host's other processes.
    caller = caller_with_priority(how)
    plan = write_plan({"files": [{"path": "calculator.py", "content": hostile(RAISE_PRIORITY)}]})

    done = subprocess.run(
        [*caller, str(AGENT), "run", "--plan", str(plan), "--json"],
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    output = str(eval_json(done.stdout)["test_output"])
    assert probe_line(output, "realtime").startswith("PROBE realtime: refused PermissionError")
    assert probe_line(output, "nice").startswith("PROBE nice: refused PermissionError")


@pytest.fixture
def home_canary() -> Iterator[tuple[Path, str]]:
    """A file with a secret in a uniquely named folder under the real ``$HOME``."""
    folder = Path.home() / f".{marker()}"
    folder.mkdir()
    canary = folder / "credentials"
    secret = marker()
    canary.write_text(secret)
    try:
        yield canary, secret
    finally:
        canary.unlink(missing_ok=True)
        folder.rmdir()


def test_patch_cannot_read_files_under_the_callers_home(
    run_hostile: Callable[..., AgentRun], home_canary: tuple[Path, str]
) -> None:
    canary, secret = home_canary

    run = run_hostile(
        f"""
        probe("canary", lambda: open("{canary}").read())
        probe("home", lambda: os.listdir("{Path.home()}"))
        probe("ssh", lambda: os.listdir("{Path.home() / ".ssh"}"))
        """
    )

    output = output_of(run)
    assert "PROBE canary: refused" in output
    assert secret not in output
    assert canary.parent.name not in probe_line(output, "home")


@pytest.fixture
def canary_beside_python() -> Iterator[tuple[Path, str]]:
    """A secret in the Python installation's folder, beside what the interpreter needs.

    Python built with ``--prefix=$HOME/.local`` (or ``$HOME``) shares its folder with
    the caller's own files: ``~/.local/share``, ``~/.local/state``, even ``~/.ssh``.
    """
    prefix = Path(os.path.realpath(sys.base_prefix))
    if prefix.parts[1:2] and f"/{prefix.parts[1]}" in SYSTEM_DIRS:
        pytest.skip(f"{prefix} is a system folder, which every sandbox shows")
    folder = prefix / "share" / marker()
    try:
        folder.mkdir(parents=True)
    except OSError as error:
        pytest.skip(f"cannot write beside the Python installation: {error}")
    canary = folder / "credentials"
    secret = marker()
    canary.write_text(secret)
    try:
        yield canary, secret
    finally:
        canary.unlink()
        folder.rmdir()


def test_patch_cannot_read_what_lives_beside_the_python_installation(
    run_hostile: Callable[..., AgentRun], canary_beside_python: tuple[Path, str]
) -> None:
    canary, secret = canary_beside_python

    run = run_hostile(f'probe("beside-python", lambda: open("{canary}").read())')

    assert "PROBE beside-python: refused" in output_of(run)
    assert secret not in output_of(run)


def test_patch_cannot_read_the_project_checkout_or_the_seed_folder(
    run_hostile: Callable[..., AgentRun],
) -> None:
    run = run_hostile(
        f"""
        probe("checkout", lambda: open("{REPO / "pyproject.toml"}").read())
        probe("checkout-list", lambda: os.listdir("{REPO}"))
        probe("seed", lambda: open("{SEED_ROOT / "check_calculator.py"}").read())
        probe("venv", lambda: os.listdir("{REPO / ".venv"}"))
        """
    )

    output = output_of(run)
    for name in ("checkout", "checkout-list", "seed", "venv"):
        assert f"PROBE {name}: refused" in output


def test_patch_cannot_read_the_hosts_tmp(run_hostile: Callable[..., AgentRun]) -> None:
    canary = Path("/tmp") / marker()
    secret = marker()
    canary.write_text(secret)
    try:
        run = run_hostile(
            f"""
            probe("tmp-canary", lambda: open("{canary}").read())
            probe("tmp-list", lambda: os.listdir("/tmp"))
            """
        )
    finally:
        canary.unlink()

    output = output_of(run)
    assert "PROBE tmp-canary: refused" in output
    assert secret not in output
    assert probe_line(output, "tmp-list") == "PROBE tmp-list: succeeded []"


# --- writes ----------------------------------------------------------------------------------


def test_patch_writes_outside_the_workspace_never_reach_the_host(
    run_hostile: Callable[..., AgentRun], tmp_path: Path
) -> None:
    name = marker()
    targets = [
        Path("/tmp") / name,
        Path.home() / name,
        SEED_ROOT / name,
        REPO / name,
        tmp_path / "agent-tmp" / name,  # the agent's own TMPDIR
    ]
    try:
        run = run_hostile(
            "".join(
                f"probe('write-{i}', lambda: open('{target}', 'w').write('escaped'))\n"
                f"probe('mkdir-{i}', lambda: os.makedirs('{target}.d/x'))\n"
                for i, target in enumerate(targets)
            )
        )

        for target in targets:
            assert not target.exists()
            assert not Path(f"{target}.d").exists()
    finally:
        for target in targets:
            target.unlink(missing_ok=True)
            if Path(f"{target}.d").exists():
                Path(f"{target}.d/x").rmdir()
                Path(f"{target}.d").rmdir()
    # The sandbox's own /tmp is private and writable: the attempt really ran.
    assert "PROBE write-0: succeeded" in output_of(run)


def test_seed_files_stay_unchanged_when_the_patch_rewrites_the_test(
    run_hostile: Callable[..., AgentRun],
) -> None:
    before = seed_digest()

    run = run_hostile(
        """
        def rewrite():
            with open("calculator.py", "a") as f:
                f.write("# tampered\\n")
            with open("planted.py", "w") as f:
                f.write("# planted\\n")
            return sorted(os.listdir("."))
        probe("rewrite", rewrite)
        probe("test", lambda: open("check_calculator.py", "w").write("raise SystemExit(0)\\n"))
        """
    )

    output = output_of(run)
    # Its own file and a new one it may write, inside the sandbox only; the test is read-only.
    assert "PROBE rewrite: succeeded ['calculator.py', 'check_calculator.py', 'planted.py']" in (
        output
    )
    assert "PROBE test: refused OSError: [Errno 30] Read-only file system" in output
    assert seed_digest() == before


# --- processes -------------------------------------------------------------------------------

ESCAPES = {
    "setsid": """
        subprocess.Popen(["setsid", sys.executable, "-c", "import time\\nwhile True: time.sleep(1)",
                          "{marker}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    """,
    "double-fork": """
        if os.fork() == 0:
            if os.fork() == 0:
                os.setsid()
                os.execv(sys.executable, [sys.executable, "-c",
                         "import time\\nwhile True: time.sleep(1)", "{marker}"])
            os._exit(0)
        os.wait()
    """,
    "nohup": """
        subprocess.Popen(["nohup", "sh", "-c", "while :; do sleep 1; done", "{marker}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    """,
}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_no_process_started_by_the_patch_outlives_the_sandbox(escape: str) -> None:
    tag = marker()
    body = textwrap.dedent(ESCAPES[escape]).replace("{marker}", tag) + "time.sleep(1.5)\n"
    outcome: list[SandboxOutcome] = []
    run = threading.Thread(target=lambda: outcome.append(run_in_process(body)))

    run.start()
    # While the sandbox runs, the escapee is visible from the host: the check below can see it.
    seen_running = wait_until(lambda: bool(host_processes_with(tag)), timeout=10)
    run.join()

    assert seen_running, f"the {escape} child never started"
    assert outcome[0].tests_passed, outcome[0].output
    assert host_processes_with(tag) == []


# --- a sandbox that cannot start --------------------------------------------------------------


def test_a_test_command_no_command_line_can_hold_is_a_sandbox_error() -> None:
    seed = calculator_seed()
    job = SandboxJob(seed=seed.name, files=seed.read_files(), test_command=("python", "-c\0x"))

    with pytest.raises(SandboxError, match="the test command contains a NUL character"):
        LocalSandbox().run_test(job)


def test_a_sandbox_that_cannot_start_exits_5_with_a_clear_message(
    agent_env: dict[str, str], write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    # Run the agent where creating user namespaces is forbidden, so its bwrap cannot start.
    no_userns = [
        str(bwrap_executable()),
        "--unshare-user",
        "--disable-userns",
        "--dev-bind",
        "/",
        "/",
        "--",
    ]

    done = subprocess.run(
        [*no_userns, str(AGENT), "run", "--plan", str(plan), "--json"],
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 5, done.stdout + done.stderr
    assert "sandbox error: the sandbox could not be created" in done.stderr
    assert "Traceback" not in done.stderr
    error = eval_json(done.stdout)["error"]
    assert error["kind"] == "sandbox"
    assert error["sandbox_id"].startswith("sbx-")
    assert list((Path(agent_env["TMPDIR"])).iterdir()) == []

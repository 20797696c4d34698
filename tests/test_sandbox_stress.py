"""A test that misbehaves with its output, its children or its terminal still gets a prompt,
truthful result, and the sandbox holds nothing of the agent's but its output pipe.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from conftest import AGENT, host_processes_with

from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox

CORRECT_ADD = "\n\ndef add(left, right):\n    return left + right\n"


def calculator(body: str) -> str:
    """A ``calculator.py`` that runs ``body`` when imported, then adds correctly."""
    return "import os, subprocess, sys, time\n" + textwrap.dedent(body) + CORRECT_ADD


def run(body: str, timeout: float = 10) -> SandboxOutcome:
    seed = calculator_seed()
    files = seed.read_files()
    files["calculator.py"] = calculator(body).encode()
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        limits=attrs.evolve(seed.limits, test_timeout_seconds=timeout),
    )
    return LocalSandbox().run_test(job)


def test_output_that_is_not_utf8_is_kept_with_replacement_characters() -> None:
    outcome = run('sys.stdout.buffer.write(b"bytes \\xff\\xfe\\xc3 end\\n"); sys.stdout.flush()')

    assert outcome.tests_passed, outcome.output
    assert "bytes \ufffd\ufffd\ufffd end" in outcome.output


def test_a_child_that_keeps_the_output_open_does_not_hold_the_run() -> None:
    # The test ends while its child still holds the pipe: the run must end with the test,
    # not with the child (or the timeout).
    tag = f"sca-{uuid.uuid4().hex}"
    outcome = run(
        f"""
        subprocess.Popen(["sh", "-c", "sleep 30", "{tag}"], start_new_session=True)
        """
    )

    assert outcome.tests_passed, outcome.output
    assert not outcome.timed_out
    assert host_processes_with(tag) == []


def test_a_test_that_closes_its_output_still_gets_its_exit_code() -> None:
    outcome = run('print("closing", flush=True)\nos.close(1)\nos.close(2)\n')

    assert not outcome.timed_out
    assert outcome.exit_code == 120  # Python's code for output it could not flush
    assert outcome.output.startswith("closing\n")


def test_a_timeout_of_a_tenth_of_a_second_is_honoured() -> None:
    outcome = run("time.sleep(30)", timeout=0.1)

    assert outcome.timed_out
    assert outcome.limit_hit == "timeout"
    assert outcome.exit_code is None


FDS_AND_TERMINAL = """
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))[:-1]  # the last one is the listing
print("FDS", json.dumps({fd: os.readlink(f"/proc/self/fd/{fd}") for fd in fds}), flush=True)
try:
    os.open("/dev/tty", os.O_RDWR)
except OSError as error:
    print("TTY refused", error.errno, flush=True)
else:
    print("TTY opened", flush=True)
"""

#: Start the agent in a session of its own whose controlling terminal is a fresh pty.
WITH_A_TERMINAL = """
import os, sys
leader, follower = os.openpty()
os.set_inheritable(leader, True)  # closing the pty's other end would hang the agent up
os.setsid()
terminal = os.open(os.ttyname(follower), os.O_RDWR)  # after setsid: becomes the controlling tty
os.dup2(terminal, 0)
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_the_sandbox_gets_neither_the_agents_terminal_nor_any_other_descriptor(
    agent_env: dict[str, str], write_plan: Callable[..., Path], walls_seed: Path
) -> None:
    # Seen from a process the test starts: the harness, which runs the test in the
    # sandbox's PID 1, holds its report's pipe (close-on-exec) and nothing of the agent's.
    probe = "import json, os\n" + FDS_AND_TERMINAL
    body = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {probe!r}])\n"
    plan = write_plan({"files": [{"path": "calculator.py", "content": calculator(body)}]})

    done = subprocess.run(
        [
            *(sys.executable, "-c", WITH_A_TERMINAL, str(AGENT), "run", "--plan", str(plan)),
            *("--seed", str(walls_seed), "--json"),
        ],
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    output = json.loads(done.stdout)["test_output"]
    fds = json.loads(next(line[4:] for line in output.splitlines() if line.startswith("FDS ")))
    assert fds["0"] == "/dev/null"
    assert fds["1"].startswith("pipe:")
    assert fds["2"] == fds["1"]
    assert sorted(fds) == ["0", "1", "2"]
    assert "TTY refused 6" in output  # ENXIO: no controlling terminal


def test_a_timeout_that_ends_before_the_sandbox_started_is_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a loaded machine a tiny timeout can pass before bwrap has started the test: the
    # wall clock counts from the start, so that is the test's timeout, not a broken sandbox.
    from sandboxed_coding_agent.plugins import local_sandbox

    real = local_sandbox.run_sandbox

    def slow_to_start(argv: list[str], **kwargs: object) -> object:
        return real(["/bin/sh", "-c", 'sleep 5; exec "$@"', "slow", *argv], **kwargs)

    monkeypatch.setattr(local_sandbox, "run_sandbox", slow_to_start)
    outcome = run("pass", timeout=0.2)

    assert outcome.timed_out
    assert outcome.limit_hit == "timeout"
    assert outcome.exit_code is None

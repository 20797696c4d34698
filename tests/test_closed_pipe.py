"""A reader that goes away (``agent ... | head``): the agent stops like a Unix tool, exit 141.

Each test runs the real ``agent`` with its stdout (or stderr) on a real pipe
whose reading end is closed early, and repeats the run, since whether a write
meets the closed pipe depends on timing. What must never happen: exit 1 as if
the test had failed, a traceback, "Exception ignored ... BrokenPipeError".
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, FIXED_CALCULATOR

EXIT_OUTPUT_CLOSED = 141
WritePlan = Callable[[Any], Path]

#: What the agent may say on stderr while it works; anything else is a complaint.
PROGRESS = ("agent: testing in runner", "agent: sandbox ", "agent: listing the unpatched seed's")


@pytest.fixture
def fix(write_plan: WritePlan) -> Path:
    # A large test output would only widen the race; the diff and summary are enough.
    return write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})


def start(agent_env: dict[str, str], *args: str, **streams: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(AGENT), *args], env=agent_env, **streams)


def complaints(stderr: bytes) -> list[str]:
    lines = stderr.decode("utf-8", "replace").splitlines()
    return [line for line in lines if not line.startswith(PROGRESS)]


def test_json_into_a_reader_that_never_reads_exits_141_and_says_nothing(
    agent_env: dict[str, str], fix: Path
) -> None:
    for _ in range(3):
        agent = start(
            agent_env, "run", "--plan", str(fix), "--json", stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        assert agent.stdout is not None
        agent.stdout.close()  # `agent ... --json | true`
        _, stderr = agent.communicate(timeout=120)

        assert agent.returncode == EXIT_OUTPUT_CLOSED, stderr
        assert complaints(stderr) == []


def test_summary_into_head_exits_0_or_141_and_never_1(agent_env: dict[str, str], fix: Path) -> None:
    for _ in range(5):
        agent = start(
            agent_env, "run", "--plan", str(fix), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert agent.stdout is not None
        first = agent.stdout.readline()  # `agent ... | head -1`
        agent.stdout.close()
        _, stderr = agent.communicate(timeout=120)

        assert first.startswith(b"tests passed")
        assert agent.returncode in (0, EXIT_OUTPUT_CLOSED), stderr
        assert complaints(stderr) == []


def test_a_closed_stderr_ends_the_run_quietly_too(agent_env: dict[str, str], fix: Path) -> None:
    for _ in range(3):
        agent = start(
            agent_env, "run", "--plan", str(fix), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert agent.stderr is not None
        agent.stderr.close()  # `agent ... 2>&1 | true`, the progress lines meet a closed pipe
        stdout, _ = agent.communicate(timeout=120)

        assert agent.returncode == EXIT_OUTPUT_CLOSED
        assert b"Traceback" not in stdout

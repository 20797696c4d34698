"""A caller's closed standard input, output or error changes nothing a sandbox is given.

A descriptor the agent opens takes the lowest free number; with 0, 1 or 2
closed, a seed file's descriptor would take it, and the sandbox's own standard
streams would be put over it: the file would arrive empty or as the output
pipe, and the verdict would be wrong (a broken plan once passed this way).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import AGENT, FIXED_CALCULATOR

from sandboxed_coding_agent.core.model import SandboxJob
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox

BROKEN = "def add(left, right):\n    return left * 100\n"


def plan_file(tmp_path: Path, content: str) -> Path:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"files": [{"path": "calculator.py", "content": content}]}))
    return plan


def agent_with(closed: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``agent ARGS`` started by a shell with ``closed`` (``<&-``, ``>&-``, ``2>&-``) applied."""
    return subprocess.run(
        ["bash", "-c", f'exec "$0" "$@" {closed}', str(AGENT), *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_broken_plan_fails_with_the_callers_input_closed(
    tmp_path: Path, agent_env: dict[str, str]
) -> None:
    done = agent_with(
        "<&-", "run", "--plan", str(plan_file(tmp_path, BROKEN)), "--json", env=agent_env
    )

    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["tests_passed"] is False
    assert "Ran 1 test" in result["test_output"]


@pytest.mark.parametrize("closed", ["<&-", ">&-", "2>&-", ">&- 2>&-"])
def test_a_fixing_plan_passes_with_a_standard_stream_closed(
    closed: str, tmp_path: Path, agent_env: dict[str, str]
) -> None:
    done = agent_with(
        closed, "run", "--plan", str(plan_file(tmp_path, FIXED_CALCULATOR)), env=agent_env
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [["run", "--json"], ["seeds", "show", "calculator", "--json"]])
def test_json_with_the_output_closed_is_no_traceback(
    command: list[str], tmp_path: Path, agent_env: dict[str, str]
) -> None:
    args = (
        [*command, "--plan", str(plan_file(tmp_path, FIXED_CALCULATOR))]
        if command[0] == "run"
        else command
    )

    done = agent_with(">&-", *args, env=agent_env)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def descriptor_0_closed() -> Iterator[None]:
    kept = os.dup(0)
    os.close(0)
    try:
        yield
    finally:
        os.dup2(kept, 0)
        os.close(kept)


@pytest.mark.usefixtures("descriptor_0_closed")
@pytest.mark.parametrize(("content", "passes"), [(FIXED_CALCULATOR, True), (BROKEN, False)])
def test_the_runner_hands_over_intact_files_when_descriptor_0_is_free(
    content: str, passes: bool
) -> None:
    seed = calculator_seed()
    files = {**seed.read_files(), "calculator.py": content.encode()}
    job = SandboxJob(seed=seed.name, files=files, test_command=seed.test_command)

    outcome = LocalSandbox().run_test(job)

    assert outcome.tests_passed is passes, outcome.output
    assert "Ran 1 test" in outcome.output


@pytest.mark.parametrize(
    "args", [["--help"], ["seeds", "--help"], ["run", "--bogus"], ["run", "--bogus", "--json"]]
)
def test_help_and_usage_errors_into_a_closed_pipe_exit_141(
    args: list[str], agent_env: dict[str, str]
) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the agent writes a byte
    try:
        done = subprocess.run(
            [str(AGENT), *args], env=agent_env, stdout=write, stderr=write, timeout=60, check=False
        )
    finally:
        os.close(write)

    assert done.returncode == 141

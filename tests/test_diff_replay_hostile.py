"""Run records from anyone: `agent diff` and `agent replay` trust a record no further than a
plan file. Each hostile record is one clear usage error (exit 2), never a traceback, exit 70,
a patch that writes outside the seed's editable files, or a replay with checks switched off."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, FIXED_CALCULATOR, AgentRun, FakeProvider

RunAgent = Callable[..., AgentRun]
OTHER_RUN = "run-00000000000000ff"


def records_folder(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sandboxed-coding-agent" / "run-records"


def agent(agent_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with no provider variables: diff and replay need none."""
    env = {k: v for k, v in agent_env.items() if not k.startswith("CODING_AGENT_")}
    return subprocess.run(
        [str(AGENT), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def assert_usage_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert "internal error" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


@pytest.fixture
def record(provider: FakeProvider, run_agent: RunAgent, tmp_path: Path) -> dict[str, Any]:
    """The record of a passing calculator run, as JSON."""
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    run = run_agent("run", "--json")
    assert run.returncode == 0, run.stderr
    path = records_folder(tmp_path) / f"{run.json()['run_id']}.json"
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def save(tmp_path: Path, record: dict[str, Any], name: str = "edited.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(record), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("../../etc/passwd", "path-segment"),
        ("/etc/passwd", "path-segment"),
        (".git/hooks/pre-commit", "path-not-editable"),
        ("check_calculator.py", "path-not-editable"),
        ("calculator.py\n+++ b/evil.sh\nnew file mode 100755", "path-control"),
        ("calculator\x1b[2J.py", "path-control"),
    ],
)
def test_diff_refuses_a_recorded_patch_the_contract_refuses(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path, path: str, rule: str
) -> None:
    record["tests"][0]["plan"]["files"][0]["path"] = path
    record["originals"][path] = "old\n"

    done = agent(agent_env, "diff", save(tmp_path, record))

    assert_usage_error(done, "breaks the patch contract", f"patch-contract:{rule}")


def test_diff_refuses_content_with_a_lone_surrogate(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    record["tests"][0]["plan"]["files"][0]["content"] = "SURROGATE"
    edited = save(tmp_path, record)
    text = Path(edited).read_text(encoding="utf-8")
    Path(edited).write_text(text.replace("SURROGATE", "\\ud800"), encoding="utf-8")

    done = agent(agent_env, "diff", edited)

    assert_usage_error(done, "damaged", "lone surrogate", "record.tests[0].plan.files[0].content")


@pytest.mark.parametrize(
    ("chosen", "tests", "expected"),
    [
        (99, None, "chosen_test is 99, but it holds tests 0 to 0"),
        (-1, None, "chosen_test is -1"),  # never "the last one"
        (0, [], "chosen_test is 0, but it holds no test"),
    ],
)
def test_diff_and_replay_refuse_a_chosen_test_that_is_no_test(
    record: dict[str, Any],
    agent_env: dict[str, str],
    tmp_path: Path,
    chosen: int,
    tests: list[Any] | None,
    expected: str,
) -> None:
    record["chosen_test"] = chosen
    if tests is not None:
        record["tests"] = tests
    edited = save(tmp_path, record)

    for command in ("diff", "replay"):
        assert_usage_error(agent(agent_env, command, edited), "damaged", expected)


def test_a_record_must_hold_the_run_it_is_asked_for(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    asked = record["run_id"]
    record["run_id"] = OTHER_RUN
    (records_folder(tmp_path) / f"{asked}.json").write_text(json.dumps(record), encoding="utf-8")
    renamed = save(tmp_path, record, f"{asked}.json")
    record["run_id"] = "../../x\x1b[31m"
    hostile = save(tmp_path, record)

    for reference in (asked, renamed):
        for command in ("diff", "replay"):
            assert_usage_error(
                agent(agent_env, command, reference),
                f"asked for as run {asked} but holds run {OTHER_RUN}",
            )
    for command in ("diff", "replay"):
        assert_usage_error(agent(agent_env, command, hostile), "is not a run ID")


def test_diff_still_prints_a_recorded_patch_the_contract_accepts(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    done = agent(agent_env, "diff", save(tmp_path, record, f"{record['run_id']}.json"))

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("diff --git a/calculator.py b/calculator.py\n")

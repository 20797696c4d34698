"""Run records: every `agent run` keeps one; `agent replay` re-tests it, `agent diff` prints it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import AGENT, API_KEY, FIXED_CALCULATOR, AgentRun, FakeProvider

from sandboxed_coding_agent.core.records.run_records import seed_hash
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]


def record_file(tmp_path: Path, run_id: str) -> Path:
    return tmp_path / "state" / "sandboxed-coding-agent" / "run-records" / f"{run_id}.json"


def without_provider(agent_env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in agent_env.items() if not k.startswith("CODING_AGENT_")}


def run_without_provider(agent_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AGENT), *args],
        env=without_provider(agent_env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def recorded_run(provider: FakeProvider, run_agent: RunAgent, tmp_path: Path) -> dict[str, Any]:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    run = run_agent("run", "--json")
    assert run.returncode == 0, run.stderr
    result = run.json()
    return result  # type: ignore[no-any-return]


def test_run_keeps_a_record_of_seed_plans_tests_policies_and_plugins(
    recorded_run: dict[str, Any], tmp_path: Path
) -> None:
    path = record_file(tmp_path, recorded_run["run_id"])
    text = path.read_text(encoding="utf-8")
    record = json.loads(text)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert record["format"] == 1
    assert record["run_id"] == recorded_run["run_id"]
    seed = calculator_seed()
    assert record["seed"]["name"] == "calculator"
    assert record["seed"]["sha256"] == seed_hash(seed.read_files())
    assert record["instruction"] == seed.default_prompt
    assert [p["plan"]["files"][0]["content"] for p in record["plans"]] == [FIXED_CALCULATOR]
    assert record["plans"][0]["planner_task_id"] == recorded_run["planner_task_id"]
    [test] = record["tests"]
    assert test["plan_index"] == 0
    assert test["outcome"]["sandbox_id"] == recorded_run["sandbox_id"]
    assert test["outcome"]["exit_code"] == 0
    assert record["chosen_test"] == 0
    assert "patch-contract" in [p["name"] for p in record["policies"]]
    assert record["limits"]["test_timeout_seconds"] == seed.limits.test_timeout_seconds
    assert {"local_sandbox", "openai_planner"} <= {p["name"] for p in record["plugins"]}
    assert all(p["version"] for p in record["plugins"] if p["name"] == "local_sandbox")
    assert record["result"]["tests_passed"] is True
    assert API_KEY not in text


def test_a_failed_run_is_recorded_with_its_error(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply(401, {"error": {"message": "bad key"}})
    run = run_agent("run", "--json")
    assert run.returncode == 3
    [path] = (tmp_path / "state" / "sandboxed-coding-agent" / "run-records").iterdir()
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["error"]["kind"] == "provider"
    assert record["tests"] == []
    assert record["result"] is None


def test_replay_passes_with_no_provider_configured(
    recorded_run: dict[str, Any], provider: FakeProvider, agent_env: dict[str, str]
) -> None:
    asked = len(provider.requests)
    done = run_without_provider(agent_env, "replay", recorded_run["run_id"], "--json")

    assert done.returncode == 0, done.stderr
    replayed = json.loads(done.stdout)
    assert replayed["matches"] is True
    [test] = replayed["tests"]
    assert test["recorded_passed"] is True
    assert test["passed"] is True
    assert test["sandbox_id"] != recorded_run["sandbox_id"]  # a fresh sandbox
    assert len(provider.requests) == asked


def test_replay_says_when_a_verdict_differs(
    recorded_run: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    path = record_file(tmp_path, recorded_run["run_id"])
    record = json.loads(path.read_text(encoding="utf-8"))
    record["tests"][0]["outcome"]["exit_code"] = 1  # as if it had failed when recorded
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(record), encoding="utf-8")

    done = run_without_provider(agent_env, "replay", str(edited))

    assert done.returncode == 1, done.stderr
    assert "recorded failed, now passed" in done.stdout
    assert "DIFFER" in done.stdout


def test_replay_numbers_tests_by_candidate_and_attempt_not_by_when_they_ended(
    provider: FakeProvider, run_agent: RunAgent, agent_env: dict[str, str], tmp_path: Path
) -> None:
    from conftest import plan_json

    wrong = "def add(left, right):\n    return left * right\n"
    for content in (wrong, wrong, FIXED_CALCULATOR, FIXED_CALCULATOR):
        provider.reply_content(plan_json(("calculator.py", content)))
    run = run_agent("run", "--candidates", "2", "--attempts", "2", "--jobs", "1", "--json")
    assert run.returncode == 0, run.stderr
    path = record_file(tmp_path, run.json()["run_id"])
    record = json.loads(path.read_text(encoding="utf-8"))
    assert len(record["tests"]) == 4
    # As if the sandboxes had ended in the other order (parallel candidates end in any).
    record["tests"].reverse()
    record["chosen_test"] = 3 - record["chosen_test"]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(record), encoding="utf-8")

    done = run_without_provider(agent_env, "replay", str(edited))

    assert done.returncode == 0, done.stdout + done.stderr
    places = [line.split(": calculator.py")[0] for line in done.stdout.splitlines()[:4]]
    assert places == [
        "test 1 (candidate 1, attempt 1",
        "test 2 (candidate 1, attempt 2",
        "test 3 (candidate 2, attempt 1",
        "test 4 (candidate 2, attempt 2",
    ]
    assert done.stdout.count("the run's verdict") == 1


def test_replay_refuses_a_seed_whose_files_changed_unless_forced(
    recorded_run: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    path = record_file(tmp_path, recorded_run["run_id"])
    record = json.loads(path.read_text(encoding="utf-8"))
    record["seed"]["sha256"] = "0" * 64
    path.write_text(json.dumps(record), encoding="utf-8")

    refused = run_without_provider(agent_env, "replay", recorded_run["run_id"])
    forced = run_without_provider(agent_env, "replay", recorded_run["run_id"], "--force")

    assert refused.returncode == 2
    assert "has changed since run" in refused.stderr
    assert forced.returncode == 0, forced.stderr


def test_replay_of_an_unknown_or_malformed_run_is_a_usage_error(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    unknown = run_without_provider(agent_env, "replay", "run-0123456789abcdef")
    malformed = run_without_provider(agent_env, "replay", "../../etc/passwd-ish")
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"format": 1, "run_id": 5}', encoding="utf-8")
    structured = run_without_provider(agent_env, "replay", str(damaged))

    assert unknown.returncode == 2
    assert "no record of run" in unknown.stderr
    assert malformed.returncode == 2
    assert "not a run ID" in malformed.stderr
    assert structured.returncode == 2
    assert "damaged" in structured.stderr


def test_diff_prints_a_patch_git_apply_accepts(
    provider: FakeProvider, run_agent: RunAgent, agent_env: dict[str, str], tmp_path: Path
) -> None:
    # No newline at the end: the patch has to say so, or git would apply another file.
    fixed = FIXED_CALCULATOR.rstrip("\n")
    provider.reply_plan(("calculator.py", fixed))
    run = run_agent("run", "--json")
    assert run.returncode == 0, run.stderr

    done = run_without_provider(agent_env, "diff", run.json()["run_id"])

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("diff --git a/calculator.py b/calculator.py\n")
    repo = tmp_path / "repo"
    shutil.copytree(calculator_seed().root, repo)
    patch = tmp_path / "change.patch"
    patch.write_text(done.stdout, encoding="utf-8")
    git = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=git)
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True, env=git)
    subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True, env=git)
    assert (repo / "calculator.py").read_text(encoding="utf-8") == fixed


def test_diff_of_a_run_without_a_tested_patch_says_so(
    provider: FakeProvider, run_agent: RunAgent, agent_env: dict[str, str], tmp_path: Path
) -> None:
    provider.reply(401, {"error": {"message": "bad key"}})
    assert run_agent("run").returncode == 3
    [path] = (tmp_path / "state" / "sandboxed-coding-agent" / "run-records").iterdir()

    done = run_without_provider(agent_env, "diff", path.stem)

    assert done.returncode == 2
    assert "has no tested patch" in done.stderr


def test_a_record_never_holds_the_key_even_when_a_text_in_it_does(
    recorded_run: dict[str, Any], tmp_path: Path
) -> None:
    from sandboxed_coding_agent.core.records.run_records import read_run_record, write_run_record

    environ = {"XDG_STATE_HOME": str(tmp_path / "state"), "CODING_AGENT_API_KEY": API_KEY}
    record = read_run_record(recorded_run["run_id"], environ)
    leaky = attrs.evolve(record, instruction=f"use {API_KEY} and {json.dumps(API_KEY)}")

    path = write_run_record(leaky, environ)

    text = path.read_text(encoding="utf-8")
    assert API_KEY not in text
    assert "use [redacted]" in text


def test_a_graded_runs_record_keeps_the_grade_and_replay_compares_it(
    run_agent: RunAgent, write_plan: Callable[..., Path], agent_env: dict[str, str], tmp_path: Path
) -> None:
    from test_grading import HALF_FIXED, graded_seed_folder

    seed = graded_seed_folder(tmp_path / "graded")
    plan = write_plan({"files": [{"path": "calculator.py", "content": HALF_FIXED}]})
    run = run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json")
    assert run.returncode == 1, run.stderr
    path = record_file(tmp_path, run.json()["run_id"])
    record = json.loads(path.read_text(encoding="utf-8"))
    [test] = record["tests"]
    assert test["outcome"]["grade"] == record["result"]["grade"] == run.json()["grade"]
    assert test["outcome"]["grade"]["resolution"] == "PARTIAL"

    same = run_without_provider(agent_env, "replay", str(path), "--json")

    assert same.returncode == 0, same.stderr
    [replayed] = json.loads(same.stdout)["tests"]
    assert replayed["matches"] is True
    assert replayed["recorded_grade"] == replayed["grade"] == test["outcome"]["grade"]

    # As if the run had graded it NO: failed both times, but not the same tests.
    grade = test["outcome"]["grade"]
    grade["fail_to_pass"]["failed"] += grade["fail_to_pass"]["passed"]
    grade["fail_to_pass"]["passed"] = []
    grade["resolution"] = "NO"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(record), encoding="utf-8")

    different = run_without_provider(agent_env, "replay", str(edited))

    assert different.returncode == 1, different.stderr
    assert "recorded failed, graded NO (fail_to_pass 0/2, pass_to_pass 1/1), now failed" in (
        different.stdout
    )
    assert "graded PARTIAL (fail_to_pass 1/2, pass_to_pass 1/1): DIFFERENT" in different.stdout

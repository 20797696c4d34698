"""What a user sees of a provider call: result fields, records, ``agent logs``, never the key."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, FIXED_CALCULATOR, MODEL, AgentRun, FakeProvider, completion, plan_json

from sandboxed_coding_agent.core.errors import UsageError
from sandboxed_coding_agent.core.records import planner_calls

RunAgent = Callable[..., AgentRun]
PLAN = plan_json(("calculator.py", FIXED_CALCULATOR))


def runs_dir(agent_env: dict[str, str]) -> Path:
    return Path(agent_env["XDG_STATE_HOME"]) / "sandboxed-coding-agent" / "runs"


def task_id_of(run: AgentRun) -> str:
    data = run.json()
    task_id = data["error"]["planner_task_id"] if "error" in data else data["planner_task_id"]
    assert isinstance(task_id, str)
    return task_id


def logs_json(run_agent: RunAgent, task_id: str) -> dict[str, Any]:
    shown = run_agent("logs", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert isinstance(data, dict)
    return data


# --- the result ---------------------------------------------------------------------------------


def test_result_reports_tokens_response_id_and_provider_time(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply(200, completion(PLAN, id="chatcmpl-abc123"))

    run = run_agent("run", "--json")

    assert run.returncode == 0, run.stderr
    result = run.json()
    assert result["usage"] == {"prompt_tokens": 321, "completion_tokens": 45}
    assert result["response_id"] == "chatcmpl-abc123"
    assert result["model"] == MODEL
    assert isinstance(result["planner_seconds"], float)
    assert result["planner_seconds"] >= 0


def test_summary_shows_tokens_response_id_provider_time_and_record(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply(200, completion(PLAN, id="chatcmpl-abc123"))

    run = run_agent("run")

    assert run.returncode == 0, run.stderr
    assert "tokens:          321 prompt, 45 completion" in run.stdout
    assert "response chatcmpl-abc123 from test-model" in run.stdout
    assert "provider call:" in run.stdout
    assert "agent logs plan-" in run.stdout


# --- records and agent logs ---------------------------------------------------------------------


def test_successful_call_is_recorded_and_shown_by_agent_logs(
    provider: FakeProvider, run_agent: RunAgent, agent_env: dict[str, str]
) -> None:
    provider.reply(200, completion(PLAN, id="chatcmpl-abc123"))
    # Not ASCII, so a size counted in escaped JSON would differ from the bytes sent.
    run = run_agent("run", "Fix calculator.add \u2014 the test is right \u2713", "--json")
    task_id = task_id_of(run)

    path = runs_dir(agent_env) / f"{task_id}.json"
    assert path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

    record = logs_json(run_agent, task_id)
    assert record["planner_task_id"] == task_id
    assert record["outcome"] == "ok"
    assert record["details"]["request"]["url"] == provider.base_url + "/chat/completions"
    assert record["details"]["request"]["model"] == MODEL
    assert record["details"]["request"]["body_bytes"] == len(provider.requests[0].body)
    assert record["details"]["request"]["seed_files"] == 2
    assert record["details"]["request"]["response_format"] == "json_object"
    assert [a["status"] for a in record["details"]["attempts"]] == [200]
    assert record["response_id"] == "chatcmpl-abc123"
    assert record["usage"] == {"prompt_tokens": 321, "completion_tokens": 45}
    assert "return left + right" in record["details"]["response_excerpt"]

    text = run_agent("logs", task_id)
    assert text.returncode == 0, text.stderr
    assert f"planner task {task_id} (openai)" in text.stdout
    assert "attempt 1: HTTP 200 (ok)" in text.stdout
    assert "tokens:   321 prompt, 45 completion" in text.stdout


def test_failed_call_record_shows_every_attempt_and_the_error(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    slow_down = json.dumps({"error": {"message": "slow down"}}).encode()
    provider.reply(429, slow_down, headers={"Retry-After": "0"})
    provider.reply(503, b"upstream gone", headers={"Retry-After": "0"})
    provider.reply(401, {"error": {"message": "bad key"}})

    run = run_agent("run", "--json")

    assert run.returncode == 3, run.stderr
    task_id = task_id_of(run)
    assert f"agent logs {task_id}" in run.stderr
    record = logs_json(run_agent, task_id)
    assert record["outcome"] == "provider-error"
    assert "refused the API key" in record["error"]
    assert [(a["number"], a["status"], a["outcome"]) for a in record["details"]["attempts"]] == [
        (1, 429, "http-error"),
        (2, 503, "http-error"),
        (3, 401, "http-error"),
    ]
    assert [a["detail"] for a in record["details"]["attempts"]] == [
        "slow down",
        "upstream gone",
        "bad key",
    ]
    assert all(a["seconds"] >= 0 for a in record["details"]["attempts"])

    text = run_agent("logs", task_id).stdout
    assert "attempt 1: HTTP 429 (http-error)" in text
    assert "attempt 3: HTTP 401 (http-error)" in text
    assert "error:    the provider refused the API key" in text


def test_call_that_got_no_answer_is_recorded(
    run_agent: RunAgent, unused_port: int, agent_env: dict[str, str]
) -> None:
    url = f"http://127.0.0.1:{unused_port}/v1"
    run = run_agent("run", "--json", "--provider-retries", "0", env={"CODING_AGENT_BASE_URL": url})

    assert run.returncode == 3
    record = logs_json(run_agent, task_id_of(run))
    assert record["details"]["request"]["url"] == url + "/chat/completions"
    assert [(a["status"], a["outcome"]) for a in record["details"]["attempts"]] == [
        (None, "connection-error")
    ]
    assert "refused" in record["details"]["attempts"][0]["detail"]


def test_state_directory_that_cannot_be_written_is_one_warning_per_record_and_the_run_goes_on(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    not_a_folder = tmp_path / "state-file"
    not_a_folder.write_text("")
    provider.reply(200, completion(PLAN))

    run = run_agent("run", "--json", env={"XDG_STATE_HOME": str(not_a_folder)})

    assert run.returncode == 0, run.stderr
    assert run.json()["tests_passed"] is True
    warnings = [line for line in run.stderr.splitlines() if "warning" in line]
    # One line for the planner call's record (agent logs), one for the run's (agent replay).
    assert len(warnings) == 2, warnings
    assert all(f"could not be kept in {not_a_folder}" in line for line in warnings)
    assert f"agent: warning: the record of planner task {task_id_of(run)}" in warnings[0]
    assert "`agent replay` will not find it" in warnings[1]
    assert "agent logs" not in run.stdout


def test_answer_with_lone_surrogates_is_used_and_recorded(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    # json.dumps writes these as \ud800 escapes; json.loads turns them into text no
    # UTF-8 file or terminal can take.
    provider.reply(200, completion(PLAN + "\n\ud800", id="chatcmpl-\udcff", model="m\ud800"))

    run = run_agent("run", "--json")

    assert run.returncode == 0, run.stderr
    result = run.json()
    assert (result["response_id"], result["model"]) == ("chatcmpl-?", "m?")
    record = logs_json(run_agent, result["planner_task_id"])
    assert record["details"]["response_excerpt"].endswith("\n?")
    assert run_agent("logs", result["planner_task_id"]).returncode == 0


def test_logs_shows_control_characters_of_the_answer_escaped(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply(200, completion(PLAN + "\n\x1b]0;pwned\x07\x08\x08\rdone"))
    task_id = task_id_of(run_agent("run", "--json"))

    shown = run_agent("logs", task_id)

    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout
    assert "\x07" not in shown.stdout
    assert "\\x1b]0;pwned\\x07\\x08\\x08\\rdone" in shown.stdout
    assert logs_json(run_agent, task_id)["details"]["response_excerpt"].endswith(
        "\x07\x08\x08\rdone"
    )


def test_records_default_to_the_xdg_state_home_under_home(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    provider.reply(401, {"error": {"message": "nope"}})
    env = {"HOME": str(home), "XDG_STATE_HOME": ""}

    run = run_agent("run", "--json", env=env)

    task_id = task_id_of(run)
    assert (home / ".local/state/sandboxed-coding-agent/runs" / f"{task_id}.json").is_file()
    assert run_agent("logs", task_id, env=env).returncode == 0


def test_relative_xdg_state_home_is_ignored(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "XDG_STATE_HOME": "relative/state"}

    assert (
        planner_calls.runs_directory(environ)
        == tmp_path / ".local/state/sandboxed-coding-agent/runs"
    )


@pytest.mark.parametrize(
    "task_id",
    [
        "../../../etc/passwd",
        "../secret",
        "plan-0/../../x",
        "..",
        ".hidden",
        "/etc/passwd",
        "plan.json",
        "plan\x00x",
        "x" * 200,
        "-rf",
    ],
    ids=[
        "traversal",
        "sibling",
        "nested",
        "dotdot",
        "hidden",
        "absolute",
        "dot",
        "nul",
        "long",
        "dash",
    ],
)
def test_logs_refuses_ids_that_could_name_another_file(
    run_agent: RunAgent, agent_env: dict[str, str], task_id: str
) -> None:
    secret = runs_dir(agent_env).parent / "secret.json"
    secret.parent.mkdir(parents=True)
    secret.write_text('{"planted": "do not show"}')

    run = run_agent("logs", "--", task_id) if "\x00" not in task_id else None
    if run is None:  # argv cannot carry NUL; check the rule itself
        with pytest.raises(UsageError):
            planner_calls.check_task_id(task_id)
        return

    assert run.returncode == 2, run.stderr
    assert "not a planner task ID" in run.stderr
    assert "do not show" not in run.stdout + run.stderr
    assert "Traceback" not in run.stderr


def test_logs_of_an_unknown_task_is_a_usage_error(run_agent: RunAgent) -> None:
    run = run_agent("logs", "plan-0123456789abcdef")

    assert run.returncode == 2
    assert "no record of planner task 'plan-0123456789abcdef'" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "content",
    ["not json at all", '{"planner_task_id": "plan-1"}', "[]", '{"format": 1, "extra": true}'],
    ids=["not-json", "incomplete", "not-object", "unknown-keys"],
)
def test_damaged_record_is_a_usage_error(
    run_agent: RunAgent, agent_env: dict[str, str], content: str
) -> None:
    folder = runs_dir(agent_env)
    folder.mkdir(parents=True)
    (folder / "plan-damaged.json").write_text(content)

    run = run_agent("logs", "plan-damaged", "--json")

    assert run.returncode == 2
    assert "is damaged" in run.stderr
    assert "Traceback" not in run.stderr
    assert json.loads(run.stdout)["error"]["kind"] == "usage"


# --- no sandbox after a provider failure --------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        {"status": 401, "body": b'{"error": {"message": "bad key"}}'},
        {"status": 200, "body": b"not json"},
        {"status": 200, "body": json.dumps(completion("no plan here, sorry")).encode()},
    ],
    ids=["refused", "not-json", "no-plan"],
)
def test_provider_failure_creates_no_sandbox(
    provider: FakeProvider, run_agent: RunAgent, reply: dict[str, Any]
) -> None:
    provider.reply(**reply)

    run = run_agent("run", "--json")

    assert run.returncode == 3, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "provider"
    assert error["sandbox_id"] is None
    assert error["planner_task_id"].startswith("plan-")
    assert "testing in runner" not in run.stderr
    assert run.sandboxes == []


# --- the key, nowhere -----------------------------------------------------------------------------


def test_api_key_appears_in_no_output_record_or_error(
    provider: FakeProvider, run_agent: RunAgent, agent_env: dict[str, str]
) -> None:
    echo = f"Incorrect API key provided: {API_KEY}. Authorization: Bearer {API_KEY}"
    scenarios: list[tuple[list[str], list[dict[str, Any]]]] = [
        (["run"], [{"status": 200, "body": json.dumps(completion(PLAN)).encode()}]),
        (["run", "--json"], [{"status": 200, "body": json.dumps(completion(PLAN)).encode()}]),
        (["run", "--json"], [{"status": 401, "body": json.dumps({"error": {"message": echo}})}]),
        (["run", "--debug"], [{"status": 401, "body": json.dumps({"error": {"message": echo}})}]),
        (["run"], [{"status": 404, "body": echo}]),
        (
            ["run", "--json"],
            [
                {"status": 429, "body": echo, "headers": {"Retry-After": "0"}},
                {"status": 500, "body": json.dumps({"detail": echo})},
            ],
        ),
        (["run", "--json"], [{"status": 200, "body": f"<html>{echo}</html>"}]),
        (["run", "--json"], [{"status": 200, "body": json.dumps(completion(echo))}]),
        (
            ["run", "--json"],
            [{"status": 200, "body": json.dumps(completion(f"```json\n{PLAN}\n```\n{echo}"))}],
        ),
        (
            ["run", "--json"],
            [
                {
                    "status": 400,
                    "body": json.dumps({"error": {"message": f"response_format {echo}"}}),
                }
            ],
        ),
        (["run"], [{"status": 200, "body": completion(plan_json((f"{API_KEY}.py", "x")))}]),
        (
            ["run", "--json"],
            [{"status": 200, "body": completion(plan_json(("calculator.py", echo)))}],
        ),
    ]
    seen: list[str] = []
    task_ids: list[str] = []
    for args, replies in scenarios:
        provider.replies.clear()
        for reply in replies:
            provider.reply(**reply)
        run = run_agent(*args, "--provider-retries", "1")
        assert ("Traceback" in run.stderr) == ("--debug" in args)
        seen += [run.stdout, run.stderr]
    for path in sorted(runs_dir(agent_env).iterdir()):
        task_ids.append(path.stem)
        seen.append(path.read_text())
    assert len(task_ids) == len(scenarios)
    for task_id in task_ids:
        for args in (["logs", task_id], ["logs", task_id, "--json"]):
            shown = run_agent(*args)
            assert shown.returncode == 0, shown.stderr
            seen += [shown.stdout, shown.stderr]

    # The key really went out, and really came back, so not finding it below means something.
    assert all(r.headers["Authorization"] == f"Bearer {API_KEY}" for r in provider.requests)
    assert len(provider.requests) >= len(scenarios)
    everything = "\n".join(seen)
    assert "[redacted]" in everything
    assert API_KEY not in everything
    assert API_KEY[-12:] not in everything

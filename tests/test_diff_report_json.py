"""`agent diff --json` and `agent report --json`: one JSON object a script reads, in the
shapes docs/cli.md documents."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from conftest import AGENT, FIXED_CALCULATOR, AgentRun
from test_report import a_result, a_run

from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]


def agent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    no_provider = {k: v for k, v in env.items() if not k.startswith("CODING_AGENT_")}
    return subprocess.run(
        [str(AGENT), *args], env=no_provider, capture_output=True, text=True, timeout=120
    )


def plan_run(agent_env: dict[str, str], tmp_path: Path, content: str) -> str:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"files": [{"path": "calculator.py", "content": content}]}))
    done = agent(agent_env, "run", "--seed", "calculator", "--plan", str(plan), "--json")
    assert done.returncode in (0, 1), done.stderr
    return str(json.loads(done.stdout)["run_id"])


def test_diff_json_gives_each_files_old_and_new_text_and_its_diff(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    run_id = plan_run(agent_env, tmp_path, FIXED_CALCULATOR)
    original = (calculator_seed().root / "calculator.py").read_text(encoding="utf-8")

    done = agent(agent_env, "diff", run_id, "--json")
    plain = agent(agent_env, "diff", run_id)

    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["run_id"] == run_id
    assert shown["passed"] is True
    assert shown["seed"] == "calculator"
    assert shown["patch"] == plain.stdout
    [one] = shown["files"]
    assert one["path"] == "calculator.py"
    assert one["old"] == original
    assert one["new"] == FIXED_CALCULATOR
    assert one["diff"] == plain.stdout  # one file: its diff is the whole patch


def test_diff_json_of_a_failed_run_says_so_and_an_error_is_a_json_error(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    run_id = plan_run(agent_env, tmp_path, FIXED_CALCULATOR.replace("+", "*"))

    done = agent(agent_env, "diff", run_id, "--json")
    missing = agent(agent_env, "diff", "run-00000000000000ff", "--json")

    assert json.loads(done.stdout)["passed"] is False
    assert missing.returncode == 2
    assert json.loads(missing.stdout)["error"]["kind"] == "usage"


def test_report_json_counts_outcomes_by_model_and_lists_every_task(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    lines = [
        a_result("a1", line=1, status="passed", model="a", result=a_run(tests_passed=True)),
        a_result("b1", line=2, status="failed", model="b", result=a_run(), tokens=10),
        a_result(
            "a2",
            line=3,
            status="provider-error",
            model="a",
            error={"kind": "provider", "message": "bad key"},
        ),
        a_result("d1", line=4, status="passed"),
    ]
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")

    run = run_agent("report", str(results), "--json")

    assert run.returncode == 0, run.stderr
    shown = run.json()
    assert shown["files"] == ["results.jsonl"]
    summary = shown["summary"]
    assert (summary["tasks"], summary["passed"], summary["pass_rate"]) == (4, 2, 0.5)
    assert summary["statuses"]["passed"] == 2
    assert summary["statuses"]["failed"] == 1
    assert summary["statuses"]["provider-error"] == 1
    assert summary["statuses"]["rejected"] == 0
    assert summary["resolutions"] is None  # no graded seed
    by_model = {m["model"]: (m["tasks"], m["passed"]) for m in shown["by_model"]}
    assert by_model == {"a": (2, 1), "b": (1, 0), None: (1, 1)}
    assert shown["by_seed"] == []  # one seed: nothing to compare, as on the page
    assert [(t["id"], t["status"], t["error"]) for t in shown["tasks"]] == [
        ("a1", "passed", None),
        ("b1", "failed", None),
        ("a2", "provider-error", "provider"),
        ("d1", "passed", None),
    ]
    assert shown["tasks"][1]["tokens"] == 10
    assert not list(tmp_path.glob("*.html"))


def test_report_json_sums_of_seconds_are_to_the_millisecond_as_the_results_say(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    attempt = {"number": 1, "verdict": "failed", "planner_seconds": 0.1, "sandbox_seconds": 0.2}
    lines = [
        a_result(name, line=n, seconds=seconds, result=a_run(attempts=[attempt]))
        for n, (name, seconds) in enumerate([("a", 0.1), ("b", 0.2)], start=1)
    ]
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")

    summary = run_agent("report", str(results), "--json").json()["summary"]

    # 0.1 + 0.2 is 0.30000000000000004 in floating point; a script reads 0.3.
    assert (summary["seconds"], summary["planner_seconds"]) == (0.3, 0.2)
    assert summary["sandbox_seconds"] == 0.4


def test_report_json_with_html_writes_the_page_and_prints_the_same_figures(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(a_result("x", status="passed") + "\n", encoding="utf-8")
    html = tmp_path / "report.html"

    run = run_agent("report", str(results), "--html", str(html), "--json")

    assert run.returncode == 0, run.stderr
    assert run.json()["summary"]["passed"] == 1
    assert run.json()["by_model"] == []
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_report_needs_html_or_json_and_a_damaged_file_is_a_json_error(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("not json\n", encoding="utf-8")

    neither = run_agent("report", str(results))
    damaged = run_agent("report", str(results), "--json")

    assert neither.returncode == 2
    assert "give --html FILE" in neither.stderr
    assert damaged.returncode == 2
    assert damaged.json()["error"]["kind"] == "usage"

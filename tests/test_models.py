"""A model per run and per task: `agent run --model`, a task line's `model`, and one batch
comparing models by pass rate."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    FIXED_CALCULATOR,
    MODEL,
    AgentRun,
    FakeProvider,
    RecordedRequest,
    Reply,
    completion,
    plan_json,
)

RunAgent = Callable[..., AgentRun]
BROKEN_CALCULATOR = FIXED_CALCULATOR.replace("left + right", "left - right")


def answer_by_model(provider: FakeProvider, plans: dict[str, str]) -> None:
    """The server answers each request with the calculator the model it names writes."""

    def record(request: RecordedRequest) -> Reply:
        provider.requests.append(request)
        model = request.json()["model"]
        content = plan_json(("calculator.py", plans[model]))
        return Reply(200, json.dumps(completion(content, model=model)).encode())

    provider._record = record  # type: ignore[method-assign]


def models_asked(provider: FakeProvider) -> list[str]:
    return [request.json()["model"] for request in provider.requests]


def write_tasks(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_run_with_model_asks_for_that_model_and_records_it(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_by_model(provider, {"m2": FIXED_CALCULATOR})

    run = run_agent("run", "--model", "m2", "--json", env={"CODING_AGENT_MODEL": ""})

    assert run.returncode == 0, run.stderr
    assert models_asked(provider) == ["m2"]  # CODING_AGENT_MODEL is not needed
    result = run.json()
    assert result["requested_model"] == "m2"
    assert result["model"] == "m2"
    record_file = tmp_path / "state" / "sandboxed-coding-agent" / "run-records"
    record = json.loads((record_file / f"{result['run_id']}.json").read_text(encoding="utf-8"))
    assert record["model"] == "m2"
    assert record["result"]["requested_model"] == "m2"


def test_run_without_model_asks_for_the_variables_model(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    answer_by_model(provider, {MODEL: FIXED_CALCULATOR})

    run = run_agent("run", "--json")

    assert run.returncode == 0, run.stderr
    assert models_asked(provider) == [MODEL]
    assert run.json()["requested_model"] is None


def test_run_refuses_a_bad_model_name_and_model_with_a_plan_file(
    provider: FakeProvider, run_agent: RunAgent, write_plan: Callable[..., Path]
) -> None:
    bad = run_agent("run", "--model", "m\x1b[2Jx")
    assert bad.returncode == 2, bad.stderr
    assert "--model must be a model name" in bad.stderr

    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    with_plan = run_agent("run", "--plan", str(plan), "--model", "m2")
    assert with_plan.returncode == 2, with_plan.stderr
    assert "--model needs a planner" in with_plan.stderr
    assert provider.requests == []


def test_batch_runs_each_task_with_its_model_and_compares_models(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_by_model(provider, {"a": FIXED_CALCULATOR, "b": BROKEN_CALCULATOR})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "a1", "model": "a"},
            {"seed": "calculator", "id": "b1", "model": "b"},
            {"seed": "calculator", "id": "a2", "model": "a"},
            {"seed": "calculator", "id": "b2", "model": "b"},
        ],
    )
    out = tmp_path / "results.jsonl"
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '[models."a"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
        '[models."b"]\ninput_per_mtok = 10\noutput_per_mtok = 20\n',
        encoding="utf-8",
    )

    run = run_agent("batch", str(tasks), "--out", str(out), "--prices", str(prices), "--json")

    assert run.returncode == 1, run.stderr  # the b tasks failed
    assert sorted(models_asked(provider)) == ["a", "a", "b", "b"]
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    found = {line["id"]: line for line in lines}
    assert {i: (r["model"], r["status"]) for i, r in found.items()} == {
        "a1": ("a", "passed"),
        "a2": ("a", "passed"),
        "b1": ("b", "failed"),
        "b2": ("b", "failed"),
    }
    assert found["b1"]["result"]["requested_model"] == "b"
    by_model = {m["model"]: m for m in run.json()["models"]}
    assert (by_model["a"]["passed"], by_model["a"]["tasks"]) == (2, 2)
    assert (by_model["b"]["passed"], by_model["b"]["tasks"]) == (0, 2)
    assert by_model["a"]["tokens"] == 2 * 366
    # Each call is 321 prompt and 45 completion tokens, priced as the model asked for.
    assert by_model["a"]["cost"] == pytest.approx(2 * (321 * 1 + 45 * 2) / 1e6)
    assert by_model["b"]["cost"] == pytest.approx(2 * (321 * 10 + 45 * 20) / 1e6)
    assert run.json()["spend"]["planner_calls"] == 4

    table = run_agent("batch", str(tasks), "--out", str(out), "--resume")
    rows = {line.split()[1]: line for line in table.stdout.splitlines() if line.startswith("model")}
    assert "2/2 passed (100.0%), 732 tokens, $0.0008" in rows["a"]
    assert "0/2 passed (0.0%)" in rows["b"]

    html = tmp_path / "report.html"
    report = run_agent("report", str(out), "--html", str(html))
    assert report.returncode == 0, report.stderr
    page = html.read_text(encoding="utf-8")
    assert "by model" in page
    assert "100.0% (2 of 2)" in page
    assert "0.0% (0 of 2)" in page
    assert "$0.0082" in page  # b's cost: 2 x (3,210 + 900) / 1e6


def test_batch_model_option_is_the_default_for_lines_without_one(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_by_model(provider, {"a": FIXED_CALCULATOR, "c": FIXED_CALCULATOR})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"seed": "calculator", "id": "own", "model": "a"}, {"seed": "calculator", "id": "dflt"}],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out), "--model", "c", "--jobs", "1")

    assert run.returncode == 0, run.stderr
    assert models_asked(provider) == ["a", "c"]
    found = {r["id"]: r["model"] for r in map(json.loads, out.read_text().splitlines())}
    assert found == {"own": "a", "dflt": "c"}


def test_batch_refuses_a_task_line_with_a_bad_model_name(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_by_model(provider, {MODEL: FIXED_CALCULATOR})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "good"},
            {"seed": "calculator", "id": "blank", "model": "  "},
            {"seed": "calculator", "id": "long", "model": "m" * 161},
            {"seed": "calculator", "id": "number", "model": 7},
        ],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1, run.stderr
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["good"]
    assert models_asked(provider) == [MODEL]
    said = {int(m[1]): m[2] for m in re.finditer(r"line (\d+): (.*)", run.stderr)}
    assert "'model' must be a model name of 1 to 160 characters" in said[2]
    assert "'model' must be a model name of 1 to 160 characters" in said[3]
    assert "model" in said[4]
    assert all(said[n].endswith("the line was skipped") for n in (2, 3, 4))

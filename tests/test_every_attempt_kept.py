"""Every attempt of a run is kept, whatever the run ended in: those the contract or a
policy refused before any sandbox too, each with its planner call, the answer it was
refused for, why, and its tokens; in the run record, in the results line, in the report."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from html import escape as html_escape
from pathlib import Path
from typing import Any

from conftest import AgentRun, FakeProvider, completion, plan_json
from test_models import write_tasks
from test_report import task_bodies

from sandboxed_coding_agent.core.batches.results import TaskResult
from sandboxed_coding_agent.core.records.run_records import read_run_record, records_directory
from sandboxed_coding_agent.core.serialization import structure

RunAgent = Callable[..., AgentRun]

#: Two answers the planner's own check of the contract refuses: neither file may be edited.
REFUSED = (
    ("check_calculator.py", "print('the test is mine now')\n"),
    ("../outside.py", "print('out of the seed')\n"),
)


def reply_refused(provider: FakeProvider) -> None:
    for number, (path, content) in enumerate(REFUSED, 1):
        usage = {"prompt_tokens": 4000 + number, "completion_tokens": 400 + number}
        provider.reply(200, completion(plan_json((path, content)), usage=usage))


def the_record(env_home: Path, run_id: str) -> Any:
    directory = records_directory({"XDG_STATE_HOME": str(env_home)})
    return json.loads((directory / f"{run_id}.json").read_text("utf-8"))


def test_a_task_rejected_after_repairs_keeps_every_attempt_in_its_record_and_results_line(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    reply_refused(provider)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator", "attempts": 2}])
    out = tmp_path / "results.jsonl"

    assert run_agent("batch", str(tasks), "--out", str(out)).returncode == 1

    line = json.loads(out.read_text("utf-8"))
    assert line["status"] == "rejected"
    (candidate,) = line["error"]["candidates"]
    attempts = candidate["attempts"]
    assert [a["verdict"] for a in attempts] == ["rejected", "rejected"]
    calls = [a["planner_task_id"] for a in attempts]
    assert all(calls)
    assert len(set(calls)) == 2
    assert calls[-1] == line["error"]["planner_task_id"]
    assert [a["usage"]["prompt_tokens"] for a in attempts] == [4001, 4002]
    assert "check_calculator.py" in attempts[0]["answer"]
    assert "../outside.py" in attempts[1]["answer"]
    assert all(a["rejections"] for a in attempts)

    record = the_record(tmp_path / "state", line["run_id"])
    (kept,) = record["candidates"]
    assert [a["planner_task_id"] for a in kept["attempts"]] == calls
    assert [a["usage"]["completion_tokens"] for a in kept["attempts"]] == [401, 402]
    assert "check_calculator.py" in kept["attempts"][0]["answer"]
    assert kept["attempts"][1]["rejections"][0]["path"] == "../outside.py"


def test_a_run_of_one_attempt_refused_by_the_contract_keeps_it_in_its_record(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply_plan(REFUSED[0])

    run = run_agent("run", "--seed", "calculator")

    assert run.returncode != 0
    (path,) = records_directory({"XDG_STATE_HOME": str(tmp_path / "state")}).glob("run-*.json")
    record = json.loads(path.read_text("utf-8"))
    (candidate,) = record["candidates"]
    (attempt,) = candidate["attempts"]
    assert attempt["verdict"] == "rejected"
    assert attempt["planner_task_id"] == record["error"]["planner_task_id"]
    assert "the test is mine now" in attempt["answer"]
    assert attempt["usage"]["prompt_tokens"] is not None


def test_records_and_results_lines_without_the_attempts_still_load(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    reply_refused(provider)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator", "attempts": 2}])
    out = tmp_path / "results.jsonl"
    run_agent("batch", str(tasks), "--out", str(out))
    line = json.loads(out.read_text("utf-8"))
    # As an older agent wrote them: no candidates, no answers.
    del line["error"]["candidates"]
    assert structure(line, TaskResult).error.candidates == ()  # type: ignore[union-attr]
    environ = {"XDG_STATE_HOME": str(tmp_path / "state")}
    path = records_directory(environ) / f"{line['run_id']}.json"
    older = json.loads(path.read_text("utf-8"))
    del older["candidates"]
    path.write_text(json.dumps(older), "utf-8")
    assert read_run_record(line["run_id"], environ).candidates == ()
    out.write_text(json.dumps(line) + "\n", "utf-8")
    html = tmp_path / "report.html"
    assert run_agent("report", str(out), "--html", str(html)).returncode == 0


def test_report_shows_every_refused_attempt_with_its_planner_call_answer_reason_and_tokens(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    reply_refused(provider)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator", "attempts": 2}])
    out = tmp_path / "results.jsonl"
    run_agent("batch", str(tasks), "--out", str(out))
    line = json.loads(out.read_text("utf-8"))
    html = tmp_path / "report.html"
    assert run_agent("report", str(out), "--html", str(html)).returncode == 0

    (body,) = task_bodies(html.read_text("utf-8")).values()
    attempts = re.split(r'<details class="attempt" open><summary>', body)[1:]
    assert len(attempts) == 2
    for attempt, kept, (path, _) in zip(
        attempts, line["error"]["candidates"][0]["attempts"], REFUSED, strict=True
    ):
        assert 'class="status s-rejected"' in attempt
        assert f"planner task <code>{kept['planner_task_id']}</code>" in attempt
        assert "the answer it was refused for" in attempt
        assert path in attempt.split("the answer it was refused for")[1]
        assert kept["rejections"][0]["rule"] in attempt.split("rejections")[1]
        tokens = kept["usage"]
        assert (
            f"{tokens['prompt_tokens']:,} prompt + {tokens['completion_tokens']:,} completion"
            in attempt
        )
        assert f"<code>agent logs {kept['planner_task_id']}</code>" in body
    # The task's figures count both: attempts and their planner time.
    assert 'data-attempts="2"' in body
    assert 'data-planner-seconds="0.0"' not in body


def test_each_task_keeps_and_shows_the_instruction_it_ran_with_the_seeds_default_too(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    reply_refused(provider)
    provider.reply_plan(REFUSED[0])
    # A seed that cannot be loaded (a tasks file naming an unknown one is refused whole).
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "seed.toml").write_text("name = [not toml\n")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "default"},
            {"seed": "calculator", "id": "own", "prompt": "Make <b>add</b> add."},
            {"seed": str(broken), "id": "unknown"},
        ],
    )
    out = tmp_path / "results.jsonl"
    run_agent("batch", str(tasks), "--out", str(out), "--jobs", "1")
    lines = {line["id"]: line for line in map(json.loads, out.read_text("utf-8").splitlines())}
    default = lines["default"]
    assert default["prompt"] is None
    record = the_record(tmp_path / "state", default["run_id"])
    assert default["instruction"] == record["instruction"]
    assert "add" in default["instruction"]
    assert lines["own"]["instruction"] == "Make <b>add</b> add."
    assert lines["unknown"]["instruction"] is None

    html = tmp_path / "report.html"
    assert run_agent("report", str(out), "--html", str(html)).returncode == 0
    bodies = task_bodies(html.read_text("utf-8"))
    shown = "instruction (the seed&#x27;s default prompt: the task gave none)</summary><pre"
    assert shown in bodies["default"]
    escaped = html_escape(default["instruction"].replace("\r\n", "\n"), quote=True)
    assert escaped in bodies["default"].split(shown)[1]
    assert "instruction (the task&#x27;s prompt)" in bodies["own"]
    assert "Make &lt;b&gt;add&lt;/b&gt; add." in bodies["own"]
    assert "<b>add</b>" not in bodies["own"]
    assert "which this results line does not hold" in bodies["unknown"]

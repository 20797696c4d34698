"""`agent batch`: tasks run a few at once, one durable result line each, resumable after a kill."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import (
    AGENT,
    FIXED_CALCULATOR,
    AgentRun,
    FakeProvider,
    Reply,
    completion,
    plan_json,
    wait_until,
)

RunAgent = Callable[..., AgentRun]
BROKEN_CALCULATOR = FIXED_CALCULATOR.replace("left + right", "left - right")


def answer_every_request_with_the_fix(provider: FakeProvider) -> None:
    body = json.dumps(completion(plan_json(("calculator.py", FIXED_CALCULATOR)))).encode()
    provider.default = Reply(200, body)


def write_tasks(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    return path


def results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_batch_writes_one_result_per_task_and_reports_bad_lines_by_number(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_every_request_with_the_fix(provider)
    broken = tmp_path / "broken-seed"  # there, so the batch starts, but not a seed
    broken.mkdir()
    (broken / "seed.toml").write_text('name = "broken"\n', encoding="utf-8")
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator"},
            {"seed": "calculator", "id": "with-prompt", "prompt": "Fix add."},
            "{not json",
            "# a comment, and a blank line next",
            "",
            {"seed": str(broken)},
            {"seed": "calculator", "colour": "blue"},
            {"seed": "calculator", "id": "with-prompt"},
        ],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out), "--jobs", "2")

    assert run.returncode == 1, run.stderr
    found = {r["id"]: r for r in results(out)}
    assert set(found) == {"line-1", "with-prompt", "line-6"}
    assert found["line-1"]["status"] == "passed"
    assert found["with-prompt"]["status"] == "passed"
    assert found["with-prompt"]["prompt"] == "Fix add."
    assert found["line-1"]["tokens"] == 366
    assert found["line-1"]["result"]["run_id"] == found["line-1"]["run_id"]
    assert found["line-6"]["status"] == "usage-error"
    assert "broken-seed" in found["line-6"]["error"]["message"]
    assert "line 3: not JSON" in run.stderr
    assert "line 7: " in run.stderr
    assert "colour" in run.stderr
    assert "line 8: the ID 'with-prompt' was already given on line 2" in run.stderr
    # Not a terminal: a plain line per finished task, then the summary table on stdout.
    assert "[3/3] task" in run.stderr
    assert "passed" in run.stdout
    assert "invalid lines" in run.stdout
    # The run records are there to replay.
    assert (
        tmp_path
        / "state"
        / "sandboxed-coding-agent"
        / "run-records"
        / f"{found['line-1']['run_id']}.json"
    ).is_file()


def test_batch_task_takes_attempts_and_counts_every_attempts_tokens(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply_plan(("calculator.py", BROKEN_CALCULATOR))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator", "attempts": 2}])
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out), "--json")

    assert run.returncode == 0, run.stderr
    [result] = results(out)
    assert result["status"] == "passed"
    assert len(result["result"]["attempts"]) == 2
    assert result["tokens"] == 2 * 366
    summary = run.json()
    assert summary["counts"]["passed"] == 1
    assert summary["tokens"] == 2 * 366


def test_existing_results_are_never_overwritten_without_resume(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}])
    out = tmp_path / "results.jsonl"
    out.write_text('{"id": "x"}\n', encoding="utf-8")

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 2
    assert out.read_text(encoding="utf-8") == '{"id": "x"}\n'


def test_killed_batch_resumes_to_exactly_20_results(
    provider: FakeProvider,
    run_agent: RunAgent,
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    answer_every_request_with_the_fix(provider)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}] * 20)
    out = tmp_path / "results.jsonl"
    batch = subprocess.Popen(
        [str(AGENT), "batch", str(tasks), "--out", str(out), "--jobs", "2"],
        env=agent_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: out.exists() and out.read_bytes().count(b"\n") >= 4, timeout=120)
    finally:
        batch.send_signal(signal.SIGKILL)
        batch.wait()
    before = out.read_bytes().count(b"\n")
    assert before < 20, "the batch finished before it could be killed"
    asked = len(provider.requests)

    resumed = run_agent("batch", str(tasks), "--out", str(out), "--jobs", "4", "--resume")

    assert resumed.returncode == 0, resumed.stderr
    lines = results(out)
    assert len(lines) == 20
    assert {line["id"] for line in lines} == {f"line-{n}" for n in range(1, 21)}
    assert all(line["status"] == "passed" for line in lines)
    # Only the tasks without a result ran again.
    assert len(provider.requests) - asked == 20 - before
    assert f"{before} tasks already have results" in resumed.stderr


def test_resume_cuts_a_torn_last_line_and_runs_that_task(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_every_request_with_the_fix(provider)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}] * 2)
    out = tmp_path / "results.jsonl"
    first = run_agent("batch", str(tasks), "--out", str(out))
    assert first.returncode == 0, first.stderr
    whole = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text(whole[0] + whole[1][: len(whole[1]) // 2], encoding="utf-8")  # a kill mid-write

    resumed = run_agent("batch", str(tasks), "--out", str(out), "--resume")

    assert resumed.returncode == 0, resumed.stderr
    lines = results(out)
    # The whole line is kept as it was; the torn one's task ran again, once.
    assert lines[0] == json.loads(whole[0])
    assert sorted(line["id"] for line in lines) == ["line-1", "line-2"]


def test_unsupported_or_invalid_task_options_are_bad_lines(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_every_request_with_the_fix(provider)
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"seed": "calculator", "attempts": 0}, {"seed": "calculator", "id": "../x"}],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1
    assert "line 1: " in run.stderr
    assert "line 2: " in run.stderr
    assert out.read_text(encoding="utf-8") == ""


def run_graded_batch(provider: FakeProvider, run_agent: RunAgent, tmp_path: Path) -> AgentRun:
    """A batch of three tasks on a graded seed, whose plans resolve FULL, PARTIAL and NO, and
    one on the calculator, which is not graded; its results are in ``tmp_path/results.jsonl``."""
    from test_grading import FIX_BREAKING_NEG, FIXED, HALF_FIXED, graded_seed_folder

    seed = str(graded_seed_folder(tmp_path / "graded"))
    for content in (FIXED, HALF_FIXED, FIX_BREAKING_NEG):
        provider.reply_plan(("calculator.py", content))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"seed": seed, "id": "full"},
            {"seed": seed, "id": "partial"},
            {"seed": seed, "id": "no"},
            {"seed": "calculator", "id": "ungraded"},
        ],
    )
    out = tmp_path / "results.jsonl"
    return run_agent("batch", str(tasks), "--out", str(out), "--jobs", "1", "--json")


def test_each_task_line_of_a_graded_seed_holds_its_resolution(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    run = run_graded_batch(provider, run_agent, tmp_path)

    assert run.returncode == 1, run.stderr
    found = {r["id"]: r for r in results(tmp_path / "results.jsonl")}
    assert {task: r["status"] for task, r in found.items()} == {
        "full": "passed",
        "partial": "failed",
        "no": "failed",
        "ungraded": "passed",
    }
    assert {task: r["resolution"] for task, r in found.items()} == {
        "full": "FULL",
        "partial": "PARTIAL",
        "no": "NO",
        "ungraded": None,
    }
    assert found["partial"]["result"]["grade"]["fail_to_pass"]["failed"] == [
        "tests/test_calc.py::Mul::test_multiplies"
    ]
    assert found["ungraded"]["result"]["grade"] is None
    assert run.json()["resolutions"] == {"FULL": 1, "PARTIAL": 1, "NO": 1}
    assert "task full (line 1, seed " in run.stderr
    assert "): passed (FULL) in " in run.stderr
    assert "): failed (PARTIAL) in " in run.stderr


def test_a_results_line_whose_resolution_is_not_its_grades_is_damaged(tmp_path: Path) -> None:
    from sandboxed_coding_agent.core.batches.batch import parse_results

    line = {
        "id": "t",
        "line": 1,
        "seed": "calculator",
        "status": "internal-error",
        "seconds": 0.5,
        "resolution": "FULL",
    }

    found, damaged, _ = parse_results(json.dumps(line).encode() + b"\n")

    assert found == []
    assert [bad.line for bad in damaged] == [1]

"""Batches across machines and re-runs: `--shard I/N` and `--resume --retry-errors`.

Against a real loopback provider; every task is a real run in a real sandbox.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXED_CALCULATOR, AgentRun, FakeProvider, Reply, completion, plan_json

from sandboxed_coding_agent.core.batches.shards import parse_shard, shard_of
from sandboxed_coding_agent.core.errors import UsageError

WRONG = "def add(left, right):\n    return left * right  # WRONG\n"


def answer(content: str) -> Reply:
    return Reply(200, json.dumps(completion(plan_json(("calculator.py", content)))).encode())


def write_tasks(path: Path, ids: list[str]) -> Path:
    lines = [{"seed": "calculator", "id": task_id} for task_id in ids]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def ids_in(out: Path) -> list[str]:
    return [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]


def test_shards_together_run_every_task_once(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    provider.default = answer(FIXED_CALCULATOR)
    ids = [f"task-{n}" for n in range(9)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", ids)

    ran: list[str] = []
    for index in (1, 2, 3):
        out = tmp_path / f"shard-{index}.jsonl"
        done = run_agent("batch", str(tasks), "--out", str(out), "--shard", f"{index}/3")
        assert done.returncode == 0, done.stderr
        assert f"shard {index}/3: " in done.stderr
        ran += ids_in(out) if out.exists() else []

    assert sorted(ran) == sorted(ids)  # the union is the file, with no task twice
    assert len(provider.requests) == len(ids)

    # The shards reported together are the batch run as one.
    whole = tmp_path / "whole.jsonl"
    assert run_agent("batch", str(tasks), "--out", str(whole)).returncode == 0
    one = run_agent("report", str(whole), "--html", str(tmp_path / "one.html"))
    shards = [str(tmp_path / f"shard-{index}.jsonl") for index in (1, 2, 3)]
    merged = run_agent("report", *shards, "--html", str(tmp_path / "merged.html"))
    assert one.returncode == merged.returncode == 0, one.stderr + merged.stderr
    said = {run.stderr.split(": ", 2)[-1] for run in (one, merged)}
    assert said == {"9 tasks, 9 passed\n"}
    for page in ("one.html", "merged.html"):
        assert "100.0%</b>pass rate (9 of 9)" in (tmp_path / page).read_text(encoding="utf-8")


def test_a_task_keeps_its_shard_whatever_the_order_and_the_other_lines() -> None:
    ids = [f"t{n}" for n in range(1000)]
    shards = {task_id: shard_of(task_id, 7) for task_id in ids}
    assert set(shards.values()) == set(range(1, 8))
    counts = [list(shards.values()).count(n) for n in range(1, 8)]
    assert min(counts) > 100  # spread evenly enough for machines to share the work
    assert {task_id: shard_of(task_id, 7) for task_id in reversed(ids)} == shards


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "1-3", "1/100000", "", "/3"])
def test_a_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--shard must be I/N"):
        parse_shard(text)


def test_bad_shard_on_the_command_line_exits_2(
    run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", ["a"])
    done = run_agent("batch", str(tasks), "--out", str(tmp_path / "o.jsonl"), "--shard", "3/2")
    assert done.returncode == 2
    assert "--shard must be I/N" in done.stderr


def test_retry_errors_runs_the_errors_again_and_never_a_verdict(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    # One task fails its test (a verdict), one gets a provider error (a 400 is not retried).
    provider.reply(200, answer(WRONG).body)
    provider.reply(400, {"error": {"message": "the provider had a bad moment"}})
    tasks = write_tasks(tmp_path / "tasks.jsonl", ["a", "b"])
    out = tmp_path / "results.jsonl"
    first = run_agent("batch", str(tasks), "--out", str(out), "--jobs", "1")
    assert first.returncode == 1, first.stderr
    statuses = {
        json.loads(line)["id"]: json.loads(line)["status"]
        for line in out.read_text(encoding="utf-8").splitlines()
    }
    assert sorted(statuses.values()) == ["failed", "provider-error"]
    errored = next(task_id for task_id, status in statuses.items() if status == "provider-error")

    provider.default = answer(FIXED_CALCULATOR)
    plain = run_agent("batch", str(tasks), "--out", str(out), "--resume")
    assert len(provider.requests) == 2  # --resume alone runs nothing again

    retried = run_agent("batch", str(tasks), "--out", str(out), "--resume", "--retry-errors")

    assert plain.returncode == 1
    assert len(provider.requests) == 3  # only the errored task, not the failed one
    assert ids_in(out)[2:] == [errored]
    assert json.loads(out.read_text(encoding="utf-8").splitlines()[2])["status"] == "passed"
    assert retried.returncode == 1  # the failed task is still failed


def test_retry_errors_needs_resume(run_agent: Callable[..., AgentRun], tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", ["a"])
    done = run_agent("batch", str(tasks), "--out", str(tmp_path / "o.jsonl"), "--retry-errors")
    assert done.returncode == 2
    assert "--retry-errors goes with --resume" in done.stderr

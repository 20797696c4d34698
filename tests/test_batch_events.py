"""`agent batch --events`: one JSON line per event, following the documented schema.

Against a real loopback provider; every task is a real run in a real sandbox.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import API_KEY, FIXED_CALCULATOR, AgentRun, FakeProvider, Reply, completion, plan_json

from sandboxed_coding_agent.core.runs.events import EVENT_FIELDS

DOCS = Path(__file__).parent.parent / "docs" / "batches.md"
ORDER = [
    "task-started",
    "plan-received",
    "policy-verdict",
    "sandbox-started",
    "sandbox-ended",
    "attempt-done",
    "task-done",
]


def answer(content: str, path: str = "calculator.py") -> Reply:
    return Reply(200, json.dumps(completion(plan_json((path, content)))).encode())


def write_tasks(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def check_schema(events: list[dict[str, Any]]) -> None:
    for number, event in enumerate(events, start=1):
        assert event["seq"] == number
        fields = EVENT_FIELDS[event["event"]]
        assert set(event) == {"event", "time", "seq", *fields}, event
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", event["time"])


def test_events_follow_the_schema_and_each_task_in_order(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    # Task a: the first plan touches the test file (refused), the repair passes.
    provider.reply(200, answer("print('mine')\n", "check_calculator.py").body)
    provider.default = answer(FIXED_CALCULATOR)
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"seed": "calculator", "id": "a", "attempts": 2}, {"seed": "calculator", "id": "b"}],
    )
    out, log = tmp_path / "results.jsonl", tmp_path / "events.jsonl"

    done = run_agent("batch", str(tasks), "--out", str(out), "--jobs", "1", "--events", str(log))

    assert done.returncode == 0, done.stderr
    text = log.read_text(encoding="utf-8")
    assert API_KEY not in text
    assert os.stat(log).st_mode & 0o077 == 0  # owner-only
    events = [json.loads(line) for line in text.splitlines()]
    check_schema(events)
    assert events[0]["event"] == "batch-started"
    assert events[0]["tasks"] == 2
    assert events[-1]["event"] == "batch-done"
    assert events[-1]["counts"]["passed"] == 2
    a = [e for e in events if e.get("task") == "a"]
    # The planner refused its own answer before it was a plan: no plan-received for it.
    assert [e["event"] for e in a] == ["task-started", "policy-verdict", "attempt-done", *ORDER[1:]]
    assert a[1]["accepted"] is False
    assert a[1]["rules"] == ["patch-contract:path-not-editable"]
    assert a[2]["verdict"] == "rejected"
    assert a[-2]["verdict"] == "passed"
    assert a[-2]["attempt"] == 2
    b = [e for e in events if e.get("task") == "b"]
    assert [e["event"] for e in b] == ORDER
    ended = b[4]
    assert ended["exit_code"] == 0
    assert ended["sandbox_id"].startswith("sbx-")
    assert b[-1]["status"] == "passed"
    assert b[-1]["run_id"].startswith("run-")


def test_events_to_stdout_leave_the_summary_on_stderr(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    provider.default = answer(FIXED_CALCULATOR)
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}])

    done = run_agent("batch", str(tasks), "--out", str(tmp_path / "o.jsonl"), "--events", "-")

    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]  # nothing but events
    check_schema(events)
    assert "tasks with results" in done.stderr


def test_bad_events_targets_are_usage_errors(
    run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}])
    out = tmp_path / "o.jsonl"
    secret = tmp_path / "secret"
    secret.write_text("keep\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(secret)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    for target, message in [
        (str(link), "is a symbolic link"),
        (str(tmp_path), "cannot write events file"),
        (str(fifo), "events file"),
    ]:
        done = run_agent("batch", str(tasks), "--out", str(out), "--events", target, timeout=30)
        assert done.returncode == 2, (target, done.stderr)
        assert message in done.stderr
        assert "Traceback" not in done.stderr
    both = run_agent("batch", str(tasks), "--out", str(out), "--events", "-", "--json")
    assert both.returncode == 2
    assert secret.read_text(encoding="utf-8") == "keep\n"


def test_the_documented_schema_is_the_one_written() -> None:
    rows = re.findall(r"^\| `([a-z-]+)` \| (.*?) \|$", DOCS.read_text(encoding="utf-8"), re.M)
    documented = {
        kind: tuple(re.findall(r"`([a-z_]+)`", re.sub(r"\([^)]*\)", "", fields)))
        for kind, fields in rows
        if kind in EVENT_FIELDS or kind.endswith(("-started", "-done"))
    }
    assert documented == EVENT_FIELDS

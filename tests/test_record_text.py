"""`agent logs PLANNER_TASK_ID` as a person reads it: a remote planner's call too."""

from __future__ import annotations

from sandboxed_coding_agent.core.records.planner_call_text import render
from sandboxed_coding_agent.core.records.planner_calls import PlannerRecord

REQUEST = {
    "url": "https://api.example.com/v1/chat/completions",
    "model": "m",
    "messages": 2,
    "body_bytes": 1500,
    "seed_files": 2,
    "response_format": "json_object",
    "timeout_seconds": 90.0,
    "max_retries": 3,
    "prompt_bytes": 1200,
}
ATTEMPT = {
    "number": 1,
    "started_seconds": 0.0,
    "seconds": 1.25,
    "status": 200,
    "outcome": "ok",
    "detail": None,
    "waited_seconds": 0.0,
    "response_format": "json_object",
}


def record(details: dict[str, object]) -> PlannerRecord:
    return PlannerRecord(
        "plan-1", "lazycloud", "2026-12-04T00:00:00+00:00", "ok", 3.5, details=details
    )


def test_a_remote_planners_call_reads_as_a_local_one_indented() -> None:
    remote = {"request": REQUEST, "attempts": [ATTEMPT], "response_excerpt": '{"files": []}'}

    text = render(record({"remote": remote, "function_call": "fc-9"}))

    lines = text.splitlines()
    assert "remote:" in lines
    assert "  request:  POST https://api.example.com/v1/chat/completions" in lines
    assert "  attempt 1: HTTP 200 (ok) in 1.250 s" in lines
    assert "  answer (excerpt):" in lines
    assert "function_call: fc-9" in lines
    assert not any(line.startswith("remote: {") for line in lines)  # not one line of JSON


def test_details_that_are_not_a_call_are_shown_as_they_are() -> None:
    text = render(record({"request": "not a request", "extra": [1, 2], "backend": {"kind": "f"}}))

    assert "request: not a request" in text.splitlines()
    assert "extra: [1, 2]" in text.splitlines()
    assert 'backend: {"kind": "f"}' in text.splitlines()  # a planner's own object, as it is

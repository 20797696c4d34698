"""Repair attempts: after a failed test or a refused plan, the next planner call is told why."""

from __future__ import annotations

import json
from collections.abc import Callable

from conftest import FIXED_CALCULATOR, AgentRun, FakeProvider

WRONG_CALCULATOR = "def add(left, right):\n    return left * right  # WRONG-FIRST-TRY\n"


def user_message(provider: FakeProvider, index: int) -> str:
    return str(provider.requests[index].json()["messages"][-1]["content"])


def test_a_fix_that_needs_a_second_attempt_gets_it_from_the_feedback(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("calculator.py", WRONG_CALCULATOR))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    done = run_agent("run", "--attempts", "3", "--json")

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert [a["verdict"] for a in result["attempts"]] == ["failed", "passed"]
    assert result["passed_attempt"] == 2
    assert result["tests_passed"] is True
    first, second = result["attempts"]
    assert first["test_exit_code"] == 1
    assert "WRONG-FIRST-TRY" in first["diff"]
    assert first["planner_task_id"] != second["planner_task_id"]
    assert result["planner_task_id"] == second["planner_task_id"]
    assert second["usage"] == {"prompt_tokens": 321, "completion_tokens": 45}
    assert second["sandbox_seconds"] > 0
    assert second["planner_seconds"] >= 0
    # One call per attempt, stopping at the pass; only the second is told about the first.
    assert len(provider.requests) == 2
    assert "previous answer" not in user_message(provider, 0).lower()
    feedback = user_message(provider, 1)
    assert "FAIL" in feedback
    assert "AssertionError" in feedback
    assert len(done.tested_sandboxes) == 2
    # A conversation: the first request's two messages, then the model's own answer as the
    # assistant's turn (exactly as it wrote it), then the feedback as the user's next turn.
    first_messages = provider.requests[0].json()["messages"]
    messages = provider.requests[1].json()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[:2] == first_messages
    answer = json.loads(messages[2]["content"])
    assert answer == {"files": [{"path": "calculator.py", "content": WRONG_CALCULATOR}]}
    assert "WRONG-FIRST-TRY" not in feedback  # the plan is the assistant's turn, not restated


def test_a_refused_plan_is_fed_back_with_the_reasons(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("check_calculator.py", "print('the test is mine now')\n"))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    done = run_agent("run", "--attempts", "2", "--json")

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert [a["verdict"] for a in result["attempts"]] == ["rejected", "passed"]
    assert result["attempts"][0]["rejections"][0]["rule"] == "path-not-editable"
    feedback = user_message(provider, 1)
    assert "path-not-editable" in feedback
    assert "refused" in feedback
    messages = provider.requests[1].json()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "the test is mine now" in messages[2]["content"]  # what the model said
    # The refused plan never reached a sandbox.
    assert len(done.tested_sandboxes) == 1


def test_the_last_attempt_failing_exits_1_with_every_attempt(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("calculator.py", WRONG_CALCULATOR))
    provider.reply_plan(("calculator.py", WRONG_CALCULATOR.replace("*", "**")))

    done = run_agent("run", "--attempts", "2")

    assert done.returncode == 1
    assert "attempts:        1 failed (exit 1), 2 failed (exit 1)" in done.stdout
    assert len(provider.requests) == 2


def test_a_provider_error_ends_the_run_keeping_the_attempts_made(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("calculator.py", WRONG_CALCULATOR))
    provider.reply(401, {"error": {"message": "bad key"}})

    done = run_agent("run", "--attempts", "3", "--json")

    assert done.returncode == 3, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["kind"] == "provider"
    assert [a["verdict"] for a in error["attempts"]] == ["failed"]
    assert len(provider.requests) == 2
    assert len(done.tested_sandboxes) == 1


def test_a_plan_file_cannot_be_repaired(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., object]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    done = run_agent("run", "--plan", str(plan), "--attempts", "2", "--json")

    assert done.returncode == 2
    assert "need a planner" in done.json()["error"]["message"]

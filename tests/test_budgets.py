"""Budgets of a run: planner calls, tokens and cost, and the totals every summary shows.

Every provider here is a real HTTP server on 127.0.0.1 (``FakeProvider``); every reply
reports 321 prompt and 45 completion tokens, so one call is 366 tokens and, at the
test prices below (2.50 and 10 US dollars per million), $0.0012525.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import (
    FIXED_CALCULATOR,
    MODEL,
    AgentRun,
    FakeProvider,
    Reply,
    completion,
    plan_json,
)

from sandboxed_coding_agent.core.errors import UsageError
from sandboxed_coding_agent.core.model import TokenUsage
from sandboxed_coding_agent.core.plans.budget import (
    Budget,
    BudgetReached,
    Ledger,
    ModelPrice,
    Prices,
    Spend,
    read_prices,
)

WRONG = "def add(left, right):\n    return left * right  # WRONG\n"
CALL_COST = (321 * 2.5 + 45 * 10) / 1_000_000


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(
        f'[models."{MODEL}"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10\n', encoding="utf-8"
    )
    return path


def wrong_forever(provider: FakeProvider) -> None:
    provider.reply_plan(("calculator.py", WRONG))
    provider.default = provider.replies.pop()


def assert_budget_outcome(done: AgentRun, calls: int, flag: str) -> dict[str, object]:
    assert done.returncode == 6, done.stderr
    error = done.json()["error"]
    assert error["kind"] == "budget"
    assert flag in error["message"]
    assert "no further planner call was made" in error["message"]
    assert error["spend"]["planner_calls"] == calls
    assert len(error["attempts"]) == calls  # every attempt made before it, kept
    return dict(error)


def test_max_planner_calls_stops_the_repairs(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    wrong_forever(provider)

    done = run_agent("run", "--attempts", "5", "--max-planner-calls", "2", "--json")

    assert len(provider.requests) == 2
    error = assert_budget_outcome(done, 2, "2 of 2 planner calls (--max-planner-calls)")
    assert [a["verdict"] for a in error["attempts"]] == ["failed", "failed"]  # type: ignore[index]


def test_max_tokens_stops_before_the_call_that_would_start_past_it(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    wrong_forever(provider)

    # 366 tokens after the first call (under 500), 732 after the second: no third call.
    done = run_agent("run", "--attempts", "5", "--max-tokens", "500", "--json")

    assert len(provider.requests) == 2
    error = assert_budget_outcome(done, 2, "732 of 500 tokens (--max-tokens)")
    assert error["spend"] == {  # type: ignore[comparison-overlap]
        "planner_calls": 2,
        "prompt_tokens": 642,
        "completion_tokens": 90,
        "cost": None,
        "unreported": 0,
        "unpriced": 0,
    }


def test_max_cost_stops_the_run_and_the_summary_says_what_was_spent(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], prices: Path
) -> None:
    wrong_forever(provider)

    done = run_agent(
        "run", "--attempts", "5", "--max-cost", "0.002", "--prices", str(prices), "--json"
    )

    assert len(provider.requests) == 2
    error = assert_budget_outcome(done, 2, "of $0.0020 (--max-cost)")
    assert error["spend"]["cost"] == pytest.approx(2 * CALL_COST)  # type: ignore[index]
    costs = [a["cost"] for a in error["attempts"]]  # type: ignore[union-attr]
    assert costs == [pytest.approx(CALL_COST)] * 2

    plain = run_agent("run", "--attempts", "5", "--max-cost", "0.002", "--prices", str(prices))
    assert plain.returncode == 6
    assert "budget error: the budget is spent" in plain.stderr
    assert "spent: 2 planner calls, 642 prompt + 90 completion tokens, $0.0025" in plain.stderr


def test_a_run_that_passes_within_its_budget_shows_the_totals_of_every_attempt(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], prices: Path
) -> None:
    provider.reply_plan(("calculator.py", WRONG))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    done = run_agent(
        "run", "--attempts", "3", "--max-planner-calls", "3", "--prices", str(prices), "--json"
    )

    assert done.returncode == 0, done.stderr
    spend = done.json()["spend"]
    assert spend["planner_calls"] == 2
    assert (spend["prompt_tokens"], spend["completion_tokens"]) == (642, 90)
    assert spend["cost"] == pytest.approx(2 * CALL_COST)
    assert done.json()["usage"] == {"prompt_tokens": 321, "completion_tokens": 45}  # the chosen


def test_candidates_count_every_call_in_the_totals(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.default = provider_reply(FIXED_CALCULATOR)

    done = run_agent("run", "--candidates", "3", "--jobs", "1")

    assert done.returncode == 0, done.stderr
    assert "spent:           3 planner calls, 963 prompt + 135 completion tokens" in done.stdout


def test_a_budget_of_one_call_with_candidates_makes_one_call(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.default = provider_reply(WRONG)

    done = run_agent("run", "--candidates", "3", "--max-planner-calls", "1", "--json")

    assert len(provider.requests) == 1
    assert done.returncode == 6, done.stderr
    error = done.json()["error"]
    assert error["kind"] == "budget"
    assert error["spend"]["planner_calls"] == 1
    # The one call's plan was still tested: a budget lets running work finish.
    tested = [c for c in error["candidates"] if c["attempts"]]
    assert [c["attempts"][0]["verdict"] for c in tested] == ["failed"]


def provider_reply(content: str) -> Reply:
    return Reply(200, json.dumps(completion(plan_json(("calculator.py", content)))).encode())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-cost", "1"], "--max-cost needs --prices FILE"),
        (["--max-cost", "1", "--prices", "{missing}"], "cannot read price table"),
        (["--max-cost", "1", "--prices", "{other}"], "has no price for model 'test-model'"),
        (["--prices", "{broken}"], "is not valid TOML"),
        (["--prices", "{negative}"], "'input_per_mtok' must be a number of US dollars"),
        (["--prices", "{extra}"], "has unknown 'cached_per_mtok'"),
        (["--max-planner-calls", "0"], "--max-planner-calls"),
    ],
)
def test_bad_budget_options_are_usage_errors_before_any_call(
    provider: FakeProvider,
    run_agent: Callable[..., AgentRun],
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    files = {
        "other": '[models."gpt-other"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n',
        "broken": "[models.\n",
        "negative": '[models."test-model"]\ninput_per_mtok = -1\noutput_per_mtok = 2\n',
        "extra": '[models."test-model"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
        "cached_per_mtok = 0.5\n",
    }
    paths = {name: tmp_path / f"{name}.toml" for name in [*files, "missing"]}
    for name, text in files.items():
        paths[name].write_text(text, encoding="utf-8")
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]

    done = run_agent("run", *argv)

    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert provider.requests == []


def test_a_budget_with_a_plan_file_is_a_usage_error(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    done = run_agent("run", "--plan", str(plan), "--max-tokens", "10")

    assert done.returncode == 2
    assert "--max-tokens needs a planner" in done.stderr


# --- the ledger itself ---------------------------------------------------------------------------


def test_a_child_ledger_adds_to_its_parent_and_is_held_to_its_budget() -> None:
    batch = Ledger(Budget(max_planner_calls=3), Prices({"m": ModelPrice(1, 2)}))
    run = batch.child()
    run.begin_call()
    run.add_usage(TokenUsage(1_000_000, 500_000), ["m"])
    other = batch.child()
    other.begin_call()
    other.begin_call()
    with pytest.raises(BudgetReached, match="3 of 3 planner calls"):
        run.begin_call()
    assert run.spent == Spend(1, 1_000_000, 500_000, cost=2.0)
    assert batch.spent.planner_calls == 3
    assert batch.spent.cost == pytest.approx(2.0)


def test_a_call_without_a_price_under_max_cost_stops_further_calls() -> None:
    ledger = Ledger(Budget(max_cost=5), Prices({"m": ModelPrice(1, 2)}, source="p.toml"))
    ledger.begin_call()
    assert ledger.add_usage(TokenUsage(10, 10), [None, "unknown"]) is None
    with pytest.raises(BudgetReached, match=r"no price in p\.toml"):
        ledger.begin_call()


def test_a_resumed_ledger_starts_at_what_was_spent() -> None:
    ledger = Ledger(Budget(max_tokens=1000), spent=Spend(4, 900, 100))
    with pytest.raises(BudgetReached, match="1,000 of 1,000 tokens"):
        ledger.begin_call()


def test_read_prices_refuses_a_table_that_prices_nothing(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[models]\n", encoding="utf-8")
    with pytest.raises(UsageError, match="prices no model"):
        read_prices(path)
    path.write_text('[models."a"]\ninput_per_mtok = inf\noutput_per_mtok = 1\n', encoding="utf-8")
    with pytest.raises(UsageError, match="must be a number of US dollars"):
        read_prices(path)


# --- budgets of a batch --------------------------------------------------------------------------


def write_tasks(path: Path, count: int, **fields: object) -> Path:
    lines = [{"seed": "calculator", "id": f"t{n}", **fields} for n in range(1, count + 1)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def statuses(out: Path) -> list[tuple[str, str]]:
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return [(line["id"], line["status"]) for line in lines]


def test_a_batch_budget_stops_the_batch_and_resume_continues_within_what_is_left(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    provider.default = provider_reply(FIXED_CALCULATOR)
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4)
    out = tmp_path / "results.jsonl"

    first = run_agent(
        "batch",
        str(tasks),
        "--out",
        str(out),
        "--jobs",
        "1",
        "--max-planner-calls",
        "2",
        "--json",
    )

    # Two calls, two tasks passed; the other two never started and say why.
    assert first.returncode == 6, first.stderr
    assert len(provider.requests) == 2
    assert statuses(out) == [("t1", "passed"), ("t2", "passed"), ("t3", "budget"), ("t4", "budget")]
    summary = first.json()
    assert summary["counts"]["budget"] == 2
    assert summary["budget"] == "2 of 2 planner calls (--max-planner-calls)"
    assert summary["spend"]["planner_calls"] == 2
    line = json.loads(out.read_text(encoding="utf-8").splitlines()[2])
    assert line["error"]["message"].startswith("not started: the budget is spent")
    assert line["run_id"] is None

    # The budget is the batch's: 2 of 3 calls are spent already, so one more task runs.
    second = run_agent(
        "batch", str(tasks), "--out", str(out), "--resume", "--max-planner-calls", "3"
    )
    assert second.returncode == 6, second.stderr
    assert len(provider.requests) == 3
    # Run at once, either task may get the call; the other ends as budget.
    assert sorted(status for _, status in statuses(out)[4:]) == ["budget", "passed"]
    assert "reached: 3 of 3 planner calls" in second.stdout

    third = run_agent("batch", str(tasks), "--out", str(out), "--resume", "--json")
    assert third.returncode == 0, third.stderr
    assert len(provider.requests) == 4
    assert third.json()["counts"] == {**third.json()["counts"], "passed": 4, "budget": 0}
    assert third.json()["spend"]["planner_calls"] == 4

    # The report counts each task once, by its last line.
    html = tmp_path / "report.html"
    assert run_agent("report", str(out), "--html", str(html)).returncode == 0
    page = html.read_text(encoding="utf-8")
    assert "100.0%" in page
    assert page.count('data-status="passed"') == 4


def test_a_task_the_budget_stops_mid_run_keeps_its_attempts(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    wrong_forever(provider)
    tasks = write_tasks(tmp_path / "tasks.jsonl", 1, attempts=5)
    out = tmp_path / "results.jsonl"

    done = run_agent("batch", str(tasks), "--out", str(out), "--max-tokens", "500")

    assert done.returncode == 6, done.stderr
    assert len(provider.requests) == 2
    (line,) = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    assert line["status"] == "budget"
    assert line["error"]["kind"] == "budget"
    assert line["spend"]["planner_calls"] == 2
    assert line["tokens"] == 732
    assert line["run_id"]  # its record keeps the attempts made
    replay = run_agent("replay", line["run_id"])
    assert "test 1 (calculator.py): recorded failed" in replay.stdout
    assert "test 2 (calculator.py): recorded failed" in replay.stdout

"""``agent validate``: one verdict per plan file, exit 0 only if all pass, nothing run or changed.

Every test runs the installed ``agent`` console script as a subprocess.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXED_CALCULATOR, AgentRun, FakeProvider

from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]
WritePlan = Callable[..., Path]

GOOD: dict[str, Any] = {"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]}
TEST_FILE: dict[str, Any] = {"files": [{"path": "check_calculator.py", "content": "pass\n"}]}
NOT_EDITABLE_LINE = (
    "  [patch-contract:path-not-editable] (check_calculator.py) "
    "the path is not editable (editable: calculator.py)"
)


def validate(run_agent: RunAgent, *args: str | Path) -> AgentRun:
    done = run_agent("validate", *map(str, args), timeout=60)
    assert "Traceback" not in done.stderr
    assert "Traceback" not in done.stdout
    return done


def verdicts(done: AgentRun) -> list[dict[str, Any]]:
    """The JSON lines of ``--json``: every stdout line must be one JSON object."""
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_valid_plan_passes_with_exit_0(run_agent: RunAgent, write_plan: WritePlan) -> None:
    plan = write_plan(GOOD)
    done = validate(run_agent, plan, "--seed", "calculator")
    assert done.returncode == 0
    assert done.stdout == f"ok {plan}\n"


def test_rejected_plan_names_rule_and_file_and_exits_4(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    plan = write_plan(TEST_FILE)
    done = validate(run_agent, plan, "--seed", "calculator")
    assert done.returncode == 4
    assert done.stdout.splitlines() == [f"rejected {plan}:", NOT_EDITABLE_LINE]


@pytest.mark.parametrize(
    ("plans", "exit_code"),
    [
        pytest.param(["good"], 0, id="one-good"),
        pytest.param(["good", "good"], 0, id="two-good"),
        pytest.param(["bad"], 4, id="one-bad"),
        pytest.param(["good", "bad"], 4, id="good-then-bad"),
        pytest.param(["bad", "good"], 4, id="bad-then-good"),
        pytest.param(["good", "missing"], 4, id="good-then-missing"),
    ],
)
def test_exit_0_only_if_every_plan_passes(
    run_agent: RunAgent, write_plan: WritePlan, tmp_path: Path, plans: list[str], exit_code: int
) -> None:
    made = {"good": lambda: write_plan(GOOD), "bad": lambda: write_plan(TEST_FILE)}
    paths = [made[kind]() if kind in made else tmp_path / "missing.json" for kind in plans]
    done = validate(run_agent, *paths, "--seed", "calculator", "--json")
    assert done.returncode == exit_code
    assert [(v["file"], v["ok"]) for v in verdicts(done)] == [
        (str(path), kind == "good") for path, kind in zip(paths, plans, strict=True)
    ]


def test_json_gives_one_verdict_line_per_file_naming_every_rule(
    run_agent: RunAgent, write_plan: WritePlan, tmp_path: Path
) -> None:
    not_utf8 = tmp_path / "latin-1.json"
    not_utf8.write_bytes(b'{"files": [{"path": "calculator.py", "content": "caf\xe9"}]}')
    too_big = tmp_path / "huge.json"
    too_big.write_text(json.dumps({"files": [{"path": "calculator.py", "content": "x" * 2**20}]}))
    cases: list[tuple[Path, list[tuple[str, str | None]]]] = [
        (write_plan(GOOD), []),
        (
            write_plan(
                {
                    "files": [
                        {"path": "../calculator.py", "content": "x = '\u202e'\n"},
                        {"path": "calculator.py", "content": "\x00" + "x" * 12_000},
                    ]
                }
            ),
            [
                ("path-segment", "../calculator.py"),
                ("path-not-editable", "../calculator.py"),
                ("content-invisible", "../calculator.py"),
                ("content-nul", "calculator.py"),
                ("total-size", None),
            ],
        ),
        (write_plan({"files": []}), [("file-count", None)]),
        (write_plan({"files": [{"path": "calculator.py"}]}), [("plan-shape", None)]),
        (write_plan('{"files": [], "files": []}'), [("plan-json", None)]),
        (write_plan("not json"), [("plan-file", None)]),
        (not_utf8, [("plan-file", None)]),
        (too_big, [("plan-json", None)]),
        (tmp_path / "missing.json", [("plan-file", None)]),
        (tmp_path, [("plan-file", None)]),
    ]
    done = validate(run_agent, *[path for path, _ in cases], "--seed", "calculator", "--json")
    assert done.returncode == 4
    lines = verdicts(done)
    assert [v["file"] for v in lines] == [str(path) for path, _ in cases]
    for verdict, (_, expected) in zip(lines, cases, strict=True):
        assert set(verdict) == {"file", "ok", "rejections"}
        assert verdict["ok"] is (expected == [])
        assert [(r["rule"], r["path"]) for r in verdict["rejections"]] == expected
        assert all(r["message"] for r in verdict["rejections"])
    by_file = {v["file"]: v["rejections"] for v in lines}
    assert "larger than 1048576 bytes" in by_file[str(too_big)][0]["message"]
    assert "No such file" in by_file[str(tmp_path / "missing.json")][0]["message"]
    assert "Is a directory" in by_file[str(tmp_path)][0]["message"]


def test_missing_plan_file_is_a_verdict_and_the_next_file_is_still_checked(
    run_agent: RunAgent, write_plan: WritePlan, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-plan.json"
    good = write_plan(GOOD)
    done = validate(run_agent, missing, good, "--seed", "calculator")
    assert done.returncode == 4
    assert done.stdout.splitlines() == [
        f"rejected {missing}:",
        f"  [agent:plan-file] cannot read plan file '{missing}': No such file or directory",
        f"ok {good}",
    ]


def test_validate_leaves_the_seed_files_byte_for_byte_unchanged(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    root = calculator_seed().root

    def snapshot() -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    before = snapshot()
    plans = [
        write_plan(GOOD),
        write_plan(TEST_FILE),
        write_plan({"files": [{"path": "../calculator/calculator.py", "content": ""}]}),
    ]
    done = validate(run_agent, *plans, "--seed", "calculator")
    assert done.returncode == 4
    assert snapshot() == before


def test_validate_asks_no_provider_and_makes_no_sandbox(
    run_agent: RunAgent, write_plan: WritePlan, provider: FakeProvider
) -> None:
    done = validate(run_agent, write_plan(GOOD), "--seed", "calculator")
    assert done.returncode == 0
    assert provider.requests == []
    # Validating runs nothing at all: not bwrap, not any other process.
    assert done.processes == ()


def test_validate_needs_no_provider_configuration(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    blank = {"CODING_AGENT_BASE_URL": "", "CODING_AGENT_MODEL": "", "CODING_AGENT_API_KEY": ""}
    done = run_agent("validate", str(write_plan(GOOD)), "--seed", "calculator", env=blank)
    assert (done.returncode, done.stdout.startswith("ok ")) == (0, True)


def test_unknown_seed_exits_2_with_a_clear_message(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    done = validate(run_agent, write_plan(GOOD), "--seed", "no-such-seed")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == (
        "agent: usage error: unknown seed 'no-such-seed' "
        "(known: calculator; see `agent seeds list`)"
    )


def test_unknown_seed_with_json_prints_one_error_object(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    done = validate(run_agent, write_plan(GOOD), "--seed", "no-such-seed", "--json")
    assert done.returncode == 2
    error = done.json()["error"]
    assert error["kind"] == "usage"
    assert "unknown seed 'no-such-seed'" in error["message"]
    assert (error["planner_task_id"], error["sandbox_id"]) == (None, None)


def test_validate_without_a_plan_file_is_a_usage_error(run_agent: RunAgent) -> None:
    done = validate(run_agent, "--seed", "calculator")
    assert done.returncode == 2
    assert "Missing argument" in done.stderr

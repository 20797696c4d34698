"""Hidden tests: run in the sandbox, never sent to a planner, never editable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun, FakeProvider

MARKER = "HIDDEN-MARKER-5e1c0b"
BROKEN = "def add(left, right):\n    return left - right\n"
# Passes the visible test only.
CHEAT = "def add(left, right):\n    return 5 if (left, right) == (2, 3) else 0\n"
FIXED = "def add(left, right):\n    return left + right\n"


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    folder = tmp_path / "held-out"
    folder.mkdir()
    (folder / "calculator.py").write_text(BROKEN)
    (folder / "test_calculator.py").write_text(
        "import unittest\nfrom calculator import add\n\n\n"
        "class Visible(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    (folder / "held_out_test.py").write_text(
        f"# {MARKER}\nimport unittest\nfrom calculator import add\n\n\n"
        "class HeldOut(unittest.TestCase):\n"
        "    def test_negative(self):\n"
        f"        self.assertEqual(add(-4, -6), -10, {MARKER!r})\n"
    )
    (folder / "seed.toml").write_text(
        'name = "held-out"\n'
        'description = "add() with a held-out test"\n'
        'tests = ["test_calculator.py"]\n'
        'hidden_tests = ["held_out_test.py"]\n'
        'editable = ["calculator.py"]\n'
        'test_command = ["python", "-m", "unittest", "discover", "-v", "-p", "*test*.py"]\n'
        'default_prompt = "Fix add."\n'
    )
    return folder


def test_a_hidden_test_runs_in_the_sandbox_and_never_reaches_the_provider(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], seed: Path
) -> None:
    provider.reply_plan(("calculator.py", CHEAT))
    provider.reply_plan(("calculator.py", FIXED))

    done = run_agent("run", "--seed", str(seed), "--attempts", "2", "--json")

    assert done.returncode == 0, done.stderr
    first, second = done.json()["attempts"]
    # It ran, and the user sees its failure in full.
    assert first["verdict"] == "failed"
    assert MARKER in first["test_output"]
    assert "test_negative" in second["test_output"]
    assert second["verdict"] == "passed"
    # No request carried it: not the file, not its output; the repair is told only this much.
    assert len(provider.requests) == 2
    for request in provider.requests:
        assert MARKER.encode() not in request.body
        assert b"held_out_test" not in request.body
        assert b"HeldOut" not in request.body
    repair = json.loads(provider.requests[1].body)["messages"][-1]["content"]
    assert "a hidden test failed" in repair
    assert "5 if (left, right)" in json.loads(provider.requests[1].body)["messages"][-2]["content"]


def test_a_plan_naming_a_hidden_test_is_refused_without_showing_it(
    run_agent: Callable[..., AgentRun], seed: Path, write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "held_out_test.py", "content": "pass\n"}]})

    done = run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json")

    assert done.returncode == 4
    error = done.json()["error"]
    assert [r["rule"] for r in error["rejections"]] == ["path-not-editable"]
    assert MARKER not in done.stdout + done.stderr
    assert done.sandboxes == []


def test_an_editable_pattern_cannot_reach_a_hidden_test(
    run_agent: Callable[..., AgentRun], seed: Path
) -> None:
    manifest = seed / "seed.toml"
    manifest.write_text(manifest.read_text().replace('["calculator.py"]', '["*.py"]'))

    done = run_agent("seeds", "show", str(seed))

    assert done.returncode == 2
    assert "held_out_test.py" in done.stderr
    assert "never editable" in done.stderr


def test_seeds_show_lists_hidden_tests(run_agent: Callable[..., AgentRun], seed: Path) -> None:
    shown = run_agent("seeds", "show", str(seed))
    as_json = run_agent("seeds", "show", str(seed), "--json").json()

    assert "hidden tests:   held_out_test.py (run in the sandbox, never sent to a planner)" in (
        shown.stdout
    )
    assert as_json["hidden_test_files"] == ["held_out_test.py"]
    assert "held_out_test.py" in as_json["test_files"]

"""`agent replay` rebuilds each recorded policy through the checks a seed's parameters go
through (declared types, then the policy's configure()), so a record handed over by anyone
cannot give a policy what no seed could: a list past its bound, a value of the wrong type."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXED_CALCULATOR, AgentRun

from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]

MANIFEST = textwrap.dedent(
    """\
    name = "calculator-ast"
    description = "the calculator"
    files = ["calculator.py", "check_calculator.py"]
    tests = ["check_calculator.py"]
    editable = ["calculator.py"]
    test_command = ["python", "-m", "unittest", "-v", "check_calculator"]
    default_prompt = "Fix add."
    """
)
# The seed's table when the run is recorded; taken out before each replay, so that the
# python-ast policy a replay applies is the one rebuilt from the record.
AST_TABLE = '\n[policies.python-ast]\nalso_forbid = ["shutil"]\n'


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    root = tmp_path / "calculator-ast"
    shutil.copytree(calculator_seed().root, root)
    (root / "seed.toml").write_text(MANIFEST + AST_TABLE, encoding="utf-8")
    return root


@pytest.fixture
def record(
    seed: Path, run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> dict[str, Any]:
    """The record of a passing run with python-ast switched on (also forbidding shutil),
    its seed then left as it was but for the policy table (which no seed hash covers)."""
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    run = run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json")
    assert run.returncode == 0, run.stderr
    (seed / "seed.toml").write_text(MANIFEST, encoding="utf-8")
    folder = tmp_path / "state" / "sandboxed-coding-agent" / "run-records"
    recorded = json.loads((folder / f"{run.json()['run_id']}.json").read_text(encoding="utf-8"))
    assert isinstance(recorded, dict)
    return recorded


def ast_fields(record: dict[str, Any]) -> dict[str, Any]:
    """The fields the record keeps for python-ast."""
    [policy] = [p for p in record["policies"] if p["name"] == "python-ast"]
    fields = policy["parameters"]
    assert isinstance(fields, dict)
    return fields


def replay(run_agent: RunAgent, tmp_path: Path, record: dict[str, Any], *options: str) -> AgentRun:
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return run_agent("replay", str(path), *options)


def assert_refused(done: AgentRun, record: dict[str, Any], *expected: str) -> None:
    """One usage error line naming the run and the policy, before any sandbox started."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.sandboxes == []
    for text in (f"run {record['run_id']}", "recorded policy 'python-ast'", *expected):
        assert text in done.stderr, done.stderr


def test_an_ordinary_record_replays_with_its_recorded_python_ast_parameters(
    record: dict[str, Any], run_agent: RunAgent, tmp_path: Path
) -> None:
    assert "shutil" in ast_fields(record)["forbidden"]

    done = replay(run_agent, tmp_path, record, "--json")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["matches"] is True

    # The rebuilt policy forbids what the run's did: shutil, which only the record names now.
    record["tests"][0]["plan"]["files"][0]["content"] = FIXED_CALCULATOR + "\nimport shutil\n"
    done = replay(run_agent, tmp_path, record, "--json")

    assert done.returncode == 1, done.stderr
    [test] = json.loads(done.stdout)["tests"]
    assert test["passed"] is None
    assert "[python-ast:forbidden-import]" in test["problem"]
    assert "shutil" in test["problem"]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("forbidden", [f"module{n}" for n in range(300_000)], "300,000 entries; at most 1,000"),
        ("paths", [f"dir{n}/*.py" for n in range(1_001)], "1,001 entries; at most 1,000"),
        ("forbidden", ["x" * 257], "an entry of 257 characters; at most 256"),
    ],
    ids=["300000-forbidden-names", "1001-paths", "a-257-character-name"],
)
def test_a_record_past_a_python_ast_bound_is_refused_before_any_test(
    record: dict[str, Any],
    run_agent: RunAgent,
    tmp_path: Path,
    field: str,
    value: list[str],
    expected: str,
) -> None:
    ast_fields(record)[field] = value

    done = replay(run_agent, tmp_path, record)

    assert_refused(done, record, expected)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("forbidden", "socket", "parameter 'forbid' must be a list of strings"),
        ("paths", 5, "parameter 'paths' must be a list of strings"),
        ("paths", ["**/*.py", 7], "item 1 is an integer"),
    ],
    ids=["forbidden-as-a-string", "paths-as-a-number", "a-number-in-paths"],
)
def test_a_record_with_a_python_ast_value_of_the_wrong_type_is_refused_by_name(
    record: dict[str, Any],
    run_agent: RunAgent,
    tmp_path: Path,
    field: str,
    value: object,
    expected: str,
) -> None:
    ast_fields(record)[field] = value

    done = replay(run_agent, tmp_path, record)

    assert_refused(done, record, expected)


def test_a_record_giving_python_ast_a_field_no_parameter_sets_is_refused(
    record: dict[str, Any], run_agent: RunAgent, tmp_path: Path
) -> None:
    # A record never keeps a policy's activation: no parameter sets it, and no seed can.
    ast_fields(record)["activation"] = "always"

    done = replay(run_agent, tmp_path, record)

    assert_refused(done, record, "no field 'activation'")


def test_a_record_listing_python_ast_twice_is_refused(
    record: dict[str, Any], run_agent: RunAgent, tmp_path: Path
) -> None:
    # Each entry within the bounds, but a run applies a policy once: a record with many
    # would make every check of the replay that much slower.
    [entry] = [p for p in record["policies"] if p["name"] == "python-ast"]
    record["policies"].append({**entry, "parameters": {**entry["parameters"], "paths": ["*.py"]}})

    done = replay(run_agent, tmp_path, record)

    assert_refused(done, record, "twice")

"""Run records from anyone: `agent diff` and `agent replay` trust a record no further than a
plan file. Each hostile record is one clear usage error (exit 2), never a traceback, exit 70,
a patch that writes outside the seed's editable files, or a replay with checks switched off."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, FIXED_CALCULATOR, AgentRun, FakeProvider

from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]
OTHER_RUN = "run-00000000000000ff"


def records_folder(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sandboxed-coding-agent" / "run-records"


def agent(agent_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with no provider variables: diff and replay need none."""
    env = {k: v for k, v in agent_env.items() if not k.startswith("CODING_AGENT_")}
    return subprocess.run(
        [str(AGENT), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def assert_usage_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert "internal error" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


@pytest.fixture
def record(provider: FakeProvider, run_agent: RunAgent, tmp_path: Path) -> dict[str, Any]:
    """The record of a passing calculator run, as JSON."""
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    run = run_agent("run", "--json")
    assert run.returncode == 0, run.stderr
    path = records_folder(tmp_path) / f"{run.json()['run_id']}.json"
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def save(tmp_path: Path, record: dict[str, Any], name: str = "edited.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(record), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("../../etc/passwd", "path-segment"),
        ("/etc/passwd", "path-segment"),
        (".git/hooks/pre-commit", "path-not-editable"),
        ("check_calculator.py", "path-not-editable"),
        ("calculator.py\n+++ b/evil.sh\nnew file mode 100755", "path-control"),
        ("calculator\x1b[2J.py", "path-control"),
    ],
)
def test_diff_refuses_a_recorded_patch_the_contract_refuses(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path, path: str, rule: str
) -> None:
    record["tests"][0]["plan"]["files"][0]["path"] = path
    record["originals"][path] = "old\n"

    done = agent(agent_env, "diff", save(tmp_path, record))

    assert_usage_error(done, "breaks the patch contract", f"patch-contract:{rule}")


def test_diff_refuses_content_with_a_lone_surrogate(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    record["tests"][0]["plan"]["files"][0]["content"] = "SURROGATE"
    edited = save(tmp_path, record)
    text = Path(edited).read_text(encoding="utf-8")
    Path(edited).write_text(text.replace("SURROGATE", "\\ud800"), encoding="utf-8")

    done = agent(agent_env, "diff", edited)

    assert_usage_error(done, "damaged", "lone surrogate", "record.tests[0].plan.files[0].content")


@pytest.mark.parametrize(
    ("chosen", "tests", "expected"),
    [
        (99, None, "chosen_test is 99, but it holds tests 0 to 0"),
        (-1, None, "chosen_test is -1"),  # never "the last one"
        (0, [], "chosen_test is 0, but it holds no test"),
    ],
)
def test_diff_and_replay_refuse_a_chosen_test_that_is_no_test(
    record: dict[str, Any],
    agent_env: dict[str, str],
    tmp_path: Path,
    chosen: int,
    tests: list[Any] | None,
    expected: str,
) -> None:
    record["chosen_test"] = chosen
    if tests is not None:
        record["tests"] = tests
    edited = save(tmp_path, record)

    for command in ("diff", "replay"):
        assert_usage_error(agent(agent_env, command, edited), "damaged", expected)


def test_a_record_must_hold_the_run_it_is_asked_for(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    asked = record["run_id"]
    record["run_id"] = OTHER_RUN
    (records_folder(tmp_path) / f"{asked}.json").write_text(json.dumps(record), encoding="utf-8")
    renamed = save(tmp_path, record, f"{asked}.json")
    record["run_id"] = "../../x\x1b[31m"
    hostile = save(tmp_path, record)

    for reference in (asked, renamed):
        for command in ("diff", "replay"):
            assert_usage_error(
                agent(agent_env, command, reference),
                f"asked for as run {asked} but holds run {OTHER_RUN}",
            )
    for command in ("diff", "replay"):
        assert_usage_error(agent(agent_env, command, hostile), "is not a run ID")


def test_diff_still_prints_a_recorded_patch_the_contract_accepts(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    done = agent(agent_env, "diff", save(tmp_path, record, f"{record['run_id']}.json"))

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("diff --git a/calculator.py b/calculator.py\n")


AST_MANIFEST = textwrap.dedent(
    """\
    name = "calculator-ast"
    description = "the calculator, with the python-ast policy switched on"
    files = ["calculator.py", "check_calculator.py"]
    tests = ["check_calculator.py"]
    editable = ["calculator.py"]
    test_command = ["python", "-m", "unittest", "-v", "check_calculator"]
    default_prompt = "Fix add."

    [policies.python-ast]
    """
)
# Passes the calculator's test, and imports what python-ast forbids.
SNEAKY_CALCULATOR = FIXED_CALCULATOR + "\nimport subprocess  # noqa\n"


@pytest.fixture
def ast_seed(tmp_path: Path) -> Path:
    root = tmp_path / "calculator-ast"
    shutil.copytree(calculator_seed().root, root)
    (root / "seed.toml").write_text(AST_MANIFEST, encoding="utf-8")
    return root


def run_on(
    seed: Path, run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> dict[str, Any]:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    run = run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json")
    assert run.returncode == 0, run.stderr
    path = records_folder(tmp_path) / f"{run.json()['run_id']}.json"
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_replay_keeps_the_policies_the_seed_switches_on_whatever_the_record_says(
    ast_seed: Path,
    run_agent: RunAgent,
    write_plan: Callable[..., Path],
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    record = run_on(ast_seed, run_agent, write_plan, tmp_path)
    assert "python-ast" in [p["name"] for p in record["policies"]]
    record["policies"] = []  # as if no policy had checked the run
    record["tests"][0]["plan"]["files"][0]["content"] = SNEAKY_CALCULATOR

    done = agent(agent_env, "replay", save(tmp_path, record), "--json")

    assert done.returncode == 1, done.stderr
    [test] = json.loads(done.stdout)["tests"]
    assert test["passed"] is None
    assert "[python-ast:" in test["problem"]


def test_replay_applies_a_recorded_policy_with_its_recorded_parameters(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path
) -> None:
    # The calculator does not switch python-ast on; the record says the run applied it,
    # forbidding only what the recorded plan uses.
    record["policies"].append(
        {"name": "python-ast", "parameters": {"forbidden": ["sys.path"], "paths": ["**/*.py"]}}
    )
    record["tests"][0]["plan"]["files"][0]["content"] = (
        FIXED_CALCULATOR + "\nimport sys\nsys.path\n"
    )

    done = agent(agent_env, "replay", save(tmp_path, record), "--json")

    assert done.returncode == 1, done.stderr
    [test] = json.loads(done.stdout)["tests"]
    assert "[python-ast:" in test["problem"]
    assert "sys.path" in test["problem"]

    record["policies"][-1]["parameters"] = {"no_such_field": 1}
    assert_usage_error(
        agent(agent_env, "replay", save(tmp_path, record)),
        "recorded policy 'python-ast' with parameters it does not take",
    )


@pytest.mark.parametrize("missing", ["null", "absent"])
def test_replay_counts_a_record_without_a_seed_hash_as_a_changed_seed(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path, missing: str
) -> None:
    if missing == "null":
        record["seed"]["sha256"] = None
    else:
        del record["seed"]["sha256"]
    edited = save(tmp_path, record)

    refused = agent(agent_env, "replay", edited)
    forced = agent(agent_env, "replay", edited, "--force")

    if missing == "absent":  # a field every record has: the record is damaged
        assert_usage_error(refused, "damaged", "sha256")
        return
    assert_usage_error(refused, "has changed since run", "the record holds no hash of them")
    assert forced.returncode == 0, forced.stderr


@pytest.mark.parametrize("command", ["diff", "replay"])
def test_a_recorded_seed_folder_with_a_line_break_is_named_on_the_errors_one_line(
    record: dict[str, Any], agent_env: dict[str, str], tmp_path: Path, command: str
) -> None:
    record["seed"]["name"] = "not-installed"
    record["seed"]["root"] = "/nonexistent\x1b[2J\nFAKE LINE"

    done = agent(agent_env, command, save(tmp_path, record))

    assert_usage_error(done, "/nonexistent\\x1b[2J\\nFAKE LINE")

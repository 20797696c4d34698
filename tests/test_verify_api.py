"""``sandboxed_coding_agent.verify``: a plan tested in a real sandbox, as a verdict with a reward.

The reward draws the line a trainer needs: 1.0 for a pass, 0.0 for anything the patch did
(a failing test, a refused plan), ``None`` when no verdict was reached (the sandbox could
not be made). Bad input raises ``VerifyError``, and nothing is ever printed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_grading import FIX_BREAKING_NEG, FIXED, HALF_FIXED, graded_seed_folder

import sandboxed_coding_agent
from sandboxed_coding_agent import Verdict, VerifyError, verify, verify_many
from sandboxed_coding_agent.core.errors import AgentError
from sandboxed_coding_agent.core.serialization import structure, to_json

FIXED_ADD = '"""A tiny calculator."""\n\n\ndef add(left, right):\n    return left + right\n'
BROKEN_ADD = '"""A tiny calculator."""\n\n\ndef add(left, right):\n    return 0\n'
FIX_DIFF = "".join(
    f"{line}\n"
    for line in (
        "--- a/calculator.py",
        "+++ b/calculator.py",
        "@@ -3,4 +3,4 @@",
        " ",
        " def add(left, right):",
        '     """Return the sum of left and right."""',
        "-    return left - right",
        "+    return left + right",
    )
)


def whole(path: str, content: str) -> dict[str, object]:
    return {"files": [{"path": path, "content": content}]}


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run records in the test's own state folder, never the real one."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    monkeypatch.delenv("SANDBOXED_CODING_AGENT_BWRAP", raising=False)
    return state


def record_of(state: Path, run_id: str) -> dict[str, object]:
    [path] = state.rglob(f"{run_id}.json")
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_a_passing_plan_earns_1_with_its_evidence_and_record(own_state: Path) -> None:
    verdict = verify("calculator", json.dumps(whole("calculator.py", FIXED_ADD)))

    assert verdict.passed is True
    assert verdict.reward == 1.0
    assert verdict.error is None
    assert verdict.evidence == "framework"
    assert verdict.test_report is not None
    assert verdict.test_report.passed
    assert verdict.changed_files == ("calculator.py",)
    assert verdict.run_id is not None
    record = record_of(own_state, verdict.run_id)
    assert record["run_id"] == verdict.run_id
    assert record["result"]["tests_passed"] is True  # type: ignore[index]


def test_a_failing_plan_earns_0() -> None:
    verdict = verify("calculator", whole("calculator.py", BROKEN_ADD))

    assert (verdict.passed, verdict.reward, verdict.error) == (False, 0.0, None)
    assert verdict.evidence == "framework"
    assert verdict.test_exit_code == 1
    assert "FAILED" in verdict.test_output


def test_a_unified_diff_is_a_plan() -> None:
    verdict = verify("calculator", FIX_DIFF)

    assert verdict.reward == 1.0
    assert "+    return left + right" in verdict.diff


def test_without_a_record_no_run_id_and_no_record_file(own_state: Path) -> None:
    verdict = verify("calculator", FIX_DIFF, record=False)

    assert verdict.reward == 1.0
    assert verdict.run_id is None
    assert not list(own_state.rglob("run-*.json"))


def test_a_plan_the_contract_refuses_earns_0_with_the_policy_error(own_state: Path) -> None:
    verdict = verify("calculator", whole("check_calculator.py", "print('rewritten')\n"))

    assert (verdict.passed, verdict.reward) == (False, 0.0)
    assert verdict.error is not None
    assert verdict.error.kind == "policy"
    assert [r.rule for r in verdict.error.rejections] == ["path-not-editable"]
    assert verdict.sandbox_id is None
    assert verdict.run_id is not None  # refused by the run: its record says so
    assert record_of(own_state, verdict.run_id)["error"]["kind"] == "policy"  # type: ignore[index]


@pytest.mark.parametrize(
    ("plan", "rule"),
    [
        ("I think the fix is to add the numbers.", "plan-json"),
        ("x" * (1024 * 1024 + 1), "plan-json"),
        ('{"edits": [{"path": "calculator.py", "search": "nowhere", "replace": ""}]}', None),
    ],
)
def test_text_that_is_no_plan_earns_0_as_a_refusal(plan: str, rule: str | None) -> None:
    verdict = verify("calculator", plan)

    assert verdict.reward == 0.0
    assert verdict.error is not None
    assert verdict.error.kind == "policy"
    assert rule is None or verdict.error.rejections[0].rule == rule


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: verify("no-such-seed", FIX_DIFF), "unknown seed 'no-such-seed'"),
        (lambda: verify("./missing-folder", FIX_DIFF), "no such file"),
        (lambda: verify("calculator", FIX_DIFF, runner="nowhere"), "unknown runner 'nowhere'"),
        (lambda: verify("calculator", FIX_DIFF, policies=["nope"]), "unknown policy 'nope'"),
        (lambda: verify("calculator", FIX_DIFF, limits={"memory_mb": 1}), "memory_mb = 1"),
        (lambda: verify("calculator", FIX_DIFF, limits={"ram": 1}), "unknown limit 'ram'"),
        (lambda: verify("calculator", 42), "plan must be"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_raises_verify_error_with_the_clis_message(
    call: object, message: str, own_state: Path
) -> None:
    with pytest.raises(VerifyError, match=message) as raised:
        call()  # type: ignore[operator]

    assert isinstance(raised.value, AgentError)
    assert not own_state.exists() or not list(own_state.rglob("run-*.json"))


def test_the_message_is_the_one_agent_run_gives(
    run_agent: Callable[..., Any], tmp_path: Path
) -> None:
    plan = tmp_path / "plan.diff"
    plan.write_text(FIX_DIFF)
    cli = run_agent("run", "--seed", "no-such-seed", "--plan", str(plan))

    with pytest.raises(VerifyError) as raised:
        verify("no-such-seed", FIX_DIFF)

    assert cli.returncode == 2
    assert f"agent: usage error: {raised.value.message}\n" == cli.stderr


@pytest.mark.parametrize("bwrap", ["/bin/false", "/no/such/bwrap"])
def test_a_sandbox_that_cannot_start_is_no_verdict(
    bwrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOXED_CODING_AGENT_BWRAP", bwrap)

    verdict = verify("calculator", FIX_DIFF)

    assert verdict.reward is None
    assert verdict.passed is False
    assert verdict.error is not None
    assert verdict.error.kind == ("sandbox" if bwrap == "/bin/false" else "configuration")


@pytest.mark.parametrize(
    ("content", "passed", "binary", "partial"),
    [
        (FIXED, True, 1.0, 1.0),
        (HALF_FIXED, False, 0.0, 0.5),  # one of the two fail_to_pass tests
        (FIX_BREAKING_NEG, False, 0.0, 0.0),  # a pass_to_pass test broke: nothing
    ],
)
def test_a_graded_seed_earns_1_only_resolved_and_a_fraction_with_partial_credit(
    content: str, passed: bool, binary: float, partial: float, tmp_path: Path
) -> None:
    seed = graded_seed_folder(tmp_path / "graded")
    plan = whole("calculator.py", content)

    plain = verify(str(seed), plan)
    credited = verify(seed, plan, partial_credit=True)

    assert (plain.passed, plain.reward) == (passed, binary)
    assert (credited.passed, credited.reward) == (passed, partial)
    assert plain.grade is not None
    assert plain.grade.resolution == {1.0: "FULL", 0.5: "PARTIAL", 0.0: "NO"}[partial]


def test_partial_credit_leaves_an_ungraded_seeds_failure_at_0() -> None:
    assert verify("calculator", whole("calculator.py", BROKEN_ADD), partial_credit=True).reward == 0


def test_nothing_is_printed(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    verify("calculator", FIX_DIFF)
    verify("calculator", whole("calculator.py", BROKEN_ADD))
    verify("calculator", "not a plan")
    with pytest.raises(VerifyError):
        verify("no-such-seed", FIX_DIFF)
    list(verify_many([("calculator", FIX_DIFF)] * 2, jobs=2))
    monkeypatch.setenv("SANDBOXED_CODING_AGENT_BWRAP", "/bin/false")
    verify("calculator", FIX_DIFF)

    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_a_verdict_round_trips_through_the_converter() -> None:
    for verdict in (
        verify("calculator", FIX_DIFF),
        verify("calculator", whole("check_calculator.py", "x")),
    ):
        assert structure(json.loads(to_json(verdict)), Verdict) == verdict


def test_verify_many_yields_each_items_verdict_with_its_index() -> None:
    items: list[Any] = [
        ("calculator", FIX_DIFF),
        {"seed": "calculator", "plan": whole("calculator.py", BROKEN_ADD)},
        ("calculator", "no plan at all"),
        ("calculator", whole("calculator.py", FIXED_ADD)),
    ]

    found = dict(verify_many(items, jobs=2))

    assert {index: verdict.reward for index, verdict in found.items()} == {
        0: 1.0,
        1: 0.0,
        2: 0.0,
        3: 1.0,
    }
    assert found[2].error is not None
    assert found[2].error.kind == "policy"
    assert len({verdict.run_id for verdict in found.values()}) == 4


def test_verify_many_checks_every_item_before_testing_any(own_state: Path) -> None:
    with pytest.raises(VerifyError, match=r"^item 1: unknown seed 'nope'"):
        verify_many([("calculator", FIX_DIFF), ("nope", FIX_DIFF)])
    with pytest.raises(VerifyError, match="item 0: expected a"):
        verify_many(["calculator"])  # type: ignore[list-item]
    assert not own_state.exists() or not list(own_state.rglob("run-*.json"))


def test_verify_many_names_the_executors_there_are() -> None:
    with pytest.raises(
        VerifyError, match="unknown executor 'dask'; the executors are: 'local', 'ray'"
    ):
        verify_many([("calculator", FIX_DIFF)], executor="dask")
    with pytest.raises(VerifyError, match="ray_address and ray_cpus go with executor='ray'"):
        verify_many([("calculator", FIX_DIFF)], ray_address="127.0.0.1:1")
    with pytest.raises(VerifyError, match="ray_cpus must be a number above 0"):
        verify_many([("calculator", FIX_DIFF)], executor="ray", ray_cpus=0)
    with pytest.raises(VerifyError, match="jobs must be"):
        verify_many([("calculator", FIX_DIFF)], jobs=0)
    with pytest.raises(VerifyError, match="unknown option 'runer'"):
        verify_many([("calculator", FIX_DIFF)], runer="local")


def test_the_package_is_light_until_its_api_is_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, sandboxed_coding_agent as s\n"
        "print(sorted(m for m in sys.modules if m.startswith('sandboxed_coding_agent.')))\n"
        "s.verify\n"
        "print('sandboxed_coding_agent.verification' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "[]\nTrue\n", done.stderr
    assert sandboxed_coding_agent.__all__ == [
        "Verdict",
        "VerdictError",
        "VerifyError",
        "verify",
        "verify_many",
    ]

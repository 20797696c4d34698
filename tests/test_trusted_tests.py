"""A verdict held to a trusted list: the tests the unpatched seed ran, each of which a pass needs.

The code under test runs in the framework's process, so it can leave a failing
test out, turn it into a skip or an expected failure, or add a passing test of
its own. None of that yields a pass: the tests a pass needs were listed, with
their outcomes, by a run of the unpatched seed before any patch ran.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun
from test_verdict_forgery import FIXED, calculator_seed_folder, unittest_module

from sandboxed_coding_agent.core.verdicts.evidence import (
    NeededTest,
    TestCaseResult,
    TestList,
    TestReport,
)
from sandboxed_coding_agent.core.verdicts.trusted_tests import checked

#: The hidden test class is found while the loader inspects the hidden test module's names:
#: ``isinstance`` reads ``__class__``, a property of the object the module imported.
WHILE_LOADING = (
    "import sys, unittest\n"
    "class _Add:\n"
    "    @property\n"
    "    def __class__(self):\n"
    "        module = sys.modules.get('held_out_test')\n"
    "        held = getattr(module, 'HeldOut', None)\n"
    "        if held is not None:\n"
    "{action}"
    "        return _Add\n"
    "    def __call__(self, a, b):\n"
    "        return 5 if (a, b) == (2, 3) else a - b\n"
    "add = _Add()\n"
)
DECISIONS = {
    "an expected failure set at run time": (
        "            held.test_negative.__unittest_expecting_failure__ = True\n",
        {"xfailed"},
    ),
    "a skip set at run time": ("            held.__unittest_skip__ = True\n", {"skipped"}),
    "a borrowed test beside skipped ones": (
        "            held.__unittest_skip__ = True\n"
        "            module.TestBorrowed = type('TestBorrowed', (unittest.TestCase,),\n"
        "                {'test_borrowed': unittest.TestCase.setUp})\n",
        {"skipped", "error"},  # the guard may see the borrowed test for what it is
    ),
}
HIDDEN = "held_out_test.HeldOut.test_negative"
VISIBLE = "test_calculator.Visible.test_add"


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    return calculator_seed_folder(
        tmp_path / "listed",
        visible={"test_calculator.py": unittest_module("Visible", "test_add", 2, 3, 5)},
        hidden={"held_out_test.py": unittest_module("HeldOut", "test_negative", -4, -6, -10)},
    )


@pytest.fixture
def cache(tmp_path: Path) -> dict[str, str]:
    """The state folder (each test has its own), where the lists are kept."""
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def _run(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    text: str,
    env: dict[str, str],
) -> AgentRun:
    plan = write_plan({"files": [{"path": "calculator.py", "content": text}]})
    return run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json", env=env)


@pytest.mark.parametrize("name", sorted(DECISIONS))
def test_a_framework_decision_set_at_run_time_does_not_excuse_a_needed_test(
    name: str,
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    cache: dict[str, str],
) -> None:
    action, became = DECISIONS[name]
    done = _run(run_agent, write_plan, seed, WHILE_LOADING.format(action=action), cache)

    assert done.returncode == 1, (done.returncode, done.stderr)
    result = done.json()
    assert result["tests_passed"] is False
    report = result["test_report"]
    unmet = {test["id"]: test for test in report["unmet"]}
    assert HIDDEN in unmet, report
    assert unmet[HIDDEN]["unpatched"] == "failed"
    assert unmet[HIDDEN]["outcome"] in became
    assert report["needed"] == 2


def test_a_needed_test_left_out_of_the_run_fails_it_and_is_named_missing(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    cache: dict[str, str],
) -> None:
    # unittest never collects the hidden test (its module fails its import).
    hack = (
        Path(__file__).parent / "reward_hacks" / "the_hidden_test_module_made_to_fail_its_import.py"
    )
    done = _run(run_agent, write_plan, seed, hack.read_text(), cache)

    result = done.json()
    assert result["tests_passed"] is False
    ran = {test["id"] for test in result["test_report"]["tests"]}
    assert HIDDEN not in ran
    assert result["test_report"]["unmet"] == [
        {"id": HIDDEN, "outcome": "missing", "unpatched": "failed"}
    ]
    plan = write_plan({"files": [{"path": "calculator.py", "content": hack.read_text()}]})
    said = run_agent("run", "--seed", str(seed), "--plan", str(plan), env=cache)
    assert f"{HIDDEN} (missing)" in said.stdout + said.stderr


def test_the_honest_fix_passes_and_the_run_names_the_list_it_rested_on(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    cache: dict[str, str],
) -> None:
    done = _run(run_agent, write_plan, seed, FIXED, cache)

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert result["test_report"]["needed"] == 2
    assert result["test_report"]["unmet"] == []
    listed = {test["id"]: test["unpatched"] for test in result["test_list"]["tests"]}
    assert listed == {HIDDEN: "failed", VISIBLE: "failed"}
    assert result["test_list"]["partial"] is None


def test_the_list_is_made_once_per_seed_content(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    cache: dict[str, str],
) -> None:
    first = _run(run_agent, write_plan, seed, FIXED, cache)
    second = _run(run_agent, write_plan, seed, FIXED, cache)
    (seed / "held_out_test.py").write_text(
        unittest_module("HeldOut", "test_negative", -4, -6, -10) + "# changed\n"
    )
    third = _run(run_agent, write_plan, seed, FIXED, cache)

    listing = "listing the unpatched seed's tests"
    assert listing in first.stderr
    assert listing not in second.stderr
    assert listing in third.stderr
    # Two sandboxes the first time (the unpatched seed, then the patch), one the second.
    assert (len(first.sandboxes), len(second.sandboxes)) == (2, 1)
    assert first.json()["test_list"]["key"] == second.json()["test_list"]["key"]
    assert third.json()["test_list"]["key"] != first.json()["test_list"]["key"]


def test_a_cached_list_that_is_not_one_is_made_anew(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    cache: dict[str, str],
) -> None:
    first = _run(run_agent, write_plan, seed, FIXED, cache)
    key = first.json()["test_list"]["key"]
    cached = Path(cache["XDG_STATE_HOME"], "sandboxed-coding-agent", "test-lists", f"{key}.json")
    # A list that names no test would let anything pass, if it were believed.
    listed = json.loads(cached.read_text())
    for broken in ("{not json", json.dumps({**listed, "key": "0" * 64, "tests": []})):
        cached.write_text(broken)
        done = _run(run_agent, write_plan, seed, WHILE_LOADING.format(action=""), cache)

        assert done.json()["tests_passed"] is False
        assert "listing the unpatched seed's tests" in done.stderr
        assert done.json()["test_list"]["tests"] == listed["tests"]


def test_a_test_the_unpatched_seed_skipped_may_stay_skipped(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    skipped = (
        "import unittest\nfrom calculator import add\n\n\n"
        "class Later(unittest.TestCase):\n"
        "    @unittest.skip('not yet')\n"
        "    def test_later(self):\n        self.assertEqual(add(1, 1), 3)\n"
    )
    seed = calculator_seed_folder(
        tmp_path / "skips",
        visible={
            "test_calculator.py": unittest_module("Visible", "test_add", 2, 3, 5),
            "test_later.py": skipped,
        },
        hidden={"held_out_test.py": unittest_module("HeldOut", "test_negative", -4, -6, -10)},
    )
    done = _run(run_agent, write_plan, seed, FIXED, {})

    assert done.returncode == 0, done.stderr
    assert done.json()["test_list"]["tests"] == [
        {"id": HIDDEN, "unpatched": "failed"},
        {"id": "test_calculator.Visible.test_add", "unpatched": "failed"},
        {"id": "test_later.Later.test_later", "unpatched": "skipped"},
    ]


def test_a_test_module_the_unpatched_seed_cannot_import_makes_the_list_partial(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = calculator_seed_folder(
        tmp_path / "broken-import",
        visible={"test_calculator.py": unittest_module("Visible", "test_add", 2, 3, 5)},
        hidden={"held_out_test.py": unittest_module("HeldOut", "test_negative", -4, -6, -10)},
    )
    (seed / "calculator.py").write_text("def add(a, b)\n    return a - b\n")  # a syntax error
    env: dict[str, str] = {}

    fixed = _run(run_agent, write_plan, seed, FIXED, env)
    still_broken = _run(run_agent, write_plan, seed, "def add(a, b):\n    return a - b\n", env)

    assert fixed.returncode == 0, fixed.stderr
    assert "could not load" in fixed.json()["test_list"]["partial"]
    assert "list of needed tests is partial" in fixed.stderr
    assert still_broken.json()["tests_passed"] is False


def test_seeds_tests_lists_each_test_with_its_unpatched_outcome(
    run_agent: Callable[..., AgentRun], seed: Path, cache: dict[str, str]
) -> None:
    shown = run_agent("seeds", "tests", str(seed), env=cache)
    as_json = run_agent("seeds", "tests", str(seed), "--json", env=cache)
    builtin = run_agent("seeds", "tests", "calculator", "--json", env=cache)

    assert shown.returncode == 0, shown.stderr
    assert f"  {HIDDEN}  failed" in shown.stdout
    assert f"  {VISIBLE}  failed" in shown.stdout
    assert as_json.json()["source"] == "unpatched-seed"
    assert {t["id"] for t in as_json.json()["tests"]} == {HIDDEN, VISIBLE}
    assert builtin.json()["tests"] == [
        {"id": "check_calculator.AddTest.test_adds_two_numbers", "unpatched": "failed"}
    ]


def test_seeds_tests_of_a_graded_seed_are_its_lists(
    run_agent: Callable[..., AgentRun], seed: Path
) -> None:
    manifest = seed / "seed.toml"
    manifest.write_text(manifest.read_text() + f'fail_to_pass = ["{HIDDEN}"]\n')

    shown = run_agent("seeds", "tests", str(seed), "--json")

    assert shown.returncode == 0, shown.stderr
    assert shown.json()["source"] == "graded"
    assert shown.json()["tests"] == [{"id": HIDDEN, "unpatched": "fail_to_pass"}]


def _report(*tests: tuple[str, str]) -> TestReport:
    return TestReport("unittest", "complete", tuple(TestCaseResult(i, o) for i, o in tests))


def _list(*tests: tuple[str, str], partial: str | None = None) -> TestList:
    return TestList("s", "unittest", tuple(NeededTest(i, o) for i, o in tests), partial)


@pytest.mark.parametrize(
    ("unpatched", "patched", "passes"),
    [
        ("failed", "passed", True),
        ("failed", "skipped", False),
        ("failed", "xfailed", False),
        ("passed", "skipped", False),
        ("skipped", "skipped", True),
        ("skipped", "xfailed", False),
        ("xfailed", "xfailed", True),
        ("xfailed", "xpassed", True),
        ("error", "passed", True),
    ],
)
def test_a_needed_test_may_keep_only_a_skip_or_expected_failure_it_had(
    unpatched: str, patched: str, passes: bool
) -> None:
    report = checked(
        _report(("t.A.ok", "passed"), ("t.A.x", patched)),
        _list(("t.A.ok", "failed"), ("t.A.x", unpatched)),
    )

    assert report is not None
    assert report.passed is passes


def test_a_test_the_list_does_not_name_counts_for_nothing() -> None:
    report = checked(_report(("t.A.borrowed", "passed")), _list(("t.A.real", "failed")))

    assert report is not None
    assert report.passed is False
    assert report.reason is not None
    assert "t.A.real (missing)" in report.reason


def test_a_list_that_names_no_test_carries_no_pass() -> None:
    report = checked(_report(("t.A.extra", "passed")), _list())

    assert report is not None
    assert report.passed is False

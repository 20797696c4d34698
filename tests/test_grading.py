"""Grading test by test, as SWE-bench does: a seed's fail_to_pass and pass_to_pass tests decide.

The unit tests grade reports made by hand; the end-to-end ones run ``agent run --plan``
on a folder seed in the real local sandbox, with unittest and with pytest, and read the
grade from ``--json`` and from the summary a person reads.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import AgentRun

from sandboxed_coding_agent.core.model import SandboxOutcome, SeedProject
from sandboxed_coding_agent.core.serialization import (
    describe_structure_error,
    structure,
    to_jsonable,
)
from sandboxed_coding_agent.core.verdicts.evidence import GuardFinding, TestCaseResult, TestReport
from sandboxed_coding_agent.core.verdicts.grading import Grade, GradedTests, grade, names_of
from sandboxed_coding_agent.core.verdicts.verdict import graded

RunAgent = Callable[..., AgentRun]


def listing(fail_to_pass: tuple[str, ...], pass_to_pass: tuple[str, ...] = ()) -> SeedProject:
    """A seed that lists these tests (its files are never read here)."""
    return SeedProject(
        name="listed",
        description="a seed with lists",
        root="/nonexistent",
        files=("calculator.py", "test_calculator.py"),
        editable_paths=("calculator.py",),
        test_paths=("test_calculator.py",),
        test_command=("python", "-m", "unittest"),
        default_prompt="Fix it.",
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
    )


def report(*tests: tuple[str, str], framework: str = "unittest", **fields: Any) -> TestReport:
    return TestReport(
        framework,
        fields.pop("status", "complete"),
        tuple(TestCaseResult(test_id, outcome) for test_id, outcome in tests),
        **fields,
    )


# -- the grading function ------------------------------------------------------------------------


def test_every_listed_test_passing_is_full() -> None:
    found = grade(
        report(("t.A.test_fix", "passed"), ("t.A.test_kept", "passed"), ("t.A.other", "failed")),
        ["t.A.test_fix"],
        ["t.A.test_kept"],
    )

    assert found.resolution == "FULL"
    assert found.resolved is True
    assert found.fail_to_pass == GradedTests(passed=("t.A.test_fix",))
    assert found.pass_to_pass == GradedTests(passed=("t.A.test_kept",))
    assert found.summary == "FULL (fail_to_pass 1/1, pass_to_pass 1/1)"


def test_some_fail_to_pass_passing_with_every_pass_to_pass_is_partial() -> None:
    found = grade(
        report(("t.A.one", "passed"), ("t.A.two", "failed"), ("t.A.kept", "passed")),
        ["t.A.one", "t.A.two"],
        ["t.A.kept"],
    )

    assert found.resolution == "PARTIAL"
    assert found.resolved is False
    assert found.fail_to_pass == GradedTests(passed=("t.A.one",), failed=("t.A.two",))
    assert "not passed: t.A.two (failed)" in found.summary


@pytest.mark.parametrize(
    ("outcomes", "why"),
    [
        ({"t.A.one": "failed", "t.A.two": "error", "t.A.kept": "passed"}, "no fix passed"),
        ({"t.A.one": "passed", "t.A.two": "passed", "t.A.kept": "failed"}, "a kept test broke"),
        ({"t.A.one": "passed", "t.A.two": "failed", "t.A.kept": "error"}, "both"),
    ],
)
def test_no_fail_to_pass_passing_or_a_pass_to_pass_broken_is_no(
    outcomes: dict[str, str], why: str
) -> None:
    found = grade(report(*outcomes.items()), ["t.A.one", "t.A.two"], ["t.A.kept"])

    assert found.resolution == "NO", why
    assert found.resolved is False


def test_a_test_the_report_does_not_hold_is_missing_and_not_passed() -> None:
    found = grade(report(("t.A.one", "passed")), ["t.A.one", "t.A.gone"], ["t.A.kept"])

    assert found.fail_to_pass == GradedTests(passed=("t.A.one",), missing=("t.A.gone",))
    assert found.pass_to_pass == GradedTests(missing=("t.A.kept",))
    assert found.resolution == "NO"
    assert "t.A.gone (missing), t.A.kept (missing)" in found.summary


@pytest.mark.parametrize("order", [("passed", "failed"), ("failed", "passed")])
def test_a_test_reported_twice_keeps_its_worst_outcome(order: tuple[str, str]) -> None:
    found = grade(report(*(("t.A.one", outcome) for outcome in order)), ["t.A.one"], [])

    assert found.fail_to_pass == GradedTests(failed=("t.A.one",))
    assert found.resolution == "NO"


@pytest.mark.parametrize(
    ("outcome", "passed"),
    [
        ("passed", True),
        ("xfailed", False),
        ("skipped", False),
        ("xpassed", False),
        ("failed", False),
        ("error", False),
    ],
)
def test_only_passed_counts_as_passed_an_expected_failure_does_not(
    outcome: str, passed: bool
) -> None:
    found = grade(report(("t.py::test_one", outcome), framework="pytest"), ["t.py::test_one"], [])

    assert found.resolved is passed


@pytest.mark.parametrize(
    ("untrusted", "problem"),
    [
        (report(("t.A.one", "passed"), status="missing", detail="it exited early"), "exited"),
        (report(("t.A.one", "passed"), status="tampered"), "tampered"),
        (report(("t.A.one", "passed"), status="aborted"), "aborted"),
        (
            report(("t.A.one", "passed"), guard=(GuardFinding("processes", "os.system"),)),
            "the guard refused the code under test: processes",
        ),
        (TestReport(None, "exit-status"), "no framework report"),
        (None, "no framework report"),
    ],
)
def test_a_report_that_cannot_be_trusted_resolves_nothing(
    untrusted: TestReport | None, problem: str
) -> None:
    found = grade(untrusted, ["t.A.one"], [])

    assert found.resolution == "NO"
    assert found.report_problem is not None
    assert problem in found.report_problem
    assert f"not counted: {found.report_problem}" in found.summary


def test_a_timeout_or_a_limit_resolves_nothing_and_the_tests_it_cut_off_are_missing() -> None:
    cut = report(("t.A.one", "passed"), status="missing")
    outcome = SandboxOutcome("local", "sbx-1", None, "", timed_out=True, test_report=cut)
    seed = listing(("t.A.one", "t.A.two"))

    found = graded(outcome, seed).grade

    assert found is not None
    assert found.fail_to_pass == GradedTests(passed=("t.A.one",), missing=("t.A.two",))
    assert found.resolution == "NO"
    complete = attrs.evolve(
        outcome, test_report=report(("t.A.one", "passed"), ("t.A.two", "passed"))
    )
    assert graded(complete, seed).grade.report_problem == "the test timed out"  # type: ignore[union-attr]
    limited = attrs.evolve(complete, timed_out=False, limit_hit="memory")
    assert graded(limited, seed).tests_passed is False


def test_a_graded_outcome_passes_on_its_grade_whatever_its_exit_status() -> None:
    seed = listing(("t.A.one",))
    resolved = report(("t.A.one", "passed"), ("t.A.unrelated", "failed"))
    outcome = SandboxOutcome("local", "sbx-1", 1, "", test_report=resolved)

    assert outcome.tests_passed is False  # not graded: exit status 1, a test failed
    assert graded(outcome, seed).tests_passed is True
    exited_zero = attrs.evolve(outcome, exit_code=0, test_report=report(("t.A.one", "failed")))
    assert exited_zero.tests_passed is False
    assert graded(exited_zero, seed).tests_passed is False


def test_a_runners_grade_is_never_taken() -> None:
    forged = Grade(GradedTests(passed=("t.A.one",)), GradedTests())
    failing = SandboxOutcome(
        "local", "sbx-1", 1, "", test_report=report(("t.A.one", "failed")), grade=forged
    )
    ungraded = listing(())
    listed = listing(("t.A.one",))

    assert graded(failing, ungraded).grade is None
    assert graded(failing, ungraded).tests_passed is False
    assert graded(failing, listed).tests_passed is False


# -- test IDs ------------------------------------------------------------------------------------

UNITTEST_ID = "tests.test_calc.Add.test_adds"


@pytest.mark.parametrize(
    "written",
    [
        UNITTEST_ID,
        "tests/test_calc.py::Add::test_adds",
        "./tests/test_calc.py::Add::test_adds",
        "test_adds (tests.test_calc.Add.test_adds)",
        "test_adds (tests.test_calc.Add)",
    ],
)
@pytest.mark.parametrize("framework", ["unittest", "unittest-script"])
def test_a_unittest_test_may_be_named_as_people_copy_it(written: str, framework: str) -> None:
    found = grade(report((UNITTEST_ID, "passed"), framework=framework), [written], [])

    assert found.fail_to_pass == GradedTests(passed=(written,))


def test_no_form_of_an_id_makes_two_tests_of_the_report_one() -> None:
    two = report(
        ("pkg.test_calc.Add.test_adds", "passed"),
        ("test_calc.Add.test_adds", "failed"),
        ("test_calc.Add.test_adds.test_adds", "error"),
    )

    found = grade(
        two,
        [
            "pkg/test_calc.py::Add::test_adds",
            "test_calc.py::Add::test_adds",
            "test_adds (test_calc.Add.test_adds)",
            "Add.test_adds",
            "test_adds",
        ],
        [],
    )

    assert found.fail_to_pass == GradedTests(
        passed=("pkg/test_calc.py::Add::test_adds",),
        failed=("test_calc.py::Add::test_adds", "test_adds (test_calc.Add.test_adds)"),
        missing=("Add.test_adds", "test_adds"),
    )


def test_a_pytest_node_id_matches_only_itself_and_a_unittest_name_its_node() -> None:
    nodes = report(
        ("tests/test_calc.py::test_add[2-3-5]", "failed"),
        ("tests/test_calc.py::test_add[0-0-0]", "passed"),
        ("tests/test_calc.py::Add::test_adds", "passed"),
        framework="pytest",
    )

    found = grade(
        nodes,
        ["tests/test_calc.py::test_add", "tests.test_calc.Add.test_adds"],
        ["tests/test_calc.py::test_add[0-0-0]", "test_adds (tests.test_calc.Add)"],
    )

    # No prefix of a name is the name, but the dotted and described forms name the node.
    assert found.fail_to_pass.missing == ("tests/test_calc.py::test_add",)
    assert found.fail_to_pass.passed == ("tests.test_calc.Add.test_adds",)
    assert found.pass_to_pass.passed == (
        "tests/test_calc.py::test_add[0-0-0]",
        "test_adds (tests.test_calc.Add)",
    )
    assert names_of("tests/test_calc.py::Add::test_adds", "pytest") == (
        "tests/test_calc.py::Add::test_adds",
    )
    assert names_of("tests.test_calc.Add.test_adds", "pytest") == (
        "tests.test_calc.Add.test_adds",
        "tests/test_calc/Add.py::test_adds",
        "tests/test_calc.py::Add::test_adds",
        "tests.py::test_calc::Add::test_adds",
    )


def test_a_name_cut_at_its_first_space_matches_every_test_it_starts_and_all_must_pass() -> None:
    """SWE-bench's lists hold names cut where the official log parser cut them."""
    nodes = report(
        ("tests/test_fields.py::test_make_error[required-Missing data for field.]", "passed"),
        ("tests/test_cli.py::test_fix_stdin[ select * from t ]", "passed"),
        ("tests/test_cli.py::test_fix_stdin[  select 1 ]", "failed"),
        ("tests/test_cli.py::test_lint[x]", "passed"),
        framework="pytest",
    )
    known = {test.id for test in nodes.tests}

    found = grade(
        nodes,
        ["tests/test_fields.py::test_make_error[required-Missing"],
        [
            "tests/test_cli.py::test_fix_stdin[",
            "tests/test_cli.py::test_lint[",
            "tests/test_cli.py",
        ],
        known=known,
    )
    unknown = grade(nodes, ["tests/test_fields.py::test_make_error[required-Missing"], [])

    assert found.fail_to_pass.passed == ("tests/test_fields.py::test_make_error[required-Missing",)
    # One of the two tests the cut name starts failed: the name failed.
    assert found.pass_to_pass.failed == ("tests/test_cli.py::test_fix_stdin[",)
    # Only a cut at whitespace: a shorter prefix of a name without any is no name.
    assert found.pass_to_pass.missing == ("tests/test_cli.py::test_lint[", "tests/test_cli.py")
    assert found.resolution == "NO"
    # Without the unpatched run's tests, a cut name stands for none.
    assert unknown.fail_to_pass.missing == (
        "tests/test_fields.py::test_make_error[required-Missing",
    )


def test_a_cut_name_never_stands_for_a_case_the_unpatched_run_did_not_have() -> None:
    """The rest of a parameter's text may come from the code under test: renamed, the
    failing case would leave only passing ones under the cut name."""
    renamed = report(
        ("tests/test_calc.py::test_check[Missing data!]", "passed"),
        ("tests/test_calc.py::test_check[Not null.]", "passed"),
        framework="pytest",
    )
    unpatched = {
        "tests/test_calc.py::test_check[Missing data.]",
        "tests/test_calc.py::test_check[Not null.]",
    }

    found = grade(
        renamed,
        ["tests/test_calc.py::test_check[Missing"],
        ["tests/test_calc.py::test_check[Not"],
        known=unpatched,
    )

    assert found.fail_to_pass.missing == ("tests/test_calc.py::test_check[Missing",)
    assert found.pass_to_pass.passed == ("tests/test_calc.py::test_check[Not",)
    assert found.resolution == "NO"


# -- the grade as a value ------------------------------------------------------------------------


def test_a_grade_that_says_more_than_its_tests_cannot_exist() -> None:
    partial = GradedTests(passed=("a",), failed=("b",))

    with pytest.raises(ValueError, match="does not agree"):
        Grade(partial, GradedTests(), resolution="FULL")
    with pytest.raises(ValueError, match="resolved is True"):
        Grade(partial, GradedTests(), resolution="PARTIAL", resolved=True)
    with pytest.raises(ValueError, match="does not agree"):
        Grade(
            GradedTests(passed=("a",)), GradedTests(), report_problem="tampered", resolution="FULL"
        )
    data = to_jsonable(Grade(partial, GradedTests()))
    data["resolution"], data["resolved"] = "FULL", True
    with pytest.raises(Exception) as raised:  # noqa: PT011 (cattrs groups the errors)
        structure(data, Grade)
    assert "does not agree" in repr(raised.value.exceptions)  # type: ignore[attr-defined]
    assert describe_structure_error(raised.value) == ["invalid value @ $"]


def test_a_grade_reads_back_from_its_json() -> None:
    made = grade(report(("t.A.one", "passed"), ("t.A.two", "failed")), ["t.A.one", "t.A.two"], [])

    data = json.loads(json.dumps(to_jsonable(made)))

    assert data == {
        "fail_to_pass": {"passed": ["t.A.one"], "failed": ["t.A.two"], "missing": []},
        "pass_to_pass": {"passed": [], "failed": [], "missing": []},
        "report_problem": None,
        "resolution": "PARTIAL",
        "resolved": False,
        "missing_reason": None,
    }
    assert structure(data, Grade) == made
    # A record written before grades explained missing tests reads back the same.
    del data["missing_reason"]
    assert structure(data, Grade) == made


def test_a_summary_names_at_most_five_tests_that_did_not_pass() -> None:
    listed = [f"t.A.test_{n}" for n in range(9)]

    found = grade(report(*((test, "failed") for test in listed)), listed, [])

    assert found.summary.count("(failed)") == 5
    assert found.summary.endswith("t.A.test_4 (failed) and 4 more")


# -- end to end, in the local sandbox ------------------------------------------------------------

CALCULATOR = """\
def add(a, b):
    return a {add} b


def mul(a, b):
    return a {mul} b


def neg(a):
    {neg}
"""
BROKEN = CALCULATOR.format(add="-", mul="+", neg="return -a")
FIXED = CALCULATOR.format(add="+", mul="*", neg="return -a")
HALF_FIXED = CALCULATOR.format(add="+", mul="+", neg="return -a")
FIX_BREAKING_NEG = CALCULATOR.format(add="+", mul="*", neg="return a")

UNITTEST_TESTS = """\
import unittest

from calculator import add, mul, neg


class Add(unittest.TestCase):
    def test_adds(self):
        self.assertEqual(add(2, 3), 5)


class Mul(unittest.TestCase):
    def test_multiplies(self):
        self.assertEqual(mul(2, 3), 6)


class Neg(unittest.TestCase):
    def test_negates(self):
        self.assertEqual(neg(4), -4)
"""
UNRELATED_FAILURE = """\
import unittest


class Unrelated(unittest.TestCase):
    def test_needs_a_network(self):
        self.fail("this machine has no network: it fails before the fix and after")
"""


def graded_seed_folder(folder: Path, *, unrelated_failure: bool = False) -> Path:
    """A calculator whose add and mul are broken: their tests are fail_to_pass, neg's test is
    pass_to_pass, each named another way people write a unittest test."""
    (folder / "tests").mkdir(parents=True)
    (folder / "calculator.py").write_text(BROKEN)
    (folder / "tests" / "__init__.py").write_text("")
    (folder / "tests" / "test_calc.py").write_text(UNITTEST_TESTS)
    if unrelated_failure:
        (folder / "tests" / "test_unrelated.py").write_text(UNRELATED_FAILURE)
    (folder / "seed.toml").write_text(
        f'name = "{folder.name}"\ndescription = "add and mul are broken"\n'
        'tests = ["tests/*.py"]\neditable = ["calculator.py"]\n'
        'test_command = ["python", "-m", "unittest", "discover", "-v", "-t", ".", "-s", "tests"]\n'
        'default_prompt = "Fix add and mul."\n'
        'fail_to_pass = ["tests.test_calc.Add.test_adds", '
        '"tests/test_calc.py::Mul::test_multiplies"]\n'
        'pass_to_pass = ["test_negates (tests.test_calc.Neg.test_negates)"]\n'
    )
    return folder


def run_plan(
    run_agent: RunAgent,
    write_plan: Callable[..., Path],
    seed: Path,
    content: str,
    *options: str,
    path: str = "calculator.py",
) -> AgentRun:
    plan = write_plan({"files": [{"path": path, "content": content}]})
    return run_agent("run", "--seed", str(seed), "--plan", str(plan), *options)


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    return graded_seed_folder(tmp_path / "graded")


def test_the_fix_resolves_the_run_full(
    run_agent: RunAgent, write_plan: Callable[..., Path], seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, seed, FIXED, "--json")

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert result["tests_passed"] is True
    assert result["grade"]["resolution"] == "FULL"
    assert result["grade"]["resolved"] is True
    assert result["grade"]["fail_to_pass"]["passed"] == [
        "tests.test_calc.Add.test_adds",
        "tests/test_calc.py::Mul::test_multiplies",
    ]
    assert result["grade"]["pass_to_pass"]["passed"] == [
        "test_negates (tests.test_calc.Neg.test_negates)"
    ]
    assert result["attempts"][0]["grade"] == result["grade"]


def test_fixing_half_resolves_the_run_partial_and_fails_it(
    run_agent: RunAgent, write_plan: Callable[..., Path], seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, seed, HALF_FIXED, "--json")

    assert done.returncode == 1, done.stderr
    result = done.json()
    assert result["tests_passed"] is False
    assert result["grade"]["resolution"] == "PARTIAL"
    assert result["grade"]["resolved"] is False
    assert result["grade"]["fail_to_pass"]["failed"] == ["tests/test_calc.py::Mul::test_multiplies"]


def test_a_fix_that_breaks_a_pass_to_pass_test_resolves_nothing(
    run_agent: RunAgent, write_plan: Callable[..., Path], seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, seed, FIX_BREAKING_NEG, "--json")

    assert done.returncode == 1, done.stderr
    result = done.json()
    assert result["tests_passed"] is False
    assert result["grade"]["resolution"] == "NO"
    assert result["grade"]["pass_to_pass"]["failed"] == [
        "test_negates (tests.test_calc.Neg.test_negates)"
    ]
    assert len(result["grade"]["fail_to_pass"]["passed"]) == 2


def test_a_test_in_neither_list_failing_before_and_after_does_not_stop_the_fix(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = graded_seed_folder(tmp_path / "unrelated", unrelated_failure=True)

    done = run_plan(run_agent, write_plan, seed, FIXED, "--json")

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert result["test_exit_code"] == 1
    outcomes = {t["id"]: t["outcome"] for t in result["test_report"]["tests"]}
    assert outcomes["tests.test_unrelated.Unrelated.test_needs_a_network"] == "failed"
    assert result["tests_passed"] is True
    assert result["grade"]["resolution"] == "FULL"
    broken = run_plan(run_agent, write_plan, seed, BROKEN, "--json").json()
    assert broken["grade"]["resolution"] == "NO"


def test_the_summary_shows_the_grade_and_names_what_did_not_pass(
    run_agent: RunAgent, write_plan: Callable[..., Path], seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, seed, HALF_FIXED)

    assert done.returncode == 1, done.stderr
    assert (
        "graded:          PARTIAL (fail_to_pass 1/2, pass_to_pass 1/1); "
        "not passed: tests/test_calc.py::Mul::test_multiplies (failed)\n"
    ) in done.stdout
    assert "evidence:        framework: unittest reported 2 passed, 1 failed\n" in done.stdout


def test_a_code_under_test_the_guard_refused_resolves_nothing_though_every_test_passed(
    run_agent: RunAgent, write_plan: Callable[..., Path], seed: Path
) -> None:
    sneaky = FIXED.replace(
        "def neg(a):",
        "def neg(a):\n    try:\n        import os\n        os.system('true')\n"
        "    except PermissionError:\n        pass\n",
    )

    done = run_plan(run_agent, write_plan, seed, sneaky, "--json", "--no-policy", "python-ast")

    assert done.returncode == 1, done.stderr
    result = done.json()
    assert result["grade"]["fail_to_pass"]["passed"] != []
    assert result["grade"]["resolution"] == "NO"
    assert "guard refused the code under test: processes" in result["grade"]["report_problem"]


def test_a_timeout_leaves_the_tests_it_cut_off_missing(
    run_agent: RunAgent, write_plan: Callable[..., Path], seed: Path
) -> None:
    hangs = FIXED.replace("return -a", "while True:\n        pass")

    done = run_plan(run_agent, write_plan, seed, hangs, "--json", "--test-timeout", "3")

    assert done.returncode == 1, done.stderr
    result = done.json()
    assert result["test_timed_out"] is True
    grade = result["grade"]
    assert grade["fail_to_pass"]["passed"] == [
        "tests.test_calc.Add.test_adds",
        "tests/test_calc.py::Mul::test_multiplies",
    ]
    assert grade["pass_to_pass"]["missing"] == ["test_negates (tests.test_calc.Neg.test_negates)"]
    assert grade["resolution"] == "NO"


def test_a_seed_without_lists_is_judged_as_before(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = graded_seed_folder(tmp_path / "ungraded", unrelated_failure=True)
    manifest = seed / "seed.toml"
    manifest.write_text(
        "\n".join(line for line in manifest.read_text().splitlines() if "_to_pass" not in line)
        + "\n"
    )

    done = run_plan(run_agent, write_plan, seed, FIXED, "--json")

    assert done.returncode == 1, done.stderr
    assert done.json()["grade"] is None
    assert done.json()["tests_passed"] is False


# -- with pytest, when the seed runtime brings it ------------------------------------------------

PYTEST_TESTS = """\
import pytest

from calculator import add, mul


@pytest.mark.parametrize(("a", "b", "total"), [(2, 3, 5), (0, 0, 0)])
def test_add(a, b, total):
    assert add(a, b) == total


class TestMul:
    def test_multiplies(self):
        assert mul(2, 3) == 6


def test_needs_a_network():
    pytest.fail("this machine has no network")
"""


@pytest.fixture(scope="module")
def runtime_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A private runtime cache for this module's pytest seed; uv keeps its own package cache."""
    uv_cache = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return {
        "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg-cache")),
        "UV_CACHE_DIR": uv_cache,
    }


@pytest.fixture
def pytest_seed(tmp_path: Path) -> Path:
    folder = tmp_path / "graded-pytest"
    (folder / "tests").mkdir(parents=True)
    (folder / "calculator.py").write_text(BROKEN)
    (folder / "tests" / "test_calc.py").write_text(PYTEST_TESTS)
    (folder / "seed.toml").write_text(
        'name = "graded-pytest"\ndescription = "add and mul are broken"\n'
        'tests = ["tests/*.py"]\neditable = ["calculator.py"]\n'
        'test_command = ["python", "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests"]\n'
        'default_prompt = "Fix add and mul."\n'
        'fail_to_pass = ["tests/test_calc.py::test_add[2-3-5]", '
        '"tests/test_calc.py::TestMul::test_multiplies"]\n'
        'pass_to_pass = ["tests/test_calc.py::test_add[0-0-0]"]\n'
        '[runtime]\nrequirements = ["pytest"]\n'
    )
    return folder


@pytest.mark.parametrize(
    ("content", "resolution", "exit_status"),
    [(FIXED, "FULL", 0), (HALF_FIXED, "PARTIAL", 1), (BROKEN, "NO", 1)],
)
def test_a_pytest_seed_is_graded_by_node_id(
    run_agent: RunAgent,
    write_plan: Callable[..., Path],
    pytest_seed: Path,
    runtime_cache: dict[str, str],
    content: str,
    resolution: str,
    exit_status: int,
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": content}]})

    done = run_agent(
        "run", "--seed", str(pytest_seed), "--plan", str(plan), "--json", env=runtime_cache
    )

    assert done.returncode == exit_status, done.stderr
    result = done.json()
    assert result["test_report"]["framework"] == "pytest"
    assert result["test_exit_code"] == 1  # the unrelated test fails every time
    assert result["grade"]["resolution"] == resolution
    assert result["grade"]["pass_to_pass"]["passed"] == ["tests/test_calc.py::test_add[0-0-0]"]


def test_a_missing_test_is_explained_by_what_the_report_holds() -> None:
    nodes = report(("tests/test_calc.py::test_add", "passed"), framework="pytest")
    empty = report(framework="pytest")

    wrong_form = grade(nodes, ["calc.tests.Add.test_add"], [])
    nothing = grade(empty, ["tests/test_calc.py::test_add"], [])
    found = grade(nodes, ["tests/test_calc.py::test_add"], [])

    assert wrong_form.missing_reason is not None
    assert "1 reported, as pytest node IDs such as 'tests/test_calc.py::test_add'" in (
        wrong_form.missing_reason
    )
    assert "missing: no reported test has that name" in wrong_form.summary
    assert nothing.missing_reason is not None
    assert nothing.missing_reason.startswith("the report holds no test")
    assert found.missing_reason is None


def test_every_case_the_unpatched_run_had_under_a_cut_name_must_be_reported_and_pass() -> None:
    known = {"test_x.py::test_f[a b-double]", "test_x.py::test_f[a c-triple]"}
    renamed = report(
        ("test_x.py::test_f[a b-renamed]", "failed"),
        ("test_x.py::test_f[a c-triple]", "passed"),
        framework="pytest",
    )
    dropped = report(("test_x.py::test_f[a c-triple]", "passed"), framework="pytest")
    both = report(
        ("test_x.py::test_f[a b-double]", "passed"),
        ("test_x.py::test_f[a c-triple]", "passed"),
        framework="pytest",
    )

    for patched in (renamed, dropped):
        found = grade(patched, ["test_x.py::test_f[a"], ["test_x.py::test_f[a"], known=known)
        assert found.fail_to_pass.missing == ("test_x.py::test_f[a",)
        assert found.pass_to_pass.missing == ("test_x.py::test_f[a",)
        assert found.resolution == "NO"
    assert grade(both, ["test_x.py::test_f[a"], [], known=known).resolution == "FULL"


def test_a_cut_name_the_unpatched_run_had_nothing_under_stands_for_the_reported_tests() -> None:
    """Its test module imports what only the fix adds: nothing was collected before."""
    patched = report(
        ("test_x.py::test_half[a b]", "passed"),
        ("test_x.py::test_half[a c]", "passed"),
        framework="pytest",
    )

    found = grade(patched, ["test_x.py::test_half[a"], [], known={"test_x.py::test_other"})

    assert found.resolution == "FULL"

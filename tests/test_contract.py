"""Table tests of every rule of the patch contract, and of how the orchestrator combines policies.

Every case goes through ``contract.parse_plan`` on JSON text and then
``contract.check_plan``, the same two steps the planner and the orchestrator
take, and asserts the exact rule names and file paths of the rejections.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from sandboxed_coding_agent.core.errors import EXIT_CODES, PlanRejected, Rejection
from sandboxed_coding_agent.core.model import (
    PatchFile,
    PatchPlan,
    SandboxJob,
    SandboxOutcome,
    SeedProject,
)
from sandboxed_coding_agent.core.plans import contract
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.runs import orchestrator
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.patch_contract import PatchContract

SEED = calculator_seed()
EDITABLE = SEED.editable_paths
LIMITS = SEED.limits
# More editable paths than the calculator has, to reach the file-count and size bounds
# with plans that break nothing else; the limits stay the calculator's.
FOUR_EDITABLE = ("calculator.py", "a.py", "b.py", "c.py")
FIXED = "def add(left, right):\n    return left + right\n"
SHAPE = '{"files": [{"path": "...", "content": "..."}]}'

Found = list[tuple[str, str | None]]


def plan_text(*files: tuple[object, object]) -> str:
    # json.dumps escapes every non-ASCII character, so a lone surrogate arrives as "\ud800".
    return json.dumps({"files": [{"path": path, "content": content} for path, content in files]})


def rejections(text: str | bytes, editable: Sequence[str] = EDITABLE) -> list[Rejection]:
    """Everything the contract says about a plan given as JSON text, parsing included."""
    try:
        plan = contract.parse_plan(text)
    except PlanRejected as error:
        found = list(error.rejections)
    else:
        found = contract.check_plan(plan, editable_paths=editable, limits=LIMITS)
    assert all(r.policy == contract.POLICY for r in found)
    return found


def rules(found: Sequence[Rejection]) -> Found:
    return [(r.rule, r.path) for r in found]


def test_calculator_seed_has_the_limits_of_the_contract() -> None:
    assert EDITABLE == ("calculator.py",)
    assert (LIMITS.max_files, LIMITS.max_total_bytes, LIMITS.max_path_chars) == (3, 12_000, 160)


def test_valid_calculator_fix_is_accepted() -> None:
    assert rejections(plan_text(("calculator.py", FIXED))) == []


# -- plan shape ---------------------------------------------------------------------------------

ENTRY = '{"path": "calculator.py", "content": ""}'

SHAPE_CASES = [
    pytest.param("[]", "expected an object, got list @ plan", id="plan-is-a-list"),
    pytest.param('"files"', "expected an object, got str @ plan", id="plan-is-a-string"),
    pytest.param("null", "expected an object, got NoneType @ plan", id="plan-is-null"),
    pytest.param("{}", "required field missing @ plan.files", id="files-key-missing"),
    pytest.param(
        f'{{"files": [{ENTRY}], "note": "hi"}}',
        'unknown key "note" (known: files) @ plan',  # nothing close to "note"
        id="extra-top-level-key",
    ),
    pytest.param(
        f'{{"files": {ENTRY}}}', "expected a list, got dict @ plan.files", id="files-is-an-object"
    ),
    pytest.param(
        '{"files": "calculator.py"}',
        "expected a list, got str @ plan.files",
        id="files-is-a-string",
    ),
    pytest.param(
        '{"files": null}', "expected a list, got NoneType @ plan.files", id="files-is-null"
    ),
    pytest.param(
        '{"files": ["calculator.py"]}',
        "expected an object, got str @ plan.files[0]",
        id="entry-is-a-string",
    ),
    pytest.param(
        '{"files": [["calculator.py", ""]]}',
        "expected an object, got list @ plan.files[0]",
        id="entry-is-a-list",
    ),
    pytest.param(
        '{"files": [{"path": "calculator.py"}]}',
        "required field missing @ plan.files[0].content",
        id="entry-without-content",
    ),
    pytest.param(
        '{"files": [{"content": ""}]}',
        "required field missing @ plan.files[0].path",
        id="entry-without-path",
    ),
    pytest.param(
        f'{{"files": [{ENTRY}, {{"path": "calculator.py"}}]}}',
        "required field missing @ plan.files[1].content",
        id="second-entry-without-content",
    ),
    pytest.param(
        '{"files": [{"path": "calculator.py", "content": "", "mode": "755"}]}',
        'unknown key "mode" (known: content, path) @ plan.files[0]',
        id="extra-entry-key",
    ),
    pytest.param(
        '{"files": [{"path": 1, "content": ""}]}',
        "expected a string, got int @ plan.files[0].path",
        id="path-is-a-number",
    ),
    pytest.param(
        '{"files": [{"path": ["calculator.py"], "content": ""}]}',
        "expected a string, got list @ plan.files[0].path",
        id="path-is-a-list",
    ),
    pytest.param(
        '{"files": [{"path": "calculator.py", "content": null}]}',
        "expected a string, got NoneType @ plan.files[0].content",
        id="content-is-null",
    ),
    pytest.param(
        '{"files": [{"path": "calculator.py", "content": true}]}',
        "expected a string, got bool @ plan.files[0].content",
        id="content-is-a-boolean",
    ),
    pytest.param(
        '{"files": [{"path": "calculator.py", "content": ["x = 1\\n"]}]}',
        "expected a string, got list @ plan.files[0].content",
        id="content-is-a-list-of-lines",
    ),
]


@pytest.mark.parametrize(("text", "problem"), SHAPE_CASES)
def test_plan_of_the_wrong_shape_is_rejected_as_plan_shape(text: str, problem: str) -> None:
    found = rejections(text)
    assert rules(found) == [("plan-shape", None)]
    assert found[0].message == f"{problem}; expected {SHAPE}"


JSON_CASES = [
    pytest.param("", "Expecting value", id="empty-text"),
    pytest.param('{"files": [', "Expecting value", id="truncated"),
    # Python's own wording and column differ by version (3.13 names the trailing comma and
    # points at it): that the message says where is what counts.
    pytest.param(f'{{"files": [{ENTRY},]}}', "line 1 column", id="trailing-comma"),
    pytest.param("{'files': []}", "double quotes", id="single-quotes"),
    pytest.param(f'{{"files": [{ENTRY}]}} {{}}', "Extra data", id="two-documents"),
    pytest.param(
        f'{{"files": [{ENTRY}], "files": [{ENTRY}]}}',
        "repeated key 'files'",
        id="repeated-top-level-key",
    ),
    pytest.param(
        '{"files": [{"path": "calculator.py", "path": "check_calculator.py", "content": ""}]}',
        "repeated key 'path'",
        id="repeated-entry-key",
    ),
    pytest.param(
        b'{"files": [{"path": "calculator.py", "content": "\xff"}]}',
        "can't decode byte 0xff",
        id="invalid-utf-8",
    ),
    pytest.param("[" * 100_000 + "]" * 100_000, "maximum recursion depth", id="nested-too-deep"),
]


@pytest.mark.parametrize(("text", "problem"), JSON_CASES)
def test_text_that_is_not_one_clean_json_object_is_rejected_as_plan_json(
    text: str | bytes, problem: str
) -> None:
    found = rejections(text)
    assert rules(found) == [("plan-json", None)]
    assert found[0].message.startswith("the plan is not valid JSON: ")
    assert problem in found[0].message


WELL_FORMED_CASES = [
    pytest.param('{"files": [{"content": "", "path": "calculator.py"}]}', id="keys-in-any-order"),
    pytest.param(
        '\n{\n  "files" : [\n    {"path": "calculator.py", "content": "x = 1\\n"}\n  ]\n}\n',
        id="pretty-printed",
    ),
    pytest.param(
        '{"files": [{"path": "calculator.py", "content": "s = \\"\\u00e9\\\\n\\"\\n"}]}',
        id="escapes-in-content",
    ),
    pytest.param(plan_text(("calculator.py", "")).encode("utf-8"), id="utf-8-bytes"),
    pytest.param(plan_text(("calculator.py", "")), id="empty-content"),
]


@pytest.mark.parametrize("text", WELL_FORMED_CASES)
def test_well_formed_plan_is_accepted(text: str | bytes) -> None:
    assert rejections(text) == []


def test_every_shape_problem_is_reported_at_once() -> None:
    text = '{"files": [{"path": 1, "content": null}, "calculator.py"], "extra": 0}'
    found = rejections(text)
    assert rules(found) == [("plan-shape", None)] * 4
    problems = [r.message.split(";")[0] for r in found]
    assert problems == [
        'unknown key "extra" (known: files) @ plan',
        "expected a string, got int @ plan.files[0].path",
        "expected a string, got NoneType @ plan.files[0].content",
        "expected an object, got str @ plan.files[1]",
    ]


# -- file count ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        pytest.param(0, [("file-count", None)], id="0-files"),
        pytest.param(1, [], id="1-file"),
        pytest.param(3, [], id="3-files"),
        pytest.param(4, [("file-count", None)], id="4-files"),
    ],
)
def test_plan_replaces_one_to_three_files(count: int, expected: Found) -> None:
    text = plan_text(*[(path, "x = 1\n") for path in FOUR_EDITABLE[:count]])
    found = rejections(text, editable=FOUR_EDITABLE)
    assert rules(found) == expected
    if expected:
        assert found[0].message == (
            f"a plan replaces 1 to 3 files; this one has {count} "
            "(the seed's [limits] max_files in its seed.toml; it may be set up to 50)"
        )


# -- paths --------------------------------------------------------------------------------------

NOT_EDITABLE = "path-not-editable"


def _bad(rule: str, shown: str) -> Found:
    """``rule`` and path-not-editable, both naming the file as ``shown``."""
    return [(rule, shown), (NOT_EDITABLE, shown)]


PATH_CONTROLS = ["\x01", "\t", "\n", "\r", "\x1b", "\x1f", "\x7f", "\x80", "\x9b", "\x9f"]

PATH_CASES = [
    pytest.param("", [("path-empty", "''")], id="empty"),
    pytest.param("a" * 161, [("path-length", "a" * 160 + "...")], id="161-chars"),
    pytest.param("a" * 160, [(NOT_EDITABLE, "a" * 160)], id="160-chars-is-within-length"),
    pytest.param("é" * 161, [("path-length", "é" * 160 + "...")], id="161-chars-counted-not-bytes"),
    pytest.param(
        "src\\calculator.py", _bad("path-backslash", "src\\calculator.py"), id="backslash"
    ),
    pytest.param("calculator.py\\", _bad("path-backslash", "calculator.py\\"), id="backslash-end"),
    pytest.param("calculator.py\x00", _bad("path-nul", r"'calculator.py\x00'"), id="nul-character"),
    *[
        pytest.param(
            f"calc{c}ulator.py",
            _bad("path-control", repr(f"calc{c}ulator.py")),
            id=f"control-U+{ord(c):04X}",
        )
        for c in PATH_CONTROLS
    ],
    pytest.param("/calculator.py", _bad("path-segment", "/calculator.py"), id="absolute"),
    pytest.param("/", _bad("path-segment", "/"), id="root"),
    pytest.param("a//b", _bad("path-segment", "a//b"), id="empty-middle-segment"),
    pytest.param("calculator.py/", _bad("path-segment", "calculator.py/"), id="trailing-slash"),
    pytest.param(".", _bad("path-segment", "."), id="dot"),
    pytest.param("..", _bad("path-segment", ".."), id="dot-dot"),
    pytest.param("./calculator.py", _bad("path-segment", "./calculator.py"), id="dot-prefix"),
    pytest.param("../calculator.py", _bad("path-segment", "../calculator.py"), id="dot-dot-prefix"),
    pytest.param("a/./calculator.py", _bad("path-segment", "a/./calculator.py"), id="dot-inside"),
    pytest.param(
        "a/../calculator.py", _bad("path-segment", "a/../calculator.py"), id="dot-dot-inside"
    ),
    pytest.param("calculator.py/..", _bad("path-segment", "calculator.py/.."), id="dot-dot-at-end"),
    pytest.param(
        "..\\calculator.py",
        [("path-backslash", "..\\calculator.py"), (NOT_EDITABLE, "..\\calculator.py")],
        id="windows-parent",
    ),
    pytest.param("check_calculator.py", [(NOT_EDITABLE, "check_calculator.py")], id="the-test"),
    pytest.param("Calculator.py", [(NOT_EDITABLE, "Calculator.py")], id="other-case"),
    pytest.param("calculator.py ", [(NOT_EDITABLE, "calculator.py ")], id="trailing-space"),
    pytest.param("sub/calculator.py", [(NOT_EDITABLE, "sub/calculator.py")], id="other-folder"),
    pytest.param("..calculator.py", [(NOT_EDITABLE, "..calculator.py")], id="dots-in-a-name"),
    pytest.param(
        "calc\u202eyp.rotaluclac",
        [(NOT_EDITABLE, "'calc\\u202eyp.rotaluclac'")],
        id="bidi-control-named-by-repr",
    ),
]


@pytest.mark.parametrize(("path", "expected"), PATH_CASES)
def test_path_rules_for_the_calculator_seed(path: str, expected: Found) -> None:
    found = rejections(plan_text((path, "x = 1\n")))
    assert rules(found) == expected
    if expected[-1][0] == NOT_EDITABLE:
        assert found[-1].message == "the path is not editable (editable: calculator.py)"


@pytest.mark.parametrize(("path", "expected"), PATH_CASES)
def test_path_rules_hold_even_for_a_path_the_seed_calls_editable(
    path: str, expected: Found
) -> None:
    # A seed that lists a bad path must not open a way out of the project folder.
    found = rejections(plan_text((path, "x = 1\n")), editable=(path,))
    assert rules(found) == [(rule, label) for rule, label in expected if rule != NOT_EDITABLE]


def test_path_length_is_counted_in_characters() -> None:
    found = rejections(plan_text(("é" * 161, "")))
    assert found[0].message == "the path has 161 characters; the limit is 160"


@pytest.mark.parametrize(
    ("copies", "expected"),
    [
        pytest.param(1, [], id="once"),
        pytest.param(2, [("path-duplicate", "calculator.py")], id="twice"),
        pytest.param(3, [("path-duplicate", "calculator.py")] * 2, id="three-times"),
    ],
)
def test_duplicate_path_rejects_the_plan(copies: int, expected: Found) -> None:
    found = rejections(plan_text(*[("calculator.py", FIXED)] * copies))
    assert rules(found) == expected


def test_duplicate_path_is_found_among_other_files() -> None:
    text = plan_text(("a.py", ""), ("calculator.py", ""), ("a.py", "x = 1\n"))
    assert rules(rejections(text, editable=FOUR_EDITABLE)) == [("path-duplicate", "a.py")]


# -- content ------------------------------------------------------------------------------------

C0_REJECTED = [cp for cp in range(0x01, 0x20) if chr(cp) not in "\t\n\r"]
C1_AND_DEL = [0x7F, *range(0x80, 0xA0)]
BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]


def _one(rule: str) -> Found:
    return [(rule, "calculator.py")]


CONTENT_CASES = [
    pytest.param("x = 1\x00\n", _one("content-nul"), "NUL", id="nul"),
    *[
        pytest.param(
            f"x = 1{chr(cp)}\n", _one("content-control"), f"U+{cp:04X}", id=f"C0-U+{cp:04X}"
        )
        for cp in C0_REJECTED
    ],
    pytest.param(
        "\x00\x01\x1b",
        [("content-nul", "calculator.py"), ("content-control", "calculator.py")],
        "U+0001, U+001B",
        id="nul-and-controls",
    ),
    *[
        pytest.param(
            f"x = '{chr(cp)}'\n", _one("content-invisible"), f"U+{cp:04X}", id=f"C1-U+{cp:04X}"
        )
        for cp in C1_AND_DEL
    ],
    *[
        pytest.param(
            f"access = 'user' # {chr(cp)}admin\n",
            _one("content-invisible"),
            f"U+{cp:04X}",
            id=f"bidi-U+{cp:04X}",
        )
        for cp in BIDI
    ],
    pytest.param("x = '\ud800'\n", _one("content-encoding"), "lone surrogate", id="high-surrogate"),
    pytest.param("x = '\udfff'\n", _one("content-encoding"), "lone surrogate", id="low-surrogate"),
    pytest.param(
        "\udc00\ud800", _one("content-encoding"), "at character 0", id="surrogates-reversed"
    ),
]


@pytest.mark.parametrize(("content", "expected", "detail"), CONTENT_CASES)
def test_content_rules(content: str, expected: Found, detail: str) -> None:
    found = rejections(plan_text(("calculator.py", content)))
    assert rules(found) == expected
    assert detail in found[-1].message


ACCEPTED_CONTENT = [
    pytest.param("def f():\n\treturn 1\r\n", id="tab-cr-lf"),
    pytest.param(" ~", id="space-and-tilde-around-C0-and-DEL"),
    pytest.param("x = '\u00a0'\n", id="U+00A0-just-after-C1"),
    pytest.param("x = '\u2029\u202f'\n", id="U+2029-U+202F-around-first-bidi-block"),
    pytest.param("x = '\u2065\u206a'\n", id="U+2065-U+206A-around-second-bidi-block"),
    pytest.param("greeting = 'héllo, 世界 😀'\n", id="non-ascii-text"),
    pytest.param("x = '\ud83d\ude00'\n", id="valid-surrogate-pair-escape"),
]


@pytest.mark.parametrize("content", ACCEPTED_CONTENT)
def test_clean_text_content_is_accepted(content: str) -> None:
    assert rejections(plan_text(("calculator.py", content))) == []


def test_lone_surrogate_from_json_escape_is_rejected() -> None:
    text = '{"files": [{"path": "calculator.py", "content": "x = \\"\\ud800\\"\\n"}]}'
    assert rules(rejections(text)) == _one("content-encoding")


# -- size ---------------------------------------------------------------------------------------

TOO_BIG = [("total-size", None)]

SIZE_CASES = [
    pytest.param([("calculator.py", "x" * 12_000)], [], 12_000, id="ascii-12000"),
    pytest.param([("calculator.py", "x" * 12_001)], TOO_BIG, 12_001, id="ascii-12001"),
    pytest.param([("calculator.py", "é" * 6_000)], [], 12_000, id="2-byte-chars-12000"),
    pytest.param([("calculator.py", "é" * 6_000 + "x")], TOO_BIG, 12_001, id="2-byte-chars-12001"),
    pytest.param([("calculator.py", "€" * 4_000)], [], 12_000, id="3-byte-chars-12000"),
    pytest.param([("calculator.py", "😀" * 3_000)], [], 12_000, id="4-byte-chars-12000"),
    pytest.param(
        [("calculator.py", "😀" * 3_000 + "x")], TOO_BIG, 12_001, id="3001-chars-12001-bytes"
    ),
    pytest.param(
        [("calculator.py", "€" * 2_000), ("a.py", "é" * 2_000), ("b.py", "x" * 2_000)],
        [],
        12_000,
        id="three-files-12000",
    ),
    pytest.param(
        [("calculator.py", "€" * 2_000), ("a.py", "é" * 2_000), ("b.py", "x" * 2_001)],
        TOO_BIG,
        12_001,
        id="three-files-12001",
    ),
]


@pytest.mark.parametrize(("files", "expected", "size"), SIZE_CASES)
def test_all_files_together_are_at_most_12000_utf8_bytes(
    files: list[tuple[str, str]], expected: Found, size: int
) -> None:
    assert sum(len(content.encode("utf-8")) for _, content in files) == size
    found = rejections(plan_text(*files), editable=FOUR_EDITABLE)
    assert rules(found) == expected
    if expected:
        assert found[0].message == (
            f"all files together are {size} UTF-8 bytes; the limit is 12000 "
            "(the seed's [limits] max_total_bytes in its seed.toml; it may be set up to 1048576)"
        )


# -- many problems at once ----------------------------------------------------------------------

MANY_PROBLEMS = plan_text(
    ("check_calculator.py", "import os\x00"),
    ("../calculator.py", "x = '\u202e'"),
    ("calculator.py", "x" * 12_000),
    ("calculator.py", "\x1b[2J"),
)
MANY_PROBLEMS_FOUND = [
    ("file-count", None),
    (NOT_EDITABLE, "check_calculator.py"),
    ("content-nul", "check_calculator.py"),
    ("path-segment", "../calculator.py"),
    (NOT_EDITABLE, "../calculator.py"),
    ("content-invisible", "../calculator.py"),
    ("path-duplicate", "calculator.py"),
    ("content-control", "calculator.py"),
    ("total-size", None),
]


def test_every_broken_rule_of_a_plan_is_reported_at_once() -> None:
    assert rules(rejections(MANY_PROBLEMS)) == MANY_PROBLEMS_FOUND


def test_validate_plan_raises_plan_rejected_listing_every_reason() -> None:
    plan = contract.parse_plan(MANY_PROBLEMS)
    with pytest.raises(PlanRejected) as caught:
        contract.validate_plan(
            plan, editable_paths=EDITABLE, limits=LIMITS, planner_task_id="plan-task-1"
        )
    error = caught.value
    assert rules(error.rejections) == MANY_PROBLEMS_FOUND
    assert error.planner_task_id == "plan-task-1"
    assert error.message.startswith("the plan was rejected (9 reasons):\n")
    for rejection in error.rejections:
        assert f"  {rejection.describe()}" in error.message.splitlines()
    assert EXIT_CODES[error.kind] == 4


def test_validate_plan_returns_a_plan_that_keeps_the_contract() -> None:
    plan = contract.parse_plan(plan_text(("calculator.py", FIXED)))
    assert contract.validate_plan(plan, editable_paths=EDITABLE, limits=LIMITS) is plan


def test_rejection_names_rule_and_file_for_a_person() -> None:
    (rejection,) = rejections(plan_text(("check_calculator.py", "")))
    assert rejection.describe() == (
        "[patch-contract:path-not-editable] (check_calculator.py) "
        "the path is not editable (editable: calculator.py)"
    )


def test_one_reason_is_counted_in_the_singular() -> None:
    error = PlanRejected([Rejection(policy="p", rule="r", message="m", path="calculator.py")])
    assert error.message == "the plan was rejected (1 reason):\n  [p:r] (calculator.py) m"


# -- policies together --------------------------------------------------------------------------


@attrs.frozen
class NoPrintCalls:
    """A second policy, written the way a plugin would: no print() in a patch."""

    name: str = "no-print"
    description: str = "patches may not add print() calls"

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterator[Rejection]:
        for entry in plan.files:
            if "print(" in entry.content:
                yield Rejection(self.name, "print-call", "the patch calls print()", entry.path)


@attrs.frozen
class UndecidedPolicy:
    """A policy that fails instead of answering."""

    name: str = "undecided"
    description: str = "always raises"

    def check(self, plan: PatchPlan, seed: SeedProject) -> list[Rejection]:
        raise RuntimeError("rule file missing")


def plan_of(*files: tuple[str, str]) -> PatchPlan:
    return PatchPlan(tuple(PatchFile(path, content) for path, content in files))


def found_by(policies: Sequence[Any], plan: PatchPlan) -> list[tuple[str, str, str | None]]:
    return [(r.policy, r.rule, r.path) for r in orchestrator.check_plan(plan, SEED, policies)]


def test_orchestrator_asks_every_policy_and_keeps_all_their_reasons() -> None:
    plan = plan_of(("check_calculator.py", "print(1)\x00"))
    assert found_by([PatchContract(), NoPrintCalls()], plan) == [
        ("patch-contract", NOT_EDITABLE, "check_calculator.py"),
        ("patch-contract", "content-nul", "check_calculator.py"),
        ("no-print", "print-call", "check_calculator.py"),
    ]


def test_second_policy_rejects_a_plan_the_contract_accepts() -> None:
    plan = plan_of(("calculator.py", FIXED + "print(add(2, 3))\n"))
    assert found_by([PatchContract()], plan) == []
    assert found_by([PatchContract(), NoPrintCalls()], plan) == [
        ("no-print", "print-call", "calculator.py")
    ]


def test_policy_that_raises_rejects_the_plan_and_the_others_still_run() -> None:
    plan = plan_of(("calculator.py", FIXED + "print(1)\n"))
    rejected = orchestrator.check_plan(plan, SEED, [UndecidedPolicy(), NoPrintCalls()])
    assert [(r.policy, r.rule, r.path) for r in rejected] == [
        ("undecided", "policy-failed", None),
        ("no-print", "print-call", "calculator.py"),
    ]
    assert rejected[0].message.startswith("the policy failed: RuntimeError: rule file missing")


def test_policy_that_raises_rejects_an_otherwise_valid_plan() -> None:
    plan = plan_of(("calculator.py", FIXED))
    assert found_by([PatchContract(), UndecidedPolicy()], plan) == [
        ("undecided", "policy-failed", None)
    ]


@attrs.define
class RecordingRunner:
    """Stands in for a sandbox to show which jobs would have reached one."""

    jobs: list[SandboxJob] = attrs.Factory(list)
    name: str = "recording"
    description: str = "records jobs, runs nothing"

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        self.jobs.append(job)
        return SandboxOutcome(runner=self.name, sandbox_id="sbx-recorded", exit_code=0, output="")


def test_rejected_plan_never_reaches_a_runner() -> None:
    runner = RecordingRunner()
    plan = plan_of(("calculator.py", FIXED + "print(1)\n"))
    with pytest.raises(PlanRejected) as caught:
        orchestrator.run(SEED, runner=runner, policies=[PatchContract(), NoPrintCalls()], plan=plan)
    assert [(r.policy, r.rule) for r in caught.value.rejections] == [("no-print", "print-call")]
    assert runner.jobs == []


def test_accepted_plan_reaches_the_runner_with_only_that_file_replaced(tmp_path: Path) -> None:
    runner = RecordingRunner()
    plan = plan_of(("calculator.py", FIXED))
    orchestrator.run(
        SEED,
        runner=runner,
        policies=[PatchContract(), NoPrintCalls()],
        plan=plan,
        environ={"XDG_STATE_HOME": str(tmp_path)},
    )
    # First the unpatched seed, which lists the tests a pass needs; then the plan.
    unpatched, job = runner.jobs
    assert unpatched.files["calculator.py"] == (SEED.root / "calculator.py").read_bytes()
    assert job.files["calculator.py"] == FIXED.encode()
    assert job.files["check_calculator.py"] == (SEED.root / "check_calculator.py").read_bytes()


def test_built_in_contract_policy_applies_the_seeds_own_paths_and_limits() -> None:
    contract_policy = PluginHost(entry_points=False).policies[contract.POLICY].item
    tight = attrs.evolve(SEED, limits=attrs.evolve(LIMITS, max_total_bytes=10, max_path_chars=5))
    plan = plan_of(("calculator.py", "x" * 11))
    assert [(r.rule, r.path) for r in contract_policy.check(plan, SEED)] == []
    assert [(r.rule, r.path) for r in contract_policy.check(plan, tight)] == [
        ("path-length", "calcu..."),
        ("total-size", None),
    ]

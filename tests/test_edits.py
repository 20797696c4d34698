"""Search/replace edits and unified diffs become whole files, or a rejection a model can act on."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping

import pytest

from sandboxed_coding_agent.core.errors import PlanRejected, Rejection
from sandboxed_coding_agent.core.model import PatchPlan, PlannerOptions, SeedLimits
from sandboxed_coding_agent.core.plans import contract, edits
from sandboxed_coding_agent.core.plans.edit_text import MAX_EDITS
from sandboxed_coding_agent.core.serialization import structure, to_jsonable

CALC = (
    '"""A tiny calculator used as the built-in seed project."""\n\n\n'
    "def add(left, right):\n"
    '    """Return the sum of left and right."""\n'
    "    return left - right\n"
)
FILES = {"calculator.py": CALC, "check_calculator.py": "import unittest\n"}
CALC_DIFF = (
    "diff --git a/calculator.py b/calculator.py\n"
    "index c8e341f..bac4ccd 100644\n"
    "--- a/calculator.py\n"
    "+++ b/calculator.py\n"
    "@@ -3,4 +3,4 @@\n"
    " \n"
    " def add(left, right):\n"
    '     """Return the sum of left and right."""\n'
    "-    return left - right\n"
    "+    return left + right\n"
)
FIXED = CALC.replace("left - right", "left + right")


def apply(data: object, files: Mapping[str, str] = FILES) -> dict[str, str]:
    plan = edits.plan_from_edit_data(data, files)
    return {entry.path: entry.content for entry in plan.files}


def refusal(data: object, files: Mapping[str, str] = FILES) -> Rejection:
    with pytest.raises(PlanRejected) as caught:
        edits.plan_from_edit_data(data, files)
    assert len(caught.value.rejections) == 1, caught.value.rejections
    rejection = caught.value.rejections[0]
    assert rejection.policy == "patch-contract"
    return rejection


def edit(path: str, search: str, replace: str) -> dict[str, str]:
    return {"path": path, "search": search, "replace": replace}


# --- search/replace ---------------------------------------------------------------------


def test_search_replace_edit_fixes_the_one_line() -> None:
    assert apply({"edits": [edit("calculator.py", "left - right", "left + right")]}) == {
        "calculator.py": FIXED
    }


def test_edits_apply_in_order_and_see_the_edits_before_them() -> None:
    got = apply(
        {
            "edits": [
                edit("calculator.py", "left - right", "left + right"),
                edit("calculator.py", "left + right", "right + left"),
                edit("new.py", "", "x = 1\n"),
            ]
        }
    )
    assert got == {
        "calculator.py": CALC.replace("left - right", "right + left"),
        "new.py": "x = 1\n",
    }
    assert list(got) == ["calculator.py", "new.py"]  # order of first appearance


def test_search_that_does_not_occur_is_refused_with_a_whitespace_hint() -> None:
    rejection = refusal({"edits": [edit("calculator.py", "return left - right  \n", "x")]})
    assert rejection.rule == "edit-no-match"
    assert rejection.path == "calculator.py"
    assert "edit 1's search text (first line 'return left - right  ') does not occur" in (
        rejection.message
    )
    assert "would match at line 6 if leading and trailing whitespace" in rejection.message


def test_search_with_no_near_match_says_so_without_a_hint() -> None:
    rejection = refusal({"edits": [edit("calculator.py", "def multiply(", "x")]})
    assert rejection.rule == "edit-no-match"
    assert "would match" not in rejection.message


def test_search_that_occurs_twice_names_every_line() -> None:
    rejection = refusal({"edits": [edit("calculator.py", "left", "x")]})
    assert rejection.rule == "edit-ambiguous"
    assert "occurs 3 times, at lines 4, 5, 6; add surrounding lines" in rejection.message


def test_ambiguous_search_over_a_huge_file_lists_few_lines_and_counts_all() -> None:
    files = {"big.py": "x = 1\n" * 100_000}
    rejection = refusal({"edits": [edit("big.py", "x = 1\n", "y")]}, files)
    assert rejection.rule == "edit-ambiguous"
    assert "occurs 100000 times, at lines 1, 2, 3, 4, 5, ... (100000 in all)" in (rejection.message)
    assert len(rejection.message) < 300


def test_edit_of_a_file_not_shown_reads_the_same_whether_hidden_or_absent() -> None:
    hidden = refusal({"edits": [edit("tests/hidden_test.py", "assert", "pass")]})
    absent = refusal({"edits": [edit("nowhere.py", "assert", "pass")]})
    assert hidden.rule == absent.rule == "edit-no-file"
    assert hidden.message == absent.message


def test_edit_of_a_test_file_is_made_and_left_to_the_contract_to_refuse() -> None:
    plan = edits.plan_from_edit_data(
        {"edits": [edit("check_calculator.py", "import unittest", "import os")]}, FILES
    )
    rejections = contract.check_plan(plan, editable_paths=("calculator.py",), limits=SeedLimits())
    assert [r.rule for r in rejections] == ["path-not-editable"]


def test_empty_search_creates_a_file_but_never_overwrites_one() -> None:
    assert apply({"edits": [edit("new.py", "", "x = 1\n")]}) == {"new.py": "x = 1\n"}
    assert apply({"edits": [edit("empty.py", "", "x\n")]}, {"empty.py": ""}) == {"empty.py": "x\n"}
    rejection = refusal({"edits": [edit("calculator.py", "", "x = 1\n")]})
    assert rejection.rule == "edit-shape"
    assert "empty search" in rejection.message


def test_crlf_file_stays_crlf_when_edited_with_lf_text() -> None:
    files = {"w.py": "a = 1\r\nb = 2\r\nc = 3\r\n"}
    assert apply({"edits": [edit("w.py", "b = 2\nc = 3", "b = 20\nc = 30")]}, files) == {
        "w.py": "a = 1\r\nb = 20\r\nc = 30\r\n"
    }


@pytest.mark.parametrize(
    "bad",
    [
        {"edits": "nope"},
        {"edits": [{"path": "calculator.py", "search": "a"}]},
        {"edits": [{"path": "calculator.py", "search": "a", "replace": 1}]},
        {"edits": [edit("calculator.py", "a", "b") | {"extra": "x"}]},
        {"edits": [], "diff": ""},
        {"diff": ["not", "text"]},
    ],
)
def test_misshapen_edit_answers_are_refused_by_rule(bad: object) -> None:
    assert refusal(bad).rule == "edit-shape"


def test_too_many_edits_are_refused_before_any_is_applied() -> None:
    many = {"edits": [edit("calculator.py", "zzz", "y")] * (MAX_EDITS + 1)}
    rejection = refusal(many)
    assert rejection.rule == "edit-count"
    assert str(MAX_EDITS) in rejection.message


def test_many_failing_edits_report_a_bounded_number_of_reasons() -> None:
    with pytest.raises(PlanRejected) as caught:
        edits.plan_from_edit_data({"edits": [edit("calculator.py", "zzz", "y")] * MAX_EDITS}, FILES)
    assert 1 < len(caught.value.rejections) <= 20


def test_hostile_overlapping_search_is_linear_not_quadratic() -> None:
    files = {"big.py": "a" * 2_000_000}
    started = time.monotonic()
    rejection = refusal({"edits": [edit("big.py", "a" * 1_000_000 + "b", "x")]}, files)
    assert rejection.rule == "edit-no-match"
    rejection = refusal({"edits": [edit("big.py", "a" * 1_000_000, "x")]}, files)
    assert rejection.rule == "edit-ambiguous"
    assert time.monotonic() - started < 5


def test_whitespace_hint_gives_up_on_many_candidates_quickly() -> None:
    files = {"big.py": "x\n" * 200_000}
    started = time.monotonic()
    rejection = refusal({"edits": [edit("big.py", " x\n" * 10_000 + " y", "z")]}, files)
    assert rejection.rule == "edit-no-match"
    assert time.monotonic() - started < 5


def test_whole_file_answers_keep_the_contracts_words() -> None:
    assert apply({"files": [{"path": "calculator.py", "content": FIXED}]}) == {
        "calculator.py": FIXED
    }
    assert refusal({"files": [{"path": "calculator.py"}]}).rule == "plan-shape"
    with pytest.raises(PlanRejected) as caught:
        edits.plan_from_edit_data({"plan": []}, FILES)
    assert {r.rule for r in caught.value.rejections} == {"plan-shape"}


def test_answer_text_with_a_repeated_key_is_refused() -> None:
    text = '{"edits": [{"path": "calculator.py", "path": "x", "search": "a", "replace": "b"}]}'
    with pytest.raises(PlanRejected) as caught:
        edits.parse_answer(text, FILES)
    assert caught.value.rejections[0].rule == "plan-json"
    assert "repeated key 'path'" in caught.value.rejections[0].message


def test_edit_format_is_a_planner_option_that_round_trips() -> None:
    options = PlannerOptions(edit_format="udiff")
    assert structure(to_jsonable(options), PlannerOptions) == options
    assert PlannerOptions().edit_format == "whole" == edits.DEFAULT_EDIT_FORMAT
    with pytest.raises(ValueError, match="must be one of whole, search-replace, udiff"):
        PlannerOptions(edit_format="diff")


# --- unified diffs ------------------------------------------------------------------------


def test_git_diff_applies() -> None:
    assert apply({"diff": CALC_DIFF}) == {"calculator.py": FIXED}


def test_diff_tolerates_wrong_counts_no_numbers_and_blank_context_as_empty_lines() -> None:
    sloppy = CALC_DIFF.replace("@@ -3,4 +3,4 @@", "@@ -1,9 +1,2 @@").replace("\n \n", "\n\n")
    assert apply({"diff": sloppy}) == {"calculator.py": FIXED}
    bare = CALC_DIFF.replace("@@ -3,4 +3,4 @@", "@@ ... @@")
    assert apply({"diff": bare}) == {"calculator.py": FIXED}
    no_prefix = CALC_DIFF.replace("a/calculator.py", "calculator.py").replace("b/", "")
    assert apply({"diff": no_prefix}) == {"calculator.py": FIXED}


def test_diff_with_several_files_and_hunks_and_a_created_file() -> None:
    files = {"m.py": "".join(f"line {n}\n" for n in range(1, 21))}
    diff = (
        "--- a/m.py\n+++ b/m.py\n"
        "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n"
        "@@ -17,3 +17,4 @@\n line 17\n line 18\n+line 18.5\n line 19\n"
        "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 2\n"
    )
    got = apply({"diff": diff}, files)
    assert got["m.py"].splitlines()[1:4] == ["line 2", "LINE 3", "line 4"]
    assert got["m.py"].splitlines()[17:20] == ["line 18", "line 18.5", "line 19"]
    assert got["pkg/new.py"] == "a = 1\nb = 2\n"


def test_diff_hunk_found_elsewhere_when_its_header_line_is_wrong() -> None:
    wrong_line = CALC_DIFF.replace("@@ -3,4 +3,4 @@", "@@ -40,4 +40,4 @@")
    assert apply({"diff": wrong_line}) == {"calculator.py": FIXED}


def test_diff_that_does_not_match_says_which_line_differs() -> None:
    bad = CALC_DIFF.replace("-    return left - right", "-    return left * right")
    rejection = refusal({"diff": bad})
    assert rejection.rule == "diff-no-match"
    assert rejection.path == "calculator.py"
    assert (
        "hunk 1 (diff line 5): expected line '    return left * right' at line 6, "
        "found '    return left - right'"
    ) in rejection.message


def test_diff_with_changed_indentation_gets_a_whitespace_hint() -> None:
    bad = CALC_DIFF.replace("-    return left - right", "-  return left - right").replace(
        "@@ -3,4 +3,4 @@", "@@ @@"
    )
    rejection = refusal({"diff": bad})
    assert rejection.rule == "diff-no-match"
    assert "would match at line 3 if leading and trailing whitespace" in rejection.message


def test_diff_matching_twice_is_ambiguous() -> None:
    files = {"r.py": "x = 1\ny = 2\nx = 1\ny = 2\n"}
    diff = "--- a/r.py\n+++ b/r.py\n@@ @@\n x = 1\n-y = 2\n+y = 3\n"
    rejection = refusal({"diff": diff}, files)
    assert rejection.rule == "diff-ambiguous"
    assert "occur 2 times, at lines 1, 3" in rejection.message


def test_diff_that_deletes_or_renames_a_file_is_refused() -> None:
    deleting = "--- a/calculator.py\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-x\n"
    rejection = refusal({"diff": deleting})
    assert (rejection.rule, rejection.path) == ("diff-delete", "calculator.py")
    git_delete = "diff --git a/c.py b/c.py\ndeleted file mode 100644\n"
    assert refusal({"diff": git_delete}).rule == "diff-delete"
    renaming = "--- a/calculator.py\n+++ b/other.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert refusal({"diff": renaming}).rule == "diff-malformed"


@pytest.mark.parametrize(
    ("diff", "words"),
    [
        ("just prose\n", "names no file"),
        ("@@ -1 +1 @@\n-a\n+b\n", "line 1 of the diff: a hunk header before any"),
        ("--- a/calculator.py\n+++ b/calculator.py\n", "has no hunk"),
        ("--- a/calculator.py\n+++ b/calculator.py\n@@ -1 +1 @@\n-a\n*b\n", "line 5 of the diff"),
        ("--- a/calculator.py\n+++ b/calculator.py\n@@ -one +1 @@\n-a\n", "a hunk header is"),
    ],
)
def test_malformed_diff_names_the_line_and_why(diff: str, words: str) -> None:
    rejection = refusal({"diff": diff})
    assert rejection.rule == "diff-malformed"
    assert words in rejection.message


def test_diff_of_a_hidden_or_absent_file_reads_the_same() -> None:
    def diff(path: str) -> str:
        return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"

    hidden, absent = (
        refusal({"diff": diff("tests/test_hidden.py")}),
        refusal({"diff": diff("n.py")}),
    )
    assert hidden.rule == absent.rule == "edit-no-file"
    assert hidden.message == absent.message


def test_diff_creating_a_file_that_exists_is_refused() -> None:
    diff = "--- /dev/null\n+++ b/calculator.py\n@@ -0,0 +1 @@\n+x = 1\n"
    assert refusal({"diff": diff}).rule == "diff-no-match"


def test_diff_keeps_crlf_and_the_missing_final_newline() -> None:
    files = {"w.py": "a\r\nb\r\nc"}
    lf = "--- a/w.py\n+++ b/w.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    assert apply({"diff": lf}, files) == {"w.py": "a\r\nB\r\nc"}
    git_crlf = (
        "--- a/w.py\n+++ b/w.py\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\n"
        "\\ No newline at end of file\n"
    )
    assert apply({"diff": git_crlf}, files) == {"w.py": "a\r\nB\r\nc"}
    adds_newline = "--- a/w.py\n+++ b/w.py\n@@ -3 +3 @@\n-c\n\\ No newline at end of file\n+c\n"
    assert apply({"diff": adds_newline}, files) == {"w.py": "a\r\nb\r\nc\r\n"}


def test_diff_with_too_many_hunks_is_refused() -> None:
    hunk = "@@ -1 +1 @@\n-a\n+b\n"
    diff = "--- a/calculator.py\n+++ b/calculator.py\n" + hunk * (MAX_EDITS + 1)
    assert refusal({"diff": diff}).rule == "edit-count"


def test_hostile_diff_over_a_huge_repetitive_file_is_fast() -> None:
    files = {"big.py": "a\n" * 200_000}
    diff = "--- a/big.py\n+++ b/big.py\n@@ -1 +1 @@\n" + " a\n" * 100_000 + "-b\n"
    started = time.monotonic()
    rejection = refusal({"diff": diff}, files)
    assert rejection.rule == "diff-no-match"
    ambiguous = "--- a/big.py\n+++ b/big.py\n@@ @@\n" + " a\n" * 1000 + "-a\n"
    assert refusal({"diff": ambiguous}, files).rule == "diff-ambiguous"
    assert time.monotonic() - started < 5


# --- plan files ---------------------------------------------------------------------------


def test_plan_file_may_be_a_raw_git_diff_or_json_of_any_shape() -> None:
    as_diff = edits.plan_from_plan_file(CALC_DIFF.encode(), FILES)
    as_json = edits.plan_from_plan_file(json.dumps({"diff": CALC_DIFF}).encode(), FILES)
    as_edits = edits.plan_from_plan_file(
        json.dumps({"edits": [edit("calculator.py", "left - right", "left + right")]}).encode(),
        FILES,
    )
    expected = PatchPlan(files=[contract.PatchFile("calculator.py", FIXED)])
    assert as_diff == as_json == as_edits == expected


def test_plan_file_that_is_neither_json_nor_a_diff_is_a_json_rejection() -> None:
    with pytest.raises(PlanRejected) as caught:
        edits.plan_from_plan_file(b"not a plan at all", FILES)
    assert caught.value.rejections[0].rule == "plan-json"


# --- a hostile model's answers ----------------------------------------------------------


def test_mutated_diffs_are_refused_or_applied_never_crash() -> None:
    import random

    pieces = [
        *("", " ", "-", "+", "-- ", "\r", "@@", "@@ -1 +1 @@", "@@ -0,0 +0,0 @@"),
        *("--- a/x", "+++ b/x", "--- /dev/null", "+++ /dev/null", "diff --git a/x b/x"),
        *("\\ No newline at end of file", "deleted file mode 100644", "rename from x"),
        *("@@ -99999999999999999999,1 +1 @@", " def add(left, right):", "+++ b/calculator.py"),
    ]
    files = {**FILES, "w.py": "a\r\nb\r\nc", "e.py": ""}
    base = (
        CALC_DIFF + "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
    )
    draw = random.Random(7)
    for _ in range(3000):
        lines = base.split("\n")
        for _ in range(draw.randint(1, 5)):
            at = draw.randrange(len(lines))
            kind = draw.randrange(3)
            if kind == 0:
                del lines[at]
            elif kind == 1:
                lines.insert(at, draw.choice(pieces))
            else:
                lines[at:at] = lines[draw.randrange(len(lines)) :][:2]
        text = "\n".join(lines)
        with contextlib.suppress(PlanRejected):
            edits.plan_from_edit_data({"diff": text}, files)
        with contextlib.suppress(PlanRejected):
            edits.plan_from_plan_file(text.encode(), files)


def test_diff_of_many_files_or_lines_is_refused_before_it_costs_memory() -> None:
    started = time.monotonic()
    headers = "--- a/x.py\n+++ b/x.py\n" * 300_000
    assert refusal({"diff": headers}).rule == "edit-count"
    lines = "--- a/calculator.py\n+++ b/calculator.py\n@@ @@\n" + "+ab\n" * 600_000
    rejection = refusal({"diff": lines})
    assert rejection.rule == "edit-count"
    assert "more than 500000 lines" in rejection.message
    assert time.monotonic() - started < 5


def test_huge_numbers_in_a_hunk_header_are_refused_not_crashed_on() -> None:
    adds = "--- a/calculator.py\n+++ b/calculator.py\n@@ -99999999999999999999,0 +1 @@\n+x\n"
    assert refusal({"diff": adds}).rule == "diff-no-match"
    found = CALC_DIFF.replace("@@ -3,4 +3,4 @@", "@@ -99999999999999999999,4 +1,4 @@")
    assert apply({"diff": found}) == {"calculator.py": FIXED}


def test_edits_reaching_outside_the_project_are_made_and_the_contract_refuses_them() -> None:
    for answer in (
        {"edits": [edit("../outside.py", "", "x = 1\n")]},
        {"edits": [edit("/etc/passwd", "", "x\n")]},
        {"diff": "--- /dev/null\n+++ b/../../outside.py\n@@ -0,0 +1 @@\n+x\n"},
    ):
        plan = edits.plan_from_edit_data(answer, FILES)
        rejections = contract.check_plan(
            plan, editable_paths=("calculator.py",), limits=SeedLimits()
        )
        assert {r.rule for r in rejections} >= {"path-segment", "path-not-editable"}, answer


def test_creating_a_hidden_test_reads_as_creating_any_file_not_shown() -> None:
    def said(path: str) -> list[str]:
        plan = edits.plan_from_edit_data({"edits": [edit(path, "", "x = 1\n")]}, FILES)
        rejections = contract.check_plan(
            plan, editable_paths=("calculator.py",), limits=SeedLimits()
        )
        return [r.describe().replace(path, "P") for r in rejections]

    assert said("held_out_test.py") == said("brand_new.py")


def test_crlf_file_gets_crlf_replacement_lines_when_the_search_is_one_line() -> None:
    files = {"w.py": "a = 1\r\nb = 2\r\n"}
    assert apply({"edits": [edit("w.py", "a = 1", "a = 1\nc = 3")]}, files) == {
        "w.py": "a = 1\r\nc = 3\r\nb = 2\r\n"
    }


def test_search_written_with_crlf_for_an_lf_file_gets_a_line_ending_hint() -> None:
    rejection = refusal({"edits": [edit("calculator.py", "def add(left, right):\r\n", "x")]})
    assert rejection.rule == "edit-no-match"
    assert "would match at line 4" in rejection.message
    assert "line endings" in rejection.message


def test_diff_of_two_files_whose_first_hunk_overstates_its_count() -> None:
    files = {"a.py": "x = 1\ny = 2\n", "b.py": "z = 3\n"}
    diff = (
        "--- a/a.py\n+++ b/a.py\n@@ -1,9 +1,9 @@\n x = 1\n-y = 2\n+y = 20\n"
        "--- a/b.py\n+++ b/b.py\n@@ -1,1 +1,1 @@\n-z = 3\n+z = 30\n"
    )
    assert apply({"diff": diff}, files) == {"a.py": "x = 1\ny = 20\n", "b.py": "z = 30\n"}


def test_removed_and_added_lines_that_look_like_a_file_header_stay_hunk_lines() -> None:
    files = {"q.sql": "select 1;\n-- old\nselect 2;\n"}
    diff = "--- a/q.sql\n+++ b/q.sql\n@@ -1,3 +1,3 @@\n select 1;\n--- old\n+++ new\n select 2;\n"
    assert apply({"diff": diff}, files) == {"q.sql": "select 1;\n++ new\nselect 2;\n"}

"""What the patch contract tells the person reviewing a plan, word for word, per rule.

The rule names are tested in ``test_contract.py``; these tests pin the messages, which
are what a reviewer reads, and the edges of the character classes.
"""

from __future__ import annotations

import pytest

from sandboxed_coding_agent.core.errors import PlanRejected
from sandboxed_coding_agent.core.model import SeedLimits
from sandboxed_coding_agent.core.plans import contract


def messages(
    *paths: str, editable: tuple[str, ...] = ("calc.py",), content: str = "x = 1\n"
) -> list[tuple[str, str, str | None]]:
    plan = contract.plan_from_data({"files": [{"path": p, "content": content} for p in paths]})
    rejections = contract.check_plan(plan, editable_paths=editable, limits=SeedLimits())
    return [(r.rule, r.message, r.path) for r in rejections]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", [("path-empty", "the path is empty", "''")]),
        ("a\\b.py", [("path-backslash", "the path contains a backslash", "a\\b.py")]),
        ("a\x00.py", [("path-nul", "the path contains a NUL character", "'a\\x00.py'")]),
        ("a\x1b.py", [("path-control", "the path contains a control character", "'a\\x1b.py'")]),
        (
            "/etc/passwd",
            [
                (
                    "path-segment",
                    "/etc/passwd is an absolute path; give the path relative to the seed's folder",
                    "/etc/passwd",
                )
            ],
        ),
        (
            "a/../b.py",
            [("path-segment", "the path has an empty, '.' or '..' segment", "a/../b.py")],
        ),
    ],
    ids=["empty", "backslash", "nul", "control", "absolute", "dot-dot"],
)
def test_each_path_rule_says_what_is_wrong(path: str, expected: list[tuple[str, str, str]]) -> None:
    found = messages(path, editable=(path,))

    assert found == expected


def test_a_path_not_editable_lists_the_editable_ones_or_none() -> None:
    assert messages("other.py", editable=("a.py", "b.py")) == [
        ("path-not-editable", "the path is not editable (editable: a.py, b.py)", "other.py")
    ]
    assert messages("other.py", editable=()) == [
        ("path-not-editable", "the path is not editable (editable: none)", "other.py")
    ]


def test_a_repeated_path_is_named_once_with_its_message() -> None:
    assert messages("calc.py", "calc.py") == [
        ("path-duplicate", "the path appears twice", "calc.py")
    ]


def test_content_with_nul_says_so() -> None:
    assert messages("calc.py", content="a\x00b") == [
        ("content-nul", "the content contains a NUL character", "calc.py")
    ]


def test_a_path_with_a_non_breaking_space_is_no_control_character() -> None:
    # U+00A0 is just past the C1 controls (U+0080..U+009F).
    assert messages("a\u00a0b.py", editable=("a\u00a0b.py",)) == []
    assert messages("a\u009fb.py", editable=("a\u009fb.py",))[0][0] == "path-control"


def test_repeated_keys_are_named_in_the_error() -> None:
    with pytest.raises(PlanRejected) as caught:
        contract.parse_plan('{"files": [], "a": 1, "a": 2, "b": 1, "b": 2}')

    assert "repeated key 'a', 'b'" in caught.value.rejections[0].message


def test_is_utf8_tells_lone_surrogates_from_text() -> None:
    assert contract.is_utf8("héllo ✓")
    assert not contract.is_utf8("bad \udcff byte")

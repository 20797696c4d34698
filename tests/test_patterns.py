"""Seed path patterns: what they match, and that no pattern makes matching hang."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun

from sandboxed_coding_agent.core.seeds import patterns

PATHOLOGICAL = "*a*a*a*a*a*a*a*a*a*a*a*a*b"
LONG_NAME = "a" * 60


def reference_regex(pattern: str) -> re.Pattern[str]:
    """REFERENCE ORACLE ONLY: the regular expression patterns used to compile to.

    It defines the semantics the matcher must keep, and backtracks
    catastrophically on hostile patterns, so it is only run here on short inputs.
    """
    pieces: list[str] = []
    segments = pattern.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            pieces.append(".*" if last else "(?:[^/]+/)*")
            continue
        for char in segment:
            pieces.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
        if not last:
            pieces.append("/")
    return re.compile("".join(pieces), re.DOTALL)


def random_text(rng: random.Random, pieces: list[str], most: int) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, most)))


def near_instance(rng: random.Random, pattern: str) -> str:
    """A path made by filling in ``pattern``'s wildcards, so that it often matches."""
    filled = "".join(
        "".join(rng.choice("ab\n/") for _ in range(rng.randint(0, 3)))
        if char == "*"
        else rng.choice("ab\n")
        if char == "?"
        else char
        for char in pattern
    )
    return filled or "a"


def test_matching_agrees_with_the_regular_expression_it_replaces() -> None:
    # Every pair is compared, even patterns a manifest refuses and paths with empty segments
    # (``a//b``, ``a/``): the matcher keeps the old answers there too.
    rng = random.Random(20240611)
    pattern_pieces = ["a", "b", "*", "?", "/", "**/", "/**", "\n"]
    path_pieces = ["a", "b", "/", "\n", "*", "?"]
    answers = {True: 0, False: 0}
    for _ in range(30_000):
        pattern = random_text(rng, pattern_pieces, 7)
        path = rng.choice([random_text(rng, path_pieces, 9), near_instance(rng, pattern)])
        expected = reference_regex(pattern).fullmatch(path) is not None
        assert patterns.matches(path, pattern) is expected, (path, pattern)
        answers[expected] += 1
    assert min(answers.values()) > 5_000, answers  # both answers well tried


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("app.py", "*.py", True),
        ("tests/test_app.py", "*.py", False),
        ("tests/test_app.py", "**/*.py", True),
        ("app.py", "**/*.py", True),
        ("a/b/c.py", "**/*.py", True),
        ("a/b/c.txt", "**/*.py", False),
        ("a", "a/**", False),
        ("a/b", "a/**", True),
        ("a/b/c", "a/**", True),
        ("b/c", "a/**", False),
        ("x", "**", True),
        ("x/y/z", "**", True),
        ("conftest.py", "**/conftest.py", True),
        ("x/y/conftest.py", "**/conftest.py", True),
        ("x/y/not_conftest.py", "**/conftest.py", False),
        ("a/x/b", "a/**/b", True),
        ("a/b", "a/**/b", True),
        ("a.py", "?.py", True),
        ("ab.py", "?.py", False),
        (".py", "?.py", False),
        ("a*b", "a*b", True),
        ("tests/odd\nname.py", "tests/**", True),
        ("tests/odd\nname/deeper.py", "tests/**", True),
        ("tests/odd\nname.py", "tests/*.py", True),
        ("tests/odd\nname.py", "tests/odd?name.py", True),
    ],
)
def test_pattern_matches_what_it_reads_as(path: str, pattern: str, expected: bool) -> None:
    assert patterns.matches(path, pattern) is expected
    assert (reference_regex(pattern).fullmatch(path) is not None) is expected


def seconds_to_answer(path: str, pattern: str, expected: bool) -> float:
    """How long ``matches`` takes, timed in a child process so a regression fails, not hangs."""
    program = (
        "import sys, time\n"
        "from sandboxed_coding_agent.core import patterns\n"
        "started = time.monotonic()\n"
        "answer = patterns.matches(sys.argv[1], sys.argv[2])\n"
        "print(answer, time.monotonic() - started)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", program, path, pattern],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"matching {pattern[:60]!r} did not answer within 10 seconds")
    answer, seconds = done.stdout.split()
    assert answer == str(expected)
    return float(seconds)


def test_a_star_heavy_pattern_answers_at_once() -> None:
    # The backtracking regular expression did not answer this within minutes.
    assert seconds_to_answer(LONG_NAME, PATHOLOGICAL, False) < 1
    assert seconds_to_answer(LONG_NAME + "b", PATHOLOGICAL, True) < 1


def test_a_chain_of_double_stars_answers_at_once_on_a_deep_path() -> None:
    deep = "/".join(["d"] * 60)
    assert seconds_to_answer(deep, "**/**/**/**/**/**/**/**/x", False) < 1
    assert seconds_to_answer(deep + "/x", "**/**/**/**/**/**/**/**/x", True) < 1


def test_a_huge_pattern_against_a_long_name_answers_at_once() -> None:
    # A manifest may hold a quarter of a megabyte: one pattern nearly that long must not hang.
    assert seconds_to_answer("a" * 255, "*a?" * 20_000 + "*b", False) < 1


def test_seeds_show_answers_promptly_for_a_hostile_pattern(
    tmp_path: Path, run_agent: Callable[..., AgentRun]
) -> None:
    # The hostile pattern is tried on every file of the folder when choosing the seed's
    # files and again for what is editable; only the name ending in "b" matches it.
    matching_name = "a" * 59 + "b"
    root = tmp_path / "hostile"
    (root / "tests").mkdir(parents=True)
    (root / LONG_NAME).write_text("")
    (root / matching_name).write_text("")
    (root / "app.py").write_text("def answer():\n    return 42\n")
    (root / "tests" / "test_app.py").write_text(
        "import unittest\n\nfrom app import answer\n\n\n"
        "class AnswerTest(unittest.TestCase):\n"
        "    def test_answer(self):\n"
        "        self.assertEqual(answer(), 42)\n"
    )
    (root / "seed.toml").write_text(
        textwrap.dedent(
            f"""\
            name = "hostile"
            description = "a pattern that a backtracking matcher would not finish"
            files = ["{PATHOLOGICAL}", "{LONG_NAME}", "app.py", "tests/*.py"]
            tests = ["tests/**"]
            editable = ["{PATHOLOGICAL}", "app.py"]
            test_command = ["python", "-m", "unittest", "discover", "-s", "tests", "-t", "."]
            default_prompt = "Keep the answer."
            """
        )
    )
    try:
        run = run_agent("seeds", "show", str(root), "--json", timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("agent seeds show did not answer within 20 seconds")
    assert run.returncode == 0, run.stderr
    shown = run.json()
    assert shown["editable_paths"] == [PATHOLOGICAL, "app.py"]
    assert sorted(shown["editable_files"]) == sorted([matching_name, "app.py"])


def test_a_pattern_of_many_question_marks_answers_quickly_on_a_long_name() -> None:
    # Each piece between stars is searched in one pass: a piece of 127 '?' against a name
    # of 250 characters took 24 ms per match when every place was compared in Python.
    started = time.perf_counter()
    for _ in range(200):
        assert not patterns.matches("x/" + "a" * 250, "**/*" + "?" * 127 + "b*")
    assert time.perf_counter() - started < 1.0

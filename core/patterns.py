"""Path patterns for seed files: ``*`` and ``?`` within one path segment, ``**`` across segments.

A pattern without wildcards names exactly one path. The dialect is
deliberately smaller than a shell's (no ``[...]``, no braces) so that what a
pattern matches is obvious from reading it: ``*.py`` matches ``app.py`` but not
``tests/test_app.py``, which only ``**/*.py`` matches.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

WILDCARDS = frozenset("*?")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a relative ``/``-separated path pattern, or ``None`` if it is."""
    if not pattern:
        return "the pattern is empty"
    if pattern.startswith("/"):
        return "the pattern is an absolute path"
    if "\\" in pattern:
        return "the pattern contains a backslash (use /)"
    if has_control_character(pattern):
        return "the pattern contains a control character"
    if any(segment in ("", ".", "..") for segment in pattern.split("/")):
        return "the pattern has an empty, '.' or '..' segment"
    return None


def has_control_character(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
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
    # DOTALL: a trailing ``**`` matches every name below, even one with a newline.
    return re.compile("".join(pieces), re.DOTALL)


def matches(path: str, pattern: str) -> bool:
    """Whether the relative ``path`` is matched by ``pattern`` as a whole."""
    return _regex(pattern).fullmatch(path) is not None


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    return any(matches(path, pattern) for pattern in patterns)


def is_literal(pattern: str) -> bool:
    """Whether ``pattern`` names one path rather than a family of them."""
    return not WILDCARDS & set(pattern)

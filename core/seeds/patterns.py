"""Path patterns for seed files: ``*`` and ``?`` within one path segment, ``**`` across segments.

A pattern without wildcards names exactly one path. The dialect is
deliberately smaller than a shell's (no ``[...]``, no braces) so that what a
pattern matches is obvious from reading it: ``*.py`` matches ``app.py`` but not
``tests/test_app.py``, which only ``**/*.py`` matches. A ``**`` segment matches
zero or more whole segments, or one or more at the end of a pattern: ``a/**``
matches ``a/b`` and ``a/b/c`` but not ``a``, and ``**`` alone matches every path.

Patterns come from seed folders, which are untrusted, so matching never
backtracks: a regular expression for ``*a*a*a*a*a*a*a*a*a*a*a*a*b`` does not
answer within minutes on a name of sixty ``a``. Here the work grows at most with
the pattern's length times the square of the path's, whatever the pattern.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

WILDCARDS = frozenset("*?")
#: Bounds on a pattern, so that matching every file of a seed folder stays quick.
MAX_PATTERN_CHARS = 256
MAX_PATTERN_SEGMENTS = 16


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
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"the pattern is longer than {MAX_PATTERN_CHARS} characters"
    if pattern.count("/") >= MAX_PATTERN_SEGMENTS:
        return f"the pattern has more than {MAX_PATTERN_SEGMENTS} segments"
    return None


def has_control_character(text: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)


def matches(path: str, pattern: str) -> bool:
    """Whether the relative ``path`` is matched by ``pattern`` as a whole."""
    # Fast answers for the common shapes, which a tree of many files meets for every file:
    # a literal pattern is one path, and a literal last segment must be the path's last name.
    last, literal = _shape(pattern)
    if last is not None:
        if not path.endswith(last) or last != path.rpartition("/")[2]:
            return False
        if literal:
            return path == pattern
    names = path.split("/")
    # ``**/**`` matches what one ``**`` does: a run of them is one.
    globs: list[str] = []
    for glob in pattern.split("/"):
        if glob != "**" or not globs or globs[-1] != "**":
            globs.append(glob)
    if "**" not in globs:
        return len(names) == len(globs) and all(map(_name_matches, names, globs))
    # reached[j]: the pattern's segments so far match exactly the path's first j segments.
    # One pass per pattern segment over this table is what keeps ``**/**/...`` polynomial.
    reached = [True] + [False] * len(names)
    for index, glob in enumerate(globs):
        if glob == "**" and index == len(globs) - 1:
            # What is left of the path, from one segment on, in full: even empty names.
            return any(reached[:-1])
        if glob == "**":
            # Zero or more whole segments; an empty name is no segment to skip.
            for j, name in enumerate(names, start=1):
                reached[j] = reached[j] or (reached[j - 1] and name != "")
        else:
            reached = [False] + [
                reached[j] and _name_matches(name, glob) for j, name in enumerate(names)
            ]
        if not any(reached):
            return False
    return reached[-1]


@functools.lru_cache(maxsize=1024)
def _shape(pattern: str) -> tuple[str | None, bool]:
    """The pattern's last segment when it is literal (else ``None``), and whether all is."""
    last = pattern.rpartition("/")[2]
    if WILDCARDS & set(last):
        return None, False
    return last, not WILDCARDS & set(pattern)


def _name_matches(name: str, glob: str) -> bool:
    """Whether one path segment matches one pattern segment of ``*``, ``?`` and literals.

    Greedy and never undone: each piece between stars is taken at its leftmost
    place in the name, since a later place would only leave less of the name
    for the pieces after it. Each place is tried as the start of at most one
    piece, so the work is bounded by the name's length squared plus the glob's.
    """
    head, *pieces = glob.split("*")
    if not pieces:
        return len(name) == len(head) and _fits(name, 0, head)
    tail = pieces.pop()
    end = len(name) - len(tail)
    if end < len(head) or not _fits(name, 0, head) or not _fits(name, end, tail):
        return False
    at = len(head)
    for piece in pieces:
        found = _find(name, piece, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _fits(name: str, at: int, piece: str) -> bool:
    """Whether ``piece`` (literals and ``?``) matches the name from ``at``, where it has room."""
    if "?" not in piece:
        return name.startswith(piece, at)
    return all(p in ("?", c) for c, p in zip(name[at : at + len(piece)], piece, strict=True))


def _find(name: str, piece: str, start: int, end: int) -> int:
    """Where ``piece`` first matches within ``name[start:end]``, or -1."""
    if "?" not in piece:
        return name.find(piece, start, end)
    found = _fixed(piece).search(name, start, end)
    return -1 if found is None else found.start()


@functools.lru_cache(maxsize=256)
def _fixed(piece: str) -> re.Pattern[str]:
    # A piece has no star, so its expression has no repetition to backtrack over: the
    # search tries each place once, at C speed.
    return re.compile("".join("." if c == "?" else re.escape(c) for c in piece), re.DOTALL)


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    return any(matches(path, pattern) for pattern in patterns)


def is_literal(pattern: str) -> bool:
    """Whether ``pattern`` names one path rather than a family of them."""
    return not WILDCARDS & set(pattern)

"""How a problem of a ``seed.toml`` is reported: one :class:`ManifestError`, naming the
file, the line and the key.

The line comes from :func:`key_lines`, a scan of the manifest's text for the line
where each table and key is first written: ``tomllib`` gives the values, not where
they were written.
"""

from __future__ import annotations

import re
import tomllib

from ..errors import UsageError


class ManifestError(UsageError):
    """A ``seed.toml`` that cannot describe a seed; the message names the line and the problem."""


_BARE_KEY = r"[A-Za-z0-9_-]+"
_QUOTED_KEY = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_KEY = rf"(?:{_BARE_KEY}|{_QUOTED_KEY})"
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?")
_ASSIGNMENT = re.compile(rf"\s*({_DOTTED})\s*=")


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line where each table and key of a (valid) TOML document is first written.

    Only used to point at a problem: values spanning lines (arrays, inline
    tables, multi-line strings) are skipped so their content is never taken
    for a key, and keys inside inline tables are found through their parent.
    """
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    depth = 0
    open_string: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        rest = line
        if open_string is None and depth == 0:
            header = _HEADER.fullmatch(line)
            if header:
                table = _split_key(header.group(1))
                lines.setdefault(table, number)
                continue
            assignment = _ASSIGNMENT.match(line)
            if assignment:
                lines.setdefault(table + _split_key(assignment.group(1)), number)
                rest = line[assignment.end() :]
        depth, open_string = _scan_value(rest, depth, open_string)
    return lines


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = []
    for token in re.findall(_KEY, dotted):
        if token.startswith('"'):
            parts.append(tomllib.loads(f"k = {token}")["k"])
        elif token.startswith("'"):
            parts.append(token[1:-1])
        else:
            parts.append(token)
    return tuple(parts)


def _scan_value(text: str, depth: int, open_string: str | None) -> tuple[int, str | None]:
    """Bracket depth and open multi-line string after ``text``, given those before it."""
    i = 0
    while i < len(text):
        if open_string is not None:
            end = _closing(text, i, open_string)
            if end < 0:
                return depth, open_string
            i, open_string = end + 3, None
            continue
        char = text[i]
        if char == "#":
            break
        if text.startswith(('"""', "'''"), i):
            open_string, i = text[i : i + 3], i + 3
        elif char == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif char == "'":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
        else:
            depth += (char in "[{") - (char in "]}")
            i += 1
    return depth, open_string


def _closing(text: str, start: int, delimiter: str) -> int:
    i = start
    while (found := text.find(delimiter, i)) >= 0:
        if delimiter == "'''":
            return found
        # Count the backslashes just before it, not by slicing the text so far: a manifest
        # full of escaped quotes would make that quadratic.
        before = found
        while before > start and text[before - 1] == "\\":
            before -= 1
        if (found - before) % 2 == 0:
            return found
        i = found + 1
    return -1

"""Text from the results, made safe to show: escaped, invisible characters made visible,
bounded, and a diff coloured line by line."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

#: Characters that change how text around them reads or show nothing (controls, bidi
#: overrides and isolates, zero-width characters, line and paragraph separators): each is
#: shown as its code point, so a test output cannot reorder or hide what it says.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e"
    "\u2060-\u2064\u2066-\u2069\ufeff]"
)
#: Where :class:`TextBlocks` puts a text until it knows how much of it the page shows.
_PLACE = re.compile("\x00([0-9]+)\x00")


def _shown(match: re.Match[str]) -> str:
    return f'<span class="ctl">&lt;U+{ord(match[0]):04X}&gt;</span>'


def text(value: str) -> str:
    """``value`` as HTML text."""
    # A carriage return alone (a progress bar's) ends a line as a newline does.
    lines = value.replace("\r\n", "\n").replace("\r", "\n")
    return _HIDDEN.sub(_shown, escape(lines, quote=True))


def attr(value: str) -> str:
    """``value`` as an attribute's value (quoted with ``"``), invisible characters replaced."""
    return _HIDDEN.sub("\ufffd", escape(value, quote=True))


def diff_lines(diff: str) -> str:
    """A unified diff as HTML, each line in a class saying what it is."""
    lines: list[str] = []
    for line in diff.split("\n"):
        if line.startswith(("+++ ", "--- ", "diff ", "index ")):
            kind = "meta"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            lines.append(text(line))
            continue
        lines.append(f'<span class="{kind}">{text(line)}</span>')
    return "\n".join(lines)


def fair_share(lengths: Sequence[int], budget: int) -> int:
    """The most characters each text may keep so that together they keep at most
    ``budget``: short texts keep all, long ones share what is left equally."""
    left, waiting = budget, sorted(lengths)
    for index, length in enumerate(waiting):
        share = left // (len(waiting) - index)
        if length > share:
            return share
        left -= length
    return max(waiting, default=0)


def cut(value: str, limit: int, keep: str, note: str) -> tuple[str, int]:
    """``value`` bounded to ``limit`` characters, keeping its ``head``, ``tail`` or
    ``both`` ends, with a line saying how much was left out; and that number."""
    if len(value) <= limit:
        return value, 0
    left_out = len(value) - limit
    said = f"\n[... {left_out:,} characters left out here{note} ...]\n"
    if keep == "head":
        return value[:limit] + said, left_out
    if keep == "tail":
        return said + value[-limit:] if limit else said, left_out
    head = limit // 2
    return value[:head] + said + (value[-(limit - head) :] if limit - head else ""), left_out


class TextBlocks:
    """The long texts of one task (diffs, outputs, the prompt), held apart until all are
    known so that each gets a fair part of the task's allowance of characters."""

    def __init__(self, allowance: int, per_text: int, note: str) -> None:
        self._texts: list[tuple[str, str, bool]] = []
        self._allowance = allowance
        self._per_text = per_text
        self._note = note
        self.left_out = 0

    def add(self, value: str, *, keep: str = "head", diff: bool = False) -> str:
        """A place for ``value`` in the page, filled by :meth:`fill`."""
        self._texts.append((value, keep, diff))
        return f"\x00{len(self._texts) - 1}\x00"

    def fill(self, page: str) -> str:
        share = fair_share([len(t) for t, _, _ in self._texts], self._allowance)
        limit = min(share, self._per_text)

        def filled(match: re.Match[str]) -> str:
            value, keep, diff = self._texts[int(match[1])]
            shown, left_out = cut(value, limit, keep, self._note)
            self.left_out += left_out
            return diff_lines(shown) if diff else text(shown)

        return _PLACE.sub(filled, page)

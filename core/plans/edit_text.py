"""What the edit formats (:mod:`.edits`, :mod:`.udiff`) share: a file as lines, and the
words of their rejections.

A file's text is split at its own line ending, so that a CRLF file stays CRLF whatever
line endings the model wrote; every search for text is linear in the file's size (no
line-by-line comparison of each position), so a hostile answer cannot make it quadratic.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..errors import Rejection

POLICY = "patch-contract"

#: The most edits of a search/replace answer, or hunks of a diff, that are applied: a
#: one-line fix needs one, a careful refactoring dozens; more is a hostile answer.
MAX_EDITS = 256
#: The most line numbers a rejection lists (of the places an ambiguous edit matches).
MAX_LISTED_LINES = 5
#: The most rejections one answer gets: beyond them the model has enough to fix.
MAX_REJECTIONS = 20
#: How much of the model's own text a rejection quotes.
QUOTED_CHARS = 80
#: How many lines the whitespace-blind hint compares before giving up.
MAX_HINT_COMPARISONS = 200_000


def reject(rule: str, message: str, path: str | None = None) -> Rejection:
    return Rejection(policy=POLICY, rule=rule, message=message, path=path)


def quote(text: str) -> str:
    """``text`` as a Python literal (so a control character shows), cut to :data:`QUOTED_CHARS`."""
    cut = text[:QUOTED_CHARS]
    return repr(cut) + ("..." if cut != text else "")


def line_list(numbers: Sequence[int], total: int) -> str:
    """``"3, 9, 14"``, or ``"3, 9, 14, ... (7 in all)"`` past :data:`MAX_LISTED_LINES`."""
    shown = ", ".join(str(n) for n in numbers[:MAX_LISTED_LINES])
    return shown + (f", ... ({total} in all)" if total > len(numbers[:MAX_LISTED_LINES]) else "")


@attrs.define
class Lines:
    """A file's text as lines without their ending, and what joins them again.

    :ivar lines: the lines; a text ending in a line ending has no empty last line.
    :ivar eol: ``"\\r\\n"`` when every line ends so, else ``"\\n"`` (a lone ``\\r`` stays
        part of its line).
    :ivar final_eol: whether the last line ends in ``eol`` (or the text is empty).
    """

    lines: list[str]
    eol: str
    final_eol: bool

    @classmethod
    def of(cls, text: str) -> Lines:
        crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
        eol = "\r\n" if crlf else "\n"
        if not text:
            return cls([], eol, True)
        final = text.endswith(eol)
        lines = (text[: -len(eol)] if final else text).split(eol)
        return cls(lines, eol, final)

    def text(self) -> str:
        if not self.lines:
            return ""
        return self.eol.join(self.lines) + (self.eol if self.final_eol else "")


def line_of(text: str, offset: int) -> int:
    """The number (from 1) of the line holding character ``offset`` of ``text``."""
    return text.count("\n", 0, offset) + 1


def occurrences(text: str, part: str, start: int = 0) -> tuple[list[int], int]:
    """Where ``part`` occurs in ``text`` from ``start``: the first few offsets (at most
    :data:`MAX_LISTED_LINES` + 1, overlapping ones included), and how many times in all
    (without overlaps; linear in the text's size)."""
    found: list[int] = []
    at = text.find(part, start)
    while at != -1 and len(found) <= MAX_LISTED_LINES:
        found.append(at)
        at = text.find(part, at + 1)
    total = len(found) if len(found) <= 1 else max(len(found), text.count(part, start))
    return found, total


def loose_line(lines: Sequence[str], wanted: Sequence[str]) -> int | None:
    """The number (from 1) of the first line where ``wanted`` would match ``lines`` if each
    line's leading and trailing whitespace (a ``\\r`` included) were ignored; ``None`` when
    it would not, or the comparison would take too long to tell."""
    stripped_wanted = [line.strip() for line in wanted]
    blank = 0
    while blank < len(stripped_wanted) and not stripped_wanted[blank]:
        blank += 1
    del stripped_wanted[:blank]
    while stripped_wanted and not stripped_wanted[-1]:
        stripped_wanted.pop()
    if not stripped_wanted:
        return None
    first = stripped_wanted[0]
    budget = MAX_HINT_COMPARISONS
    for index, line in enumerate(lines):
        if line.strip() != first:
            continue
        for offset, want in enumerate(stripped_wanted):
            budget -= 1
            if budget < 0:
                return None
            at = index + offset
            if at >= len(lines) or lines[at].strip() != want:
                break
        else:
            return max(index - blank, 0) + 1
    return None

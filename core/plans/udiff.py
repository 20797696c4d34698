"""Unified diffs as an edit format: read one as ``git diff`` (or a model) writes it, and
apply it to the files a planner was shown, as ``patch`` would without fuzz.

A hunk's old lines (context and removed) must match the file exactly: first where its
``@@`` header says (shifted by the hunks before it), else at their one occurrence after
the hunk before; nowhere, or at several places, is a rejection saying where and what
differs. What models commonly get wrong and does not change the meaning is tolerated:
wrong line counts in a header (they are hints; a header may even omit its numbers), an
empty line standing for a blank context line, a missing ``\\ No newline at end of
file``, ``diff --git``, ``index`` and mode lines, prose before, between or after the
files. A CRLF file stays CRLF. Deleting, renaming or copying a file is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from ..errors import PlanRejected, Rejection
from ..seeds.project import SeedLimits
from .contract import _label
from .edit_text import (
    MAX_EDITS,
    MAX_REJECTIONS,
    Lines,
    line_list,
    loose_line,
    occurrences,
    quote,
    reject,
)
from .planning import PatchFile, PatchPlan

_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
#: The most lines of a diff that are read: a diff making the largest plan the seed
#: limits' ceilings allow has far fewer; each line read costs about a hundred bytes.
MAX_DIFF_LINES = 500_000
_BARE_HEADER = re.compile(r"@@\s*(?:\.\.\.)?\s*@@.*|@@\s*")
_IGNORED = (
    "diff --git ",
    "index ",
    "new file mode ",
    "old mode ",
    "new mode ",
    "similarity index ",
    "dissimilarity index ",
)
_REFUSED = {
    "deleted file mode ": ("diff-delete", "deleting a file is not supported"),
    "rename from ": ("diff-malformed", "renaming a file is not supported"),
    "copy from ": ("diff-malformed", "copying a file is not supported"),
    "Binary files ": ("diff-malformed", "a binary diff cannot be applied"),
    "GIT binary patch": ("diff-malformed", "a binary diff cannot be applied"),
}


def looks_like_diff(text: str) -> bool:
    """Whether ``text`` has the lines every unified diff has: ``--- ``, ``+++ `` and ``@@``."""
    return bool(re.search(r"^--- ", text, re.M) and re.search(r"^@@", text, re.M))


@attrs.define
class Hunk:
    """One ``@@`` hunk: where its header says it starts, and its lines.

    :ivar at: its header's line in the diff (from 1).
    :ivar old_start: the old file's line the header names; ``None`` when it names none.
    :ivar old_count: the header's count of old lines; ``None`` when it gives none.
    :ivar body: each line as its mark (``" "``, ``"-"`` or ``"+"``) and its text.
    :ivar old_no_eol: ``\\ No newline at end of file`` follows an old line.
    :ivar new_no_eol: ``\\ No newline at end of file`` follows a new line.
    """

    at: int
    old_start: int | None
    old_count: int | None
    body: list[tuple[str, str]] = attrs.field(factory=list)
    old_no_eol: bool = False
    new_no_eol: bool = False


@attrs.define
class FileDiff:
    """One file's part of a diff: its path as written, whether it creates it, its hunks."""

    path: str
    at: int
    creates: bool
    hunks: list[Hunk] = attrs.field(factory=list)


def _malformed(line: int, problem: str) -> PlanRejected:
    return PlanRejected([reject("diff-malformed", f"line {line} of the diff: {problem}")])


def _header_path(rest: str) -> str | None:
    """The path of a ``--- ``/``+++ `` line's rest; ``None`` for ``/dev/null``."""
    path = rest.split("\t", 1)[0].rstrip("\r")
    if path.endswith(" ") and path.rstrip() == "/dev/null":
        path = path.rstrip()
    if len(path) > 1 and path.startswith('"') and path.endswith('"') and "\\" not in path:
        path = path[1:-1]
    return None if path == "/dev/null" else path


def parse_diff(text: str) -> list[FileDiff]:
    """The files and hunks of a unified diff.

    :raises PlanRejected: ``diff-malformed`` (naming the diff's line and what is wrong),
        ``diff-delete``, or ``edit-count`` past :data:`~.edit_text.MAX_EDITS` hunks or
        files, or :data:`MAX_DIFF_LINES` lines.
    """
    if text.count("\n") > MAX_DIFF_LINES:  # before the lines are made: each costs memory
        raise PlanRejected([reject("edit-count", f"the diff has more than {MAX_DIFF_LINES} lines")])
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if lines and all(line.endswith("\r") for line in lines):  # the whole diff saved as CRLF
        lines = [line[:-1] for line in lines]
    files: list[FileDiff] = []
    hunk: Hunk | None = None
    seen = [0, 0]  # the current hunk's old and new lines so far
    hunks = 0
    header_next = False  # the line is a file's '+++ ' line, already read
    for index, line in enumerate(lines):
        number = index + 1
        if header_next:
            header_next = False
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        # A removed "-- x" and an added "++ y" look like a file's header; the header's
        # counts tell them apart, and so does a hunk header after them, when counts are wrong.
        counted = hunk is not None and _counts_done(hunk, seen)
        hunk_next = index + 2 < len(lines) and lines[index + 2].startswith("@@")
        if (
            line.startswith("--- ")
            and following.startswith("+++ ")
            and (hunk is None or counted or hunk_next)
        ):
            _end(hunk, files)
            old, new = _header_path(line[4:]), _header_path(following[4:])
            if new is None:
                deleted = None if old is None else _plain(old)
                raise PlanRejected([reject("diff-delete", _DELETE, deleted)])
            if old is not None and _plain(old) != _plain(new):
                raise _malformed(number, "renaming a file is not supported")
            if len(files) == MAX_EDITS:
                raise PlanRejected(
                    [reject("edit-count", f"the diff changes more than {MAX_EDITS} files")]
                )
            files.append(FileDiff(new, number, creates=old is None))
            hunk, header_next = None, True
        elif line.startswith("@@"):
            if not files:
                raise _malformed(number, "a hunk header before any '--- a/PATH', '+++ b/PATH'")
            _end(hunk, files)
            hunks += 1
            if hunks > MAX_EDITS:
                raise PlanRejected(
                    [reject("edit-count", f"the diff has more than {MAX_EDITS} hunks")]
                )
            hunk = _hunk(number, line)
            files[-1].hunks.append(hunk)
            seen = [0, 0]
        elif hunk is not None and line == "-- " and counted:  # git format-patch's signature
            _end(hunk, files)
            hunk = None
        elif hunk is not None and line[:1] in ("", " ", "-", "+", "\\"):
            _add(hunk, line, seen)
        elif line.startswith(tuple(_REFUSED)):
            rule, problem = next(v for k, v in _REFUSED.items() if line.startswith(k))
            if rule == "diff-delete":
                raise PlanRejected([reject(rule, _DELETE)])
            raise _malformed(number, problem)
        elif hunk is not None and not line.startswith(_IGNORED):
            raise _malformed(
                number,
                "a hunk's lines start with ' ' (context), '-' (removed) or '+' (added); "
                f"this one is {quote(line)}",
            )
        else:  # prose, or a git header line, outside any hunk
            _end(hunk, files)
            hunk = None
    _end(hunk, files)
    if not files:
        raise PlanRejected(
            [reject("diff-malformed", "the diff names no file: no '--- a/PATH', '+++ b/PATH'")]
        )
    for diff in files:
        if not diff.hunks:
            raise _malformed(diff.at, f"the diff of {diff.path!r} has no hunk ('@@ ... @@')")
    return files


_DELETE = "the diff deletes a file, which a plan cannot do; change the file's text instead"


def _plain(path: str) -> str:
    return path[2:] if path.startswith(("a/", "b/")) else path


def _hunk(number: int, line: str) -> Hunk:
    match = _HEADER.match(line)
    if match is None:
        if _BARE_HEADER.fullmatch(line.rstrip()):
            return Hunk(number, None, None)  # "@@ ... @@": no numbers, a place to be found
        raise _malformed(number, f"a hunk header is '@@ -l,n +l,n @@', not {quote(line)}")
    old_count = match.group(2)
    return Hunk(number, int(match.group(1)), None if old_count is None else int(old_count))


def _counts_done(hunk: Hunk, seen: list[int]) -> bool:
    return hunk.old_count is not None and seen[0] >= hunk.old_count


def _add(hunk: Hunk, line: str, seen: list[int]) -> None:
    if line.startswith("\\"):
        if hunk.body and hunk.body[-1][0] == "-":
            hunk.old_no_eol = True
        elif hunk.body:
            hunk.new_no_eol = True
            if hunk.body[-1][0] == " ":
                hunk.old_no_eol = True
        return
    mark, text = (line[0], line[1:]) if line else (" ", "")  # an empty line: blank context
    hunk.body.append((mark, text))
    seen[0] += mark != "+"
    seen[1] += mark != "-"


def _end(hunk: Hunk | None, files: list[FileDiff]) -> None:
    """Drop the empty lines that end a hunk: a model's blank line between files, not context."""
    if hunk is None:
        return
    while hunk.body and hunk.body[-1] == (" ", "") and not hunk.new_no_eol:
        hunk.body.pop()
    if not hunk.body:
        raise _malformed(hunk.at, "a hunk has no lines")


def plan_from_diff(text: str, files: Mapping[str, str], *, limits: SeedLimits) -> PatchPlan:
    """The whole-file plan unified diff ``text`` makes of ``files`` (path -> text).

    :raises PlanRejected: the diff is malformed, or a hunk does not apply (every such
        hunk is named, up to :data:`~.edit_text.MAX_REJECTIONS`).
    """
    current: dict[str, str] = {}
    rejections: list[Rejection] = []
    for diff in parse_diff(text):
        path = _resolve(diff.path, files)
        label = _label(path, limits)
        text_now = current[path] if path in current else files.get(path)
        if diff.creates and text_now:
            rejections.append(reject("diff-no-match", _EXISTS, label))
            continue
        if text_now is None and not diff.creates:
            rejections.append(reject("edit-no-file", _NO_FILE, label))
            continue
        lines = Lines.of(text_now or "")
        problems = _apply_hunks(diff.hunks, lines)
        rejections.extend(reject(rule, message, label) for rule, message in problems)
        current[path] = lines.text()
        if len(rejections) >= MAX_REJECTIONS:
            break
    if rejections:
        raise PlanRejected(rejections[:MAX_REJECTIONS])
    return PatchPlan(PatchFile(path, content) for path, content in current.items())


_EXISTS = (
    "the diff creates this file ('--- /dev/null'), but it is among the files you were "
    "shown; give hunks against its current text instead"
)
_NO_FILE = (
    "the diff changes a file that is not among the files you were shown; change only "
    "those ('--- /dev/null' creates a new file)"
)


def _resolve(path: str, files: Mapping[str, str]) -> str:
    """The path a diff's ``b/PATH`` names: without git's prefix, unless only the path as
    written is a file."""
    plain = _plain(path)
    return path if plain != path and path in files and plain not in files else plain


def _apply_hunks(hunks: list[Hunk], file: Lines) -> list[tuple[str, str]]:
    """Apply ``hunks`` to ``file`` in place; each failure as a rule and message."""
    problems: list[tuple[str, str]] = []
    done = 0  # where the hunk before ended, in the file as changed so far
    shift = 0  # how many lines the hunks so far added (less those they removed)
    crlf = file.eol == "\r\n"
    for number, hunk in enumerate(hunks, start=1):
        body = [
            (mark, text[:-1] if crlf and text.endswith("\r") else text) for mark, text in hunk.body
        ]
        old = [text for mark, text in body if mark != "+"]
        new = [text for mark, text in body if mark != "-"]
        found = _place(hunk, number, old, file.lines, done, shift)
        if isinstance(found, tuple):
            problems.append(found)
            continue
        file.lines[found : found + len(old)] = new
        done, shift = found + len(new), shift + len(new) - len(old)
        if hunk.new_no_eol:
            file.final_eol = False
        elif hunk.old_no_eol:
            file.final_eol = True
    return problems


def _place(
    hunk: Hunk, number: int, old: list[str], lines: list[str], done: int, shift: int
) -> int | tuple[str, str]:
    """Where hunk ``number``'s old lines start in ``lines`` (index), or why nowhere."""
    name = f"hunk {number} (diff line {hunk.at})"
    if not old:  # only added lines: the header alone says where
        if hunk.old_start is None:
            if not lines:
                return 0
            return "diff-malformed", f"{name} only adds lines, so its header needs numbers"
        at = hunk.old_start + shift - (0 if hunk.old_count == 0 else 1)
        if not 0 <= at <= len(lines):
            return "diff-no-match", f"{name} adds after line {hunk.old_start}, past the file's end"
        return max(at, done)
    hinted = None if hunk.old_start is None else max(hunk.old_start - 1, 0) + shift
    if hinted is not None and hinted >= done and lines[hinted : hinted + len(old)] == old:
        return hinted
    needle = "\n" + "\n".join(old) + "\n"
    hay = "\n" + "\n".join(lines[done:]) + "\n"
    found, total = occurrences(hay, needle)
    if len(found) == 1:
        return done + hay.count("\n", 0, found[0])
    if found:
        where = [done + hay.count("\n", 0, at) + 1 - shift for at in found]
        return "diff-ambiguous", (
            f"{name}'s context and removed lines occur {total} times, at lines "
            f"{line_list(where, total)}; add context lines so that they occur once"
        )
    return "diff-no-match", _no_match(name, hinted, old, lines, done, shift)


def _no_match(
    name: str, hinted: int | None, old: list[str], lines: list[str], done: int, shift: int
) -> str:
    if hinted is not None and hinted < len(lines):
        window = lines[hinted : hinted + len(old)]
        index = next((i for i, want in enumerate(old) if i >= len(window) or window[i] != want), 0)
        found = quote(window[index]) if index < len(window) else "the end of the file"
        message = (
            f"{name}: expected line {quote(old[index])} at line {hinted + index + 1 - shift}, "
            f"found {found}; its context and removed lines are found nowhere else after the "
            "hunk before"
        )
    else:
        message = (
            f"{name}: its context and removed lines (first {quote(_first_text(old))}) are found "
            "nowhere in the file after the hunk before; copy them exactly from the file"
        )
    near = loose_line(lines, old)
    if near is not None:
        message += (
            f". They would match at line {near - (shift if near - 1 >= done else 0)} if "
            "leading and trailing whitespace were ignored: copy those lines exactly"
        )
    return message


def _first_text(lines: list[str]) -> str:
    return next((line for line in lines if line.strip()), lines[0])

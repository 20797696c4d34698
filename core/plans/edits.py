"""Edit formats: how a plan may be written besides whole files, and how it becomes one.

A plan is always whole-file replacements (:class:`~.model.PatchPlan`); a planner may
ask its model for, and accept, an answer in any of :data:`EDIT_FORMATS`, which this
module applies to the files the planner was shown to make the whole files. The plan
then goes through the patch contract and every policy as any other, so a file no plan
may replace (a test, a file that is not editable) is made here and refused there.

* ``whole``: ``{"files": [{"path": P, "content": TEXT}]}``, the default. Peers that
  measured it (Aider's edit-format benchmarks among them) report that weaker models do
  better writing whole files than writing edits; for a large file it costs output.
* ``search-replace``: ``{"edits": [{"path": P, "search": EXACT_TEXT, "replace": TEXT}]}``,
  applied in order (several edits may name the same file, each seeing the ones before).
  ``search`` must occur exactly once in the file; an empty ``search`` creates a file that
  is not among those shown, or fills an empty one. In a CRLF file, a search and
  replacement written with LF line endings are taken as CRLF.
* ``udiff``: ``{"diff": "--- a/P\\n+++ b/P\\n@@ -l,n +l,n @@\\n ..."}``, a unified diff
  as ``git diff`` writes it (see :mod:`.udiff`): several files and hunks, ``/dev/null``
  as the old file to create one; deleting a file is refused.

An answer is read by the one key it has, whatever format was asked for. At most
:data:`~.edit_text.MAX_EDITS` edits or hunks are applied. Every failure is a
:class:`~.errors.PlanRejected` from the ``patch-contract`` policy whose message alone
tells a model how to fix its answer, since a repair attempt passes it back verbatim;
a path that is not among the files shown is named in the same words whether it is
absent or hidden.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..errors import PlanRejected, Rejection
from ..seeds.project import SeedLimits
from .contract import _label, _no_duplicate_keys, plan_from_data
from .edit_text import (
    MAX_EDITS,
    MAX_REJECTIONS,
    line_list,
    line_of,
    loose_line,
    occurrences,
    quote,
    reject,
)
from .planning import DEFAULT_EDIT_FORMAT as DEFAULT_EDIT_FORMAT
from .planning import EDIT_FORMATS as EDIT_FORMATS
from .planning import PatchFile, PatchPlan
from .udiff import looks_like_diff, plan_from_diff

#: The one key of an answer in each format.
FORMAT_KEYS = {"files": "whole", "edits": "search-replace", "diff": "udiff"}

_SHAPES = (
    '{"files": [{"path": P, "content": TEXT}]}, '
    '{"edits": [{"path": P, "search": EXACT_TEXT, "replace": TEXT}]} or {"diff": UNIFIED_DIFF}'
)


def answer_format(data: object) -> str | None:
    """The edit format of decoded answer ``data`` by its one key; ``None`` if it has none."""
    if isinstance(data, dict) and len(data) == 1:
        return FORMAT_KEYS.get(next(iter(data)))
    return None


def plan_from_edit_data(
    data: object, files: Mapping[str, str], *, limits: SeedLimits | None = None
) -> PatchPlan:
    """The whole-file plan an answer in any of :data:`EDIT_FORMATS` makes of ``files``.

    :param data: the decoded JSON answer.
    :param files: the text of each file the planner was shown, by path.
    :param limits: the seed's limits, for how rejections name a path.
    :raises PlanRejected: the answer has none of the shapes, or does not apply.
    """
    limits = limits or SeedLimits()
    kind = answer_format(data)
    if kind == "search-replace":
        assert isinstance(data, dict)
        return _plan_from_edits(data["edits"], files, limits)
    if kind == "udiff":
        assert isinstance(data, dict)
        diff = data["diff"]
        if not isinstance(diff, str):
            raise PlanRejected([reject("edit-shape", '"diff" must be a string: a unified diff')])
        return plan_from_diff(diff, files, limits=limits)
    if isinstance(data, dict) and data.keys() & {"edits", "diff"}:
        keys = ", ".join(map(repr, sorted(data)))
        message = f"an answer has exactly one of the keys files, edits or diff, not {keys}"
        raise PlanRejected([reject("edit-shape", f"{message}; expected {_SHAPES}")])
    return plan_from_data(data)  # a whole-file plan, or the contract's words on its shape


def parse_answer(
    text: str | bytes, files: Mapping[str, str], *, limits: SeedLimits | None = None
) -> PatchPlan:
    """:func:`plan_from_edit_data` of JSON text, read as strictly as
    :func:`~.contract.parse_plan` (a repeated key is refused).

    :raises PlanRejected: with rule ``plan-json``, or as :func:`plan_from_edit_data`.
    """
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError) as error:
        raise PlanRejected([reject("plan-json", f"the plan is not valid JSON: {error}")]) from None
    return plan_from_edit_data(data, files, limits=limits)


def plan_from_plan_file(
    data: bytes, files: Mapping[str, str], *, limits: SeedLimits | None = None
) -> PatchPlan:
    """The plan of a plan file (``agent run --plan``): JSON in any of :data:`EDIT_FORMATS`,
    or a unified diff as ``git diff`` writes it.

    :raises PlanRejected: as :func:`parse_answer`, or the diff does not apply.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = None
    if text is not None and not text.lstrip().startswith("{") and looks_like_diff(text):
        return plan_from_diff(text, files, limits=limits or SeedLimits())
    return parse_answer(data, files, limits=limits)


def neither_json_nor_diff(data: bytes) -> str | None:
    """Why a plan file is no plan of any format (neither JSON nor a unified diff), or
    ``None`` when it is one of them, whatever its content: the user named the wrong file,
    which is no plan a policy could judge."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    if looks_like_diff(text):
        return None
    try:
        json.loads(text)
    except RecursionError:
        return None  # JSON nested too deeply: the contract says so
    except ValueError as error:
        return "it is empty" if not text.strip() else f"read as JSON: {error}"
    return None


def _plan_from_edits(edits: object, files: Mapping[str, str], limits: SeedLimits) -> PatchPlan:
    if not isinstance(edits, list) or not 1 <= len(edits) <= MAX_EDITS:
        rule, count = (
            ("edit-count", f"{len(edits)}")
            if isinstance(edits, list)
            else (
                "edit-shape",
                "not a list",
            )
        )
        raise PlanRejected(
            [reject(rule, f'"edits" is a list of 1 to {MAX_EDITS} edits; this one is {count}')]
        )
    current: dict[str, str] = {}  # the files edited so far, in order of first appearance
    rejections: list[Rejection] = []
    for number, edit in enumerate(edits, start=1):
        problem = _apply_edit(number, edit, files, current, limits)
        if problem is not None:
            rejections.append(problem)
            if len(rejections) >= MAX_REJECTIONS:
                break
    if rejections:
        raise PlanRejected(rejections)
    return PatchPlan(PatchFile(path, text) for path, text in current.items())


def _apply_edit(
    number: int,
    edit: object,
    files: Mapping[str, str],
    current: dict[str, str],
    limits: SeedLimits,
) -> Rejection | None:
    """Apply edit ``number`` to ``current``; what is wrong with it, if anything."""
    name = f"edit {number}"
    if not _is_edit(edit):
        return reject(
            "edit-shape",
            f'{name} must be an object with exactly the string keys "path", "search" and "replace"',
        )
    assert isinstance(edit, dict)
    path, search, replacement = edit["path"], edit["search"], edit["replace"]
    label = _label(path, limits)
    text = current[path] if path in current else files.get(path)
    if not search:
        if text:
            return reject(
                "edit-shape",
                f"{name} has an empty search, which only creates a file that is not among the "
                "files you were shown (or fills an empty one); this file has text: give the "
                "exact text to replace",
                label,
            )
        current[path] = replacement
        return None
    if text is None:
        return reject(
            "edit-no-file",
            f"{name} names a file that is not among the files you were shown; edit only "
            "those (an edit with an empty search creates a new file)",
            label,
        )
    found, total = occurrences(text, search)
    crlf = "\r\n" in text
    if not found and crlf and "\r" not in search:  # a CRLF file, edited with LF
        search = search.replace("\n", "\r\n")
        found, total = occurrences(text, search)
    if crlf and "\r" not in replacement:
        replacement = replacement.replace("\n", "\r\n")
    if total == 1 and len(found) == 1:
        at = found[0]
        current[path] = text[:at] + replacement + text[at + len(search) :]
        return None
    if found:
        lines = [line_of(text, at) for at in found]
        return reject(
            "edit-ambiguous",
            f"{name}'s search text occurs {max(total, len(found))} times, at lines "
            f"{line_list(lines, max(total, len(found)))}; add surrounding lines to the search "
            "so that it occurs exactly once",
            label,
        )
    return reject("edit-no-match", _no_match(name, text, search, path in current), label)


def _is_edit(edit: object) -> bool:
    return (
        isinstance(edit, dict)
        and edit.keys() == {"path", "search", "replace"}
        and all(isinstance(value, str) for value in edit.values())
    )


def _no_match(name: str, text: str, search: str, edited: bool) -> str:
    first = next((line for line in search.split("\n") if line.strip()), search)
    message = (
        f"{name}'s search text (first line {quote(first)}) does not occur in the file"
        + (" as the edits before it left it" if edited else "")
        + "; copy it exactly from the file's text, whitespace and line endings included"
    )
    near = loose_line(text.split("\n"), search.split("\n"))
    if near is not None:
        message += (
            f". It would match at line {near} if leading and trailing whitespace (or line "
            "endings) were ignored: copy those lines exactly as they are there"
        )
    return message

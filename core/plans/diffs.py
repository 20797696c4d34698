"""Diffs of a plan against the seed's files: the one a run reports (which paths it really
changes, and how much) and the one ``agent diff`` prints, which ``git apply`` accepts."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from ..model import PatchPlan


def unified_diff(before: dict[str, bytes], plan: PatchPlan) -> tuple[tuple[str, ...], str]:
    """The paths the plan really changes, and a unified diff of those changes."""
    changed: list[str] = []
    chunks: list[str] = []
    for entry in plan.files:
        old_text = before.get(entry.path, b"").decode("utf-8", errors="replace")
        if old_text == entry.content:
            continue
        changed.append(entry.path)
        chunks.extend(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                entry.content.splitlines(keepends=True),
                fromfile=f"a/{entry.path}",
                tofile=f"b/{entry.path}",
            )
        )
    # A line without its newline (a file's last) is marked so, as git marks it: a diff that
    # left the mark out would be applied by `git apply` to another file, or refused.
    diff = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in chunks
    )
    return tuple(changed), diff


def changed_lines(diff: str) -> int:
    """How many lines a unified diff adds or removes."""
    return sum(
        1
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    )


def git_diff(originals: Mapping[str, str], plan: PatchPlan) -> str:
    """``plan`` as a patch ``git apply`` accepts: ``diff --git`` headers, and a
    ``\\ No newline at end of file`` mark wherever a file does not end in one."""
    chunks: list[str] = []
    for entry in plan.files:
        old = originals.get(entry.path, "")
        if old == entry.content:
            continue
        chunks.append(f"diff --git a/{entry.path} b/{entry.path}\n")
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            entry.content.splitlines(keepends=True),
            fromfile=f"a/{entry.path}",
            tofile=f"b/{entry.path}",
        )
        for line in lines:
            chunks.append(
                line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            )
    return "".join(chunks)

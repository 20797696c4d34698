"""A plan put to every policy: all their reasons, and a rejection for a policy that fails.

A policy that raises, or answers with something other than rejections, must not
let the plan through: its answer becomes a ``policy-failed`` rejection that says
what it gave, or where in its own file it raised.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import Rejection
from ..model import PatchPlan, SeedProject
from ..protocols import PatchPolicy


def check_plan(
    plan: PatchPlan, seed: SeedProject, policies: Sequence[PatchPolicy]
) -> list[Rejection]:
    """Ask every policy about ``plan``; all their reasons, in policy order."""
    rejections: list[Rejection] = []
    for policy in policies:
        # A policy that cannot decide, or answers with something other than
        # rejections, must not let the plan through.
        try:
            found, problem = _rejections_in(policy.check(plan, seed))
        except Exception as error:
            found, problem = [], f"{type(error).__name__}: {error}{_raised_at(error, policy)}"
        if problem is not None:
            found = [
                Rejection(
                    policy=policy.name,
                    rule="policy-failed",
                    message=f"the policy failed: {problem}",
                )
            ]
        rejections.extend(found)
    return rejections


def _rejections_in(answer: object) -> tuple[list[Rejection], str | None]:
    """The rejections a policy's ``check`` gave, or why its answer is not rejections."""
    if answer is None:
        return [], "check() returned None; return an empty list (or yield nothing) to accept"
    if isinstance(answer, Rejection):
        return [], "check() returned one Rejection; return a list of them (or yield each)"
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        return [], (
            f"check() returned {type(answer).__name__} {_short(answer)}, "
            "not a list (or generator) of Rejection objects"
        )
    found = list(answer)
    for item in found:
        if not isinstance(item, Rejection):
            return [], f"check() gave {type(item).__name__} {_short(item)}, not a Rejection"
    return found, None


def _raised_at(error: Exception, policy: object) -> str:
    """`` (at FILE line N)``: where in the policy's own module ``error`` came from.

    The rejection is all its author gets (no traceback reaches the terminal), so
    it names the line, in the policy's file rather than in a library it called.
    """
    frames = traceback.extract_tb(error.__traceback__)
    try:
        own = inspect.getsourcefile(type(policy))
    except TypeError:  # a class defined without a file (built in C, or in a REPL)
        own = None
    mine = [frame for frame in frames if own and frame.filename == own] or frames[-1:]
    if not mine:
        return ""
    return f" (at {Path(mine[-1].filename).name} line {mine[-1].lineno})"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

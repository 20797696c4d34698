"""The ``small-diff`` policy: a fix a reviewer can read, not a rewrite.

A model asked to fix one function sometimes rewrites the whole file. The test
may still pass, but nobody can review the change. This policy counts the lines
each replaced file adds or removes and rejects the plan above a limit that
the seed (or its default) sets.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.model import PatchPlan, SeedProject


@attrs.frozen
class SmallDiff:
    """Rejects a replaced file that changes more than ``max_changed_lines`` lines.

    Parameter (``[policies.small-diff]`` in a seed.toml):
    ``max_changed_lines``, a whole number of at least 1 (default 20).
    """

    name: str = "small-diff"
    description: str = "rejects a file whose change adds or removes more than N lines (default 20)"
    # Off unless a seed switches it on or the user passes --policy small-diff.
    activation: str = "off"
    max_changed_lines: int = 20

    def configure(self, parameters: Mapping[str, Any]) -> SmallDiff:
        unknown = sorted(set(parameters) - {"max_changed_lines"})
        if unknown:
            raise ValueError(f"unknown parameter {unknown[0]!r} (known: max_changed_lines)")
        value = parameters.get("max_changed_lines", self.max_changed_lines)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"max_changed_lines must be a whole number >= 1, not {value!r}")
        return attrs.evolve(self, max_changed_lines=value)

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterator[Rejection]:
        originals = seed.read_files()
        for entry in plan.files:
            before = originals.get(entry.path, b"").decode("utf-8", errors="replace")
            changed = sum(
                1
                for line in difflib.unified_diff(
                    before.splitlines(), entry.content.splitlines(), n=0, lineterm=""
                )
                if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
            )
            if changed > self.max_changed_lines:
                yield Rejection(
                    policy=self.name,
                    rule="too-many-lines",
                    message=(
                        f"the change adds or removes {changed} lines; seed {seed.name!r} "
                        f"allows {self.max_changed_lines} per file, so that a person can review it"
                    ),
                    path=entry.path,
                )

"""What a planner is shown of a seed: a small seed whole, a repository in part, with a map.

A folder seed without ``context`` patterns is shown whole, every file but the
hidden tests, as it always was. A repository does not fit in a prompt, so for a
git seed, or any seed with ``context`` patterns, the planner is shown:

* the editable files, whole, always (a plan restates whole files); when they alone
  take more than the seed's ``context_budget_bytes``, they are still sent, and the
  map says so;
* then the files matching ``context``, pattern by pattern, each one that still fits
  in the budget (a file that does not fit is left out, and the next one tried);
* and a map of the repository in what is left (at least a quarter of the budget is
  kept for it when the map needs that much): every path but the hidden tests', and
  a Python file's top-level classes and functions after its path. A map that does
  not fit spends its room on the files nearest the editable ones first
  (``core/plans/repository_map.py``); its last line says what it left out.

Hidden tests are never shown: not as files, not in the map, not in what was left out.

Everything is counted in the bytes it takes in a chat request (:func:`sent_bytes`),
so that the prompt a planner builds of it, and the request that carries the prompt,
stay within the budget plus the instruction and the prompt's own fixed text.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping

import attrs

from ..model import SeedProject
from ..seeds import patterns, seed_files
from .repository_map import MAP_FRAME_BYTES as MAP_FRAME_BYTES
from .repository_map import MAP_NOTE_BYTES as MAP_NOTE_BYTES
from .repository_map import RepositoryMap, count_of
from .repository_map import sent_bytes as sent_bytes

#: The most left-out paths a request lists; the rest are counted.
MAX_LEFT_OUT_LISTED = 100
#: What a file costs besides its text and its path: the keys and punctuation around them.
FILE_FRAMING_BYTES = 128

Progress = Callable[[str], None]


def _silent(_: str) -> None:
    pass


def file_cost(path: str, text: str) -> int:
    """What showing one file costs: its text, its path three times (a prompt may name an
    editable path in a list, in its entry and in the answer's schema) and its framing."""
    return sent_bytes(text) + 3 * sent_bytes(path) + FILE_FRAMING_BYTES


@attrs.frozen
class PlannerContext:
    """What a planner is shown of a seed for one run.

    :ivar files: the text of each file shown, by path: for a whole seed every file but
        the hidden tests; otherwise the editable files, then the context files in the
        order of the ``context`` patterns.
    :ivar repository_map: the map of the repository; ``None`` when the seed is shown whole.
    :ivar left_out: the context files not shown for want of room, in pattern order.
    :ivar budget_bytes: the seed's ``context_budget_bytes``; ``None`` for a whole seed.
    :ivar editable_bytes: what the editable files cost (:func:`file_cost`).
    :ivar used_bytes: what the files and the map cost together: at most the budget, or,
        when the editable files alone exceed it, their cost plus :data:`MAP_NOTE_BYTES`.
    """

    files: Mapping[str, str]
    repository_map: str | None = None
    left_out: tuple[str, ...] = ()
    budget_bytes: int | None = None
    editable_bytes: int = 0
    used_bytes: int = 0

    @property
    def over_budget(self) -> bool:
        """Whether the editable files alone take more than the budget."""
        return self.budget_bytes is not None and self.editable_bytes > self.budget_bytes

    def describe(self) -> str:
        """One line for the run's progress."""
        if self.repository_map is None:
            return f"planner context: the whole seed, {len(self.files)} files"
        said = (
            f"planner context: {len(self.files)} files and a repository map, "
            f"{self.used_bytes:,} of {self.budget_bytes:,} bytes"
        )
        if self.over_budget:
            said += "; the editable files alone exceed the context budget"
        if self.left_out:
            said += f"; {count_of(len(self.left_out), 'context file')} left out"
        return said


def planner_context(
    seed: SeedProject,
    files: Mapping[str, bytes],
    *,
    environ: Mapping[str, str] = os.environ,
    progress: Progress = _silent,
) -> PlannerContext:
    """Choose what a planner is shown of ``seed`` (see the module's description).

    :param files: the seed's files already read (:meth:`SeedProject.read_files`); any
        other file shown is read here, one at a time.
    :param environ: where the git cache is (``XDG_CACHE_HOME``).
    :param progress: told when a repository is mapped for the first time.
    """
    hidden = set(seed.hidden_files)
    if seed.source is None and not seed.context_paths:
        return PlannerContext(
            files={path: _text(data) for path, data in files.items() if path not in hidden}
        )
    budget = seed.context_budget_bytes
    shown: dict[str, str] = {}
    for path in seed.editable_files:
        data = files.get(path)
        if data is None:
            data = seed.read_tree_files([path])[path]
        shown[path] = _text(data)
    editable = sum(file_cost(path, text) for path, text in shown.items())
    summary = RepositoryMap(seed, files, hidden, environ, progress)
    reserve = min(summary.full_cost, max(MAP_FRAME_BYTES, budget // 4))
    room = budget - editable - reserve
    left_out: list[str] = []
    for path in _context_candidates(seed, hidden, shown):
        if 3 * sent_bytes(path) + FILE_FRAMING_BYTES > room:
            left_out.append(path)  # not even an empty file would fit: not read
            continue
        data = _read_one(seed, files, path)
        text = None if data is None else _text(data)
        if text is None or file_cost(path, text) > room:
            left_out.append(path)
            continue
        shown[path] = text
        room -= file_cost(path, text)
    used = sum(file_cost(path, text) for path, text in shown.items())
    if editable > budget:
        why = f"the editable files alone take {editable:,} bytes of the {budget:,}-byte budget"
    else:
        why = f"the files shown fill the {budget:,}-byte budget"
    text = summary.render(budget - used, why, shown=set(shown))
    return PlannerContext(
        files=shown,
        repository_map=text,
        left_out=tuple(left_out),
        budget_bytes=budget,
        editable_bytes=editable,
        used_bytes=used + sent_bytes(text),
    )


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _context_candidates(
    seed: SeedProject, hidden: set[str], shown: Mapping[str, str]
) -> Iterator[str]:
    """The files ``context`` names, pattern by pattern, each once; never a hidden test."""
    seen = set(hidden) | set(shown)
    for pattern in seed.context_paths:
        for path in seed.files:
            if path not in seen and patterns.matches(path, pattern):
                seen.add(path)
                yield path


def _read_one(seed: SeedProject, files: Mapping[str, bytes], path: str) -> bytes | None:
    """One file of the seed, or ``None`` when it cannot be shown (larger than a seed's
    files may be in all, say)."""
    if path in files:
        return files[path]
    try:
        return seed.read_tree_files([path]).get(path)
    except seed_files.SeedFileError:
        return None

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
  not fit is cut, the same way every time: the names first, file by file, then the
  most deeply nested paths; the map's last line says what it left out.

Hidden tests are never shown: not as files, not in the map, not in what was left out.

Everything is counted in the bytes it takes in a chat request (:func:`sent_bytes`),
so that the prompt a planner builds of it, and the request that carries the prompt,
stay within the budget plus the instruction and the prompt's own fixed text.

A git seed's map is made file by file from the checked-out tree (one file is held at a
time, never the tree) the first time a commit is used, and kept in the git cache,
``maps/<commit>.txt``, since the tree at a commit never changes.
"""

from __future__ import annotations

import ast
import heapq
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from . import git_source, patterns, seed_files
from .model import SeedProject

#: Python files larger than this are shown in the map by their path alone, never parsed.
MAX_PARSED_BYTES = 256 * 1024
#: The most top-level names the map gives for one file; the rest are counted.
MAX_NAMES_PER_FILE = 64
#: The most left-out paths a request lists; the rest are counted.
MAX_LEFT_OUT_LISTED = 100
#: What a file costs besides its text and its path: the keys and punctuation around them.
FILE_FRAMING_BYTES = 128
#: The most a map that says only what it left out costs.
MAP_NOTE_BYTES = 256
#: The room a map needs for its first line and its note, besides paths and names.
MAP_FRAME_BYTES = 512
#: Version of the cached maps' layout: a map of another version is made again.
MAP_FORMAT = 1
_PYTHON_SUFFIXES = (".py", ".pyi")

Progress = Callable[[str], None]


def _silent(_: str) -> None:
    pass


def sent_bytes(text: str) -> int:
    """The bytes ``text`` takes in a chat request: a prompt holds it as a JSON string, and
    the request holds the prompt as one, so JSON's escapes apply twice (a newline is 3 bytes).

    Written once, as a remote planner's request is, it takes no more.
    """
    once = json.dumps(text, ensure_ascii=False)[1:-1]
    twice = json.dumps(once, ensure_ascii=False)[1:-1]
    return len(twice.encode("utf-8", "surrogatepass"))


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
            said += f"; {_count(len(self.left_out), 'context file')} left out"
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
    summary = _MapSource(seed, files, hidden, environ, progress)
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


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


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


def top_level_names(data: bytes) -> str:
    """A Python file's top-level classes and functions (``class A, def b``); empty when it
    has none, does not parse, or is larger than :data:`MAX_PARSED_BYTES`."""
    if len(data) > MAX_PARSED_BYTES:
        return ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to say
            tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(f"class {node.name}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(f"def {node.name}")
    if len(names) > MAX_NAMES_PER_FILE:
        names[MAX_NAMES_PER_FILE:] = [f"{len(names) - MAX_NAMES_PER_FILE} more"]
    return ", ".join(names)


def _is_python(path: str) -> bool:
    return path.endswith(_PYTHON_SUFFIXES)


# --- the map of a git commit, kept in the cache --------------------------------------------------


def map_path(source: git_source.SourceTree, environ: Mapping[str, str] = os.environ) -> Path:
    """Where the map of the tree at ``source.commit`` is kept."""
    return git_source.cache_root(environ) / "maps" / f"{source.commit}.txt"


def _map_header(commit: str) -> str:
    return f"# repository map, format {MAP_FORMAT}, commit {commit}\n"


def tree_map(
    source: git_source.SourceTree,
    environ: Mapping[str, str] = os.environ,
    progress: Progress = _silent,
) -> Path:
    """The cached map of the tree at ``source.commit``, made first if needed: one line per
    file (not links), ``PATH<TAB>NAMES``, sorted by path; written whole, then renamed
    into place, so a map in place is complete."""
    final = map_path(source, environ)
    header = _map_header(source.commit)
    try:
        with final.open(encoding="utf-8") as kept:
            if kept.readline() == header:
                return final
    except (OSError, UnicodeDecodeError):
        pass
    progress(f"mapping the repository at commit {source.commit[:12]} (once per commit)")
    root = git_source.materialize(source, environ)
    entries = sorted(
        (entry for entry in git_source.list_tree(source, environ) if not entry.link),
        key=lambda entry: entry.path,
    )
    final.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=final.parent, prefix=".map-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(header)
            for entry in entries:
                names = ""
                if _is_python(entry.path) and entry.size <= MAX_PARSED_BYTES:
                    try:
                        read = seed_files.read_seed_files(root, [entry.path], untrusted=False)
                    except seed_files.SeedFileError:
                        read = {}
                    names = top_level_names(read.get(entry.path, b""))
                out.write(f"{entry.path}\t{names}\n")
        os.replace(partial, final)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return final


def _kept_entries(path: Path) -> Iterator[tuple[str, str]]:
    with path.open(encoding="utf-8") as kept:
        kept.readline()
        for line in kept:
            name, _, names = line.rstrip("\n").partition("\t")
            if name:
                yield name, names


# --- the map a planner is shown ------------------------------------------------------------------


@attrs.define
class _MapSource:
    """The entries (path, top-level names) of a seed's map, read as often as needed,
    and what they would cost shown whole."""

    seed: SeedProject
    files: Mapping[str, bytes]
    hidden: set[str]
    environ: Mapping[str, str]
    progress: Progress
    count: int = 0
    python_named: int = 0
    paths_cost: int = 0
    names_cost: int = 0
    by_depth: dict[int, int] = attrs.Factory(dict)
    _kept: Path | None = None

    def __attrs_post_init__(self) -> None:
        if self.seed.source is not None:
            self._kept = tree_map(self.seed.source, self.environ, self.progress)
        for path, names in self.entries():
            self.count += 1
            cost = _line_cost(path)
            self.paths_cost += cost
            self.by_depth[path.count("/")] = self.by_depth.get(path.count("/"), 0) + cost
            if names:
                self.python_named += 1
                self.names_cost += _names_cost(names)

    @property
    def header(self) -> str:
        return (
            f"{_count(self.count, 'file')}; a Python file's top-level classes and "
            "functions follow its path.\n"
        )

    @property
    def full_cost(self) -> int:
        return sent_bytes(self.header) + self.paths_cost + self.names_cost

    def entries(self) -> Iterator[tuple[str, str]]:
        """Every file's path and names, sorted by path; never a hidden test's."""
        if self.seed.source is None:
            every = sorted(set(self.seed.files) | set(self.files))
            yield from ((path, self._own_names(path)) for path in every if path not in self.hidden)
            return
        own = sorted(p for p in self.seed.added_files if p not in self.hidden)
        replaced = set(self.seed.added_files)
        assert self._kept is not None
        tree = (
            (path, names)
            for path, names in _kept_entries(self._kept)
            if path not in self.hidden and path not in replaced
        )
        yield from heapq.merge(tree, ((p, self._own_names(p)) for p in own))

    def _own_names(self, path: str) -> str:
        data = self.files.get(path)
        return top_level_names(data) if data is not None and _is_python(path) else ""

    def render(self, room: int, why: str, shown: set[str]) -> str:
        """The map within ``room`` bytes; cut, and saying what it left out, when it must be.

        A cut map gives no names for the files shown whole (``shown``), which hold them.
        """
        if self.full_cost <= room:
            return self.header + "".join(_line(path, names) for path, names in self.entries())
        if room < MAP_FRAME_BYTES:
            return f"Left out for room: the whole map ({_count(self.count, 'file')}); {why}.\n"
        room -= sent_bytes(self.header) + MAP_NOTE_BYTES
        if self.paths_cost <= room:
            return self.header + self._with_some_names(room - self.paths_cost, shown)
        return self.header + self._some_paths(room)

    def _with_some_names(self, room: int, shown: set[str]) -> str:
        """Every path, and each file's names, in path order, while they fit."""
        lines: list[str] = []
        dropped = 0
        for path, names in self.entries():
            if path in shown:
                names = ""
            elif names and _names_cost(names) <= room:
                room -= _names_cost(names)
            elif names:
                names, dropped = "", dropped + 1
            lines.append(_line(path, names))
        lines.append(
            f"Left out for room: the top-level classes and functions of {dropped:,} "
            f"of the {self.python_named:,} Python files that have them.\n"
        )
        return "".join(lines)

    def _some_paths(self, room: int) -> str:
        """The shallowest paths that fit (at the deepest level shown, the first ones in
        path order), without names."""
        depth, rest = 0, room
        for level in sorted(self.by_depth):
            if self.by_depth[level] > rest:
                depth = level
                break
            rest -= self.by_depth[level]
        lines: list[str] = []
        full = True
        for path, _ in self.entries():
            level = path.count("/")
            if level < depth:
                lines.append(_line(path, ""))
            elif level == depth and full and _line_cost(path) <= rest:
                rest -= _line_cost(path)
                lines.append(_line(path, ""))
            elif level == depth:
                full = False
        lines.append(
            f"Left out for room: {self.count - len(lines):,} of {self.count:,} paths "
            "(the most deeply nested) and every top-level name.\n"
        )
        return "".join(lines)


def _line(path: str, names: str) -> str:
    return f"{path}: {names}\n" if names else f"{path}\n"


def _line_cost(path: str) -> int:
    return sent_bytes(path + "\n")


def _names_cost(names: str) -> int:
    return sent_bytes(f": {names}")

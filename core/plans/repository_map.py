"""The map of a repository a planner is shown beside the files: every path, and a Python
file's top-level classes and functions after it, nearest the editable files first.

A map that fits is shown whole, in path order. One that does not fit spends its room
on what is near the editable files first, the same way every time:

* the files nearest the editable ones (``near_files``): the modules an editable
  file imports, then the modules that import an editable one, then the other files of
  an editable file's folder (its package), each with its names while they fit;
* then every other path and, while they fit, the other files' names, in path order;
* when not every path fits, the shallowest of the others, without names.

The map's last line says what it left out. Hidden tests are never in it.

A git seed's map is made file by file from the checked-out tree (one file is held at a
time, never the tree) the first time a commit is used, and kept in the git cache,
``maps/<commit>.txt``, since the tree at a commit never changes: one line per file,
``PATH<TAB>NAMES<TAB>IMPORTS``.
"""

from __future__ import annotations

import ast
import heapq
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import attrs

from ..model import SeedProject
from ..seeds import git_source, seed_files

#: Python files larger than this are shown in the map by their path alone, never parsed.
MAX_PARSED_BYTES = 256 * 1024
#: The most top-level names the map gives for one file; the rest are counted.
MAX_NAMES_PER_FILE = 64
#: The most CPU time a map's parsing may take: a file parses in time that can grow with the
#: square of its size (nested f-strings), and a repository is anyone's. The files past it
#: are in the map by their paths alone.
MAP_PARSE_SECONDS = 60.0
#: The most modules a file's imports are kept for, to find what is near the editable files.
MAX_IMPORTS_PER_FILE = 128
#: The most a map that says only what it left out costs.
MAP_NOTE_BYTES = 256
#: The room a map needs for its first line and its note, besides paths and names.
MAP_FRAME_BYTES = 512
#: Version of the cached maps' layout: a map of another version is made again.
MAP_FORMAT = 2
#: Folders a project's packages may sit in, whose name is no part of a module's.
SOURCE_FOLDERS = ("src", "lib")
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


def count_of(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


# --- what a Python file says of itself -----------------------------------------------------------


@attrs.frozen
class PythonFile:
    """A Python file's top-level names (``class A, def b``) and the modules it imports
    (absolute dotted names, relative imports resolved against its own path)."""

    names: str = ""
    imports: tuple[str, ...] = ()


def read_python(data: bytes, path: str) -> PythonFile:
    """What ``data``, the file at ``path``, defines and imports; nothing when it does not
    parse or is larger than :data:`MAX_PARSED_BYTES`."""
    if len(data) > MAX_PARSED_BYTES:
        return PythonFile()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not ours to say
            tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return PythonFile()
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names.append(f"class {node.name}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(f"def {node.name}")
    if len(names) > MAX_NAMES_PER_FILE:
        names[MAX_NAMES_PER_FILE:] = [f"{len(names) - MAX_NAMES_PER_FILE} more"]
    return PythonFile(", ".join(names), _imports(tree, path))


def top_level_names(data: bytes) -> str:
    """A Python file's top-level classes and functions (``class A, def b``); empty when it
    has none, does not parse, or is larger than :data:`MAX_PARSED_BYTES`."""
    return read_python(data, "").names


def _imports(tree: ast.Module, path: str) -> tuple[str, ...]:
    own = module_names(path)
    package = own[-1].split(".") if own else []
    if own and not path.endswith("__init__.py") and package:
        package = package[:-1]
    found: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(dict.fromkeys(alias.name for alias in node.names))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)]
                stem = ".".join([*base, *([node.module] if node.module else [])])
            else:
                stem = node.module or ""
            if stem:
                found[stem] = None
            for alias in node.names:
                if alias.name != "*":
                    found[f"{stem}.{alias.name}" if stem else alias.name] = None
        if len(found) >= MAX_IMPORTS_PER_FILE:
            break
    return tuple(name for name in found if name)[:MAX_IMPORTS_PER_FILE]


def module_names(path: str) -> list[str]:
    """The dotted names a Python file may be imported by: from the repository's top, and
    without a first folder of :data:`SOURCE_FOLDERS` (``src/pkg/a.py`` is ``pkg.a``)."""
    if not path.endswith(".py"):
        return []
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(part.isidentifier() for part in parts):
        return []
    names = [".".join(parts)]
    if len(parts) > 1 and parts[0] in SOURCE_FOLDERS:
        names.append(".".join(parts[1:]))
    return names


def near_files(
    editable: Iterable[str], entries: Iterable[tuple[str, tuple[str, ...]]]
) -> list[str]:
    """The files nearest the ``editable`` ones, nearest first: the modules they import, the
    files that import one of them, then the other files of their folders; never an editable
    file itself. ``entries``: every file's path and imports."""
    editable = list(editable)
    mine = set(editable)
    wanted = {name for path in editable for name in module_names(path)}
    folders = {path.rpartition("/")[0] for path in editable}
    by_module: dict[str, str] = {}
    importers: list[str] = []
    siblings: list[str] = []
    imports_of: dict[str, tuple[str, ...]] = {}
    for path, imports in entries:
        for name in module_names(path):
            by_module.setdefault(name, path)
        if path in mine:
            imports_of[path] = imports
            continue
        if any(name in wanted for name in imports):
            importers.append(path)
        if path.rpartition("/")[0] in folders:
            siblings.append(path)
    imported = [
        by_module[name]
        for path in editable
        for name in imports_of.get(path, ())
        if name in by_module and by_module[name] not in mine
    ]
    return list(dict.fromkeys([*imported, *importers, *siblings]))


def is_python(path: str) -> bool:
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
    file (not links), ``PATH<TAB>NAMES<TAB>IMPORTS``, sorted by path; written whole, then
    renamed into place, so a map in place is complete."""
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
    parse_until = time.process_time() + MAP_PARSE_SECONDS
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(header)
            for entry in entries:
                found = PythonFile()
                parse = time.process_time() < parse_until
                if parse and is_python(entry.path) and entry.size <= MAX_PARSED_BYTES:
                    try:
                        read = seed_files.read_seed_files(root, [entry.path], untrusted=False)
                    except seed_files.SeedFileError:
                        read = {}
                    found = read_python(read.get(entry.path, b""), entry.path)
                out.write(f"{entry.path}\t{found.names}\t{','.join(found.imports)}\n")
        os.replace(partial, final)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return final


def _kept_entries(path: Path) -> Iterator[tuple[str, PythonFile]]:
    with path.open(encoding="utf-8") as kept:
        kept.readline()
        for line in kept:
            name, _, rest = line.rstrip("\n").partition("\t")
            names, _, imports = rest.partition("\t")
            if name:
                yield name, PythonFile(names, tuple(filter(None, imports.split(","))))


# --- the map a planner is shown ------------------------------------------------------------------


@attrs.define
class RepositoryMap:
    """The entries (path, what the file says of itself) of a seed's map, read as often as
    needed, what they would cost shown whole, and which are nearest the editable files."""

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
    near: list[str] = attrs.Factory(list)
    _kept: Path | None = None

    def __attrs_post_init__(self) -> None:
        if self.seed.source is not None:
            self._kept = tree_map(self.seed.source, self.environ, self.progress)
        imports: list[tuple[str, tuple[str, ...]]] = []
        for path, found in self.entries():
            self.count += 1
            cost = _line_cost(path)
            self.paths_cost += cost
            self.by_depth[path.count("/")] = self.by_depth.get(path.count("/"), 0) + cost
            if found.names:
                self.python_named += 1
                self.names_cost += _names_cost(found.names)
            imports.append((path, found.imports))
        self.near = near_files(self.seed.editable_files, imports)

    @property
    def header(self) -> str:
        return (
            f"{count_of(self.count, 'file')}; a Python file's top-level classes and "
            "functions follow its path.\n"
        )

    @property
    def full_cost(self) -> int:
        return sent_bytes(self.header) + self.paths_cost + self.names_cost

    def entries(self) -> Iterator[tuple[str, PythonFile]]:
        """Every file's path and what it says of itself, sorted by path; never a hidden
        test's."""
        if self.seed.source is None:
            every = sorted(set(self.seed.files) | set(self.files))
            yield from ((path, self._own(path)) for path in every if path not in self.hidden)
            return
        own = sorted(p for p in self.seed.added_files if p not in self.hidden)
        replaced = set(self.seed.added_files)
        assert self._kept is not None
        tree = (
            (path, found)
            for path, found in _kept_entries(self._kept)
            if path not in self.hidden and path not in replaced
        )
        yield from heapq.merge(tree, ((p, self._own(p)) for p in own), key=lambda e: e[0])

    def _own(self, path: str) -> PythonFile:
        data = self.files.get(path)
        return read_python(data, path) if data is not None and is_python(path) else PythonFile()

    def render(self, room: int, why: str, shown: set[str]) -> str:
        """The map within ``room`` bytes; cut, and saying what it left out, when it must be.

        A cut map gives no names for the files shown whole (``shown``), which hold them.
        """
        if self.full_cost <= room:
            return self.header + "".join(_line(path, found.names) for path, found in self.entries())
        if room < MAP_FRAME_BYTES:
            return f"Left out for room: the whole map ({count_of(self.count, 'file')}); {why}.\n"
        room -= sent_bytes(self.header) + MAP_NOTE_BYTES
        if self.paths_cost <= room:
            return self.header + self._with_some_names(room - self.paths_cost, shown)
        return self.header + self._some_paths(room, shown)

    def _names_of(self, paths: Iterable[str], room: int, shown: set[str]) -> tuple[set[str], int]:
        """The files among ``paths`` (in their order) whose names fit in ``room``, and the
        room left."""
        wanted = [p for p in paths if p not in shown]
        chosen = set(wanted)
        costs = {path: found.names for path, found in self.entries() if path in chosen}
        named: set[str] = set()
        for path in wanted:
            names = costs.get(path, "")
            if names and _names_cost(names) <= room:
                room -= _names_cost(names)
                named.add(path)
        return named, room

    def _with_some_names(self, room: int, shown: set[str]) -> str:
        """Every path, and names while they fit: the nearest files' first, then the others'
        in path order."""
        named, room = self._names_of(self.near, room, shown)
        lines: list[str] = []
        dropped = 0
        for path, found in self.entries():
            names = found.names
            if path in shown or path in named:
                names = "" if path in shown else names
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

    def _some_paths(self, room: int, shown: set[str]) -> str:
        """In half the room, the nearest files' paths and then their names while they fit;
        in the rest, the shallowest other paths (at the deepest level shown, the first in
        path order)."""
        near_room = room // 2
        near: list[str] = []
        for path in self.near:
            if _line_cost(path) > near_room:
                break
            near_room -= _line_cost(path)
            near.append(path)
        named, near_room = self._names_of(near, near_room, shown)
        rest = room // 2 + near_room
        kept = set(near)
        by_depth = dict(self.by_depth)
        for path in kept:
            by_depth[path.count("/")] -= _line_cost(path)
        depth = max(by_depth, default=0) + 1
        for level in sorted(by_depth):
            if by_depth[level] > rest:
                depth = level
                break
            rest -= by_depth[level]
        lines: list[str] = []
        full = True
        for path, found in self.entries():
            level = path.count("/")
            if path in kept:
                lines.append(_line(path, found.names if path in named else ""))
            elif level < depth:
                lines.append(_line(path, ""))
            elif level == depth and full and _line_cost(path) <= rest:
                rest -= _line_cost(path)
                lines.append(_line(path, ""))
            elif level == depth:
                full = False
        lines.append(
            f"Left out for room: {self.count - len(lines):,} of {self.count:,} paths "
            "(the most deeply nested of those away from the editable files) and the "
            "top-level names of all but the files nearest the editable ones.\n"
        )
        return "".join(lines)


def _line(path: str, names: str) -> str:
    return f"{path}: {names}\n" if names else f"{path}\n"


def _line_cost(path: str) -> int:
    return sent_bytes(path + "\n")


def _names_cost(names: str) -> int:
    return sent_bytes(f": {names}")

"""The ``python-ast`` policy: refuse Python files that import or use what the seed forbids.

A passing test only proves what the test checks. A patch can make a test pass
without fixing anything: exit the interpreter with status 0 before the test
fails, replace ``unittest`` or an entry of ``sys.modules`` with a fake, or
reach out of the project through a socket or a child process. This policy
reads each replaced Python file with :mod:`ast` and rejects those uses, so a
reviewer sees the attempt instead of a green test.

It is a tripwire, not a sandbox: Python is dynamic enough that a determined
patch can hide a call from any static check. The sandbox is what contains the
code; this policy narrows the ways a patch can cheat the test, and it refuses
what it cannot read (a file that does not parse).

Off by default; a seed switches it on with a ``[policies.python-ast]`` table
in its ``seed.toml`` (parameters below), a user with ``--policy python-ast``.
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import attrs

from sandboxed_coding_agent.core import patterns
from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PatchPlan, SeedProject
from sandboxed_coding_agent.core.protocols import PatchPolicy, PolicyParameter

NAME = "python-ast"

#: Dotted names a patch may not import or use. An entry also covers everything
#: under it (``socket`` covers ``socket.create_connection``); ``*`` matches within
#: a name (``os.exec*`` covers ``os.execv``).
DEFAULT_FORBIDDEN = (
    # Reaching out of the project: network, processes, native code.
    "socket",
    "ssl",
    "subprocess",
    "multiprocessing",
    "pty",
    "ctypes",
    "asyncio.create_subprocess_*",
    "os.system",
    "os.popen",
    "os.exec*",
    "os.spawn*",
    "os.posix_spawn*",
    "os.fork*",
    "os.kill*",
    # Faking a passing test: leave before it fails, or replace what checks it.
    "os._exit",
    "sys.exit",
    "exit",
    "quit",
    "atexit",
    "signal",
    "sys.modules",
    "sys.settrace",
    "sys.setprofile",
    "unittest",
    "doctest",
    "pytest",
    "_pytest",
    "builtins",
    "__builtins__",
    # Hiding any of the above from this check and from a reader.
    "eval",
    "exec",
    "compile",
    "__import__",
    "importlib",
)

#: Attributes that open a way around name checks, whatever object they are read from.
FORBIDDEN_ATTRIBUTES = frozenset(
    {"__builtins__", "__globals__", "__subclasses__", "__code__", "__import__", "__loader__"}
)

_PARAMETERS = ("forbid", "also_forbid", "allow", "paths")
#: Far above any real list (the built-in one has 35 entries); a seed folder or a command
#: line with more is a mistake, or an attempt to make every check slow.
MAX_ITEMS = 1000
#: Far longer than any dotted name a module exports.
MAX_ENTRY_CHARS = 256
_BUILTIN_NAMES = frozenset({*dir(builtins), "__builtins__"})


@attrs.frozen
class PythonAstPolicy:
    """Rejects Python files of a plan that import or use a forbidden name.

    Parameters (``[policies.python-ast]`` in ``seed.toml``), each a list of strings:

    * ``forbid``: replaces :data:`DEFAULT_FORBIDDEN`.
    * ``also_forbid``: adds to it.
    * ``allow``: takes entries out of it (each must be in it).
    * ``paths``: which plan files to check (patterns; default ``["**/*.py"]``).

    Each list holds at most :data:`MAX_ITEMS` entries, each name at most
    :data:`MAX_ENTRY_CHARS` characters, so that a seed cannot make every check slow.
    """

    name: str = NAME
    description: str = (
        "rejects Python that imports or calls sockets, subprocesses, ctypes, os.system, "
        "exits early or touches unittest / sys.modules"
    )
    activation: str = "off"
    forbidden: tuple[str, ...] = DEFAULT_FORBIDDEN
    paths: tuple[str, ...] = ("**/*.py",)
    parameters: ClassVar[tuple[PolicyParameter, ...]] = (
        PolicyParameter(
            "forbid",
            "list[str]",
            "the dotted names to forbid, instead of the built-in list (socket, subprocess, ...)",
        ),
        PolicyParameter("also_forbid", "list[str]", "dotted names to forbid as well", []),
        PolicyParameter("allow", "list[str]", "entries to take out of the forbidden names", []),
        PolicyParameter("paths", "list[str]", "which files of a plan to check", ["**/*.py"]),
    )

    def configure(self, parameters: Mapping[str, Any]) -> PythonAstPolicy:
        unknown = sorted(set(parameters) - set(_PARAMETERS))
        if unknown:
            raise ValueError(f"unknown parameter {unknown[0]!r} (known: {', '.join(_PARAMETERS)})")
        given = {key: _strings(key, value) for key, value in parameters.items()}
        for key in ("forbid", "also_forbid", "allow"):
            for name in given.get(key, ()):
                if len(name) > MAX_ENTRY_CHARS:
                    raise ValueError(
                        f"{key}: an entry of {len(name):,} characters; at most {MAX_ENTRY_CHARS}"
                    )
        # A dict keeps the entries' order (the first that matches is the one reported)
        # and makes each step of this linear in the number of entries.
        forbidden = dict.fromkeys(given.get("forbid", self.forbidden))
        forbidden.update(dict.fromkeys(given.get("also_forbid", ())))
        for name in given.get("allow", ()):
            if name not in forbidden:
                raise ValueError(f"allow: {name!r} is not forbidden, so it cannot be allowed")
            del forbidden[name]
        for pattern in given.get("paths", ()):
            problem = patterns.pattern_problem(pattern)
            if problem:
                raise ValueError(f"paths: {pattern!r}: {problem}")
        return attrs.evolve(self, forbidden=tuple(forbidden), paths=given.get("paths", self.paths))

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterator[Rejection]:
        for entry in plan.files:
            if patterns.matches_any(entry.path, self.paths):
                yield from self._check_file(entry.path, entry.content)

    def _check_file(self, path: str, content: str) -> Iterator[Rejection]:
        try:
            tree = ast.parse(content, filename=path)
        except (SyntaxError, ValueError) as error:
            line = getattr(error, "lineno", None)
            where = f"line {line}: " if line else ""
            yield Rejection(
                NAME,
                "syntax",
                f"{where}not valid Python ({getattr(error, 'msg', error)}); it cannot be checked",
                path,
            )
            return
        reported: set[str] = set()
        for line, rule, what, entry in _uses(tree, _Forbidden.of(tuple(self.forbidden))):
            if entry in reported:
                continue
            reported.add(entry)
            yield Rejection(
                NAME,
                rule,
                f"line {line}: {what}, which is forbidden here (entry {entry!r})",
                path,
            )


def _strings(key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise TypeError(f"{key}: expected a list of non-empty strings")
    if len(value) > MAX_ITEMS:
        raise ValueError(f"{key}: {len(value):,} entries; at most {MAX_ITEMS:,}")
    return tuple(value)


@attrs.frozen(eq=False)
class _Forbidden:
    """The forbidden entries, indexed so that looking a name up does not try each in turn.

    A name is forbidden by the first entry (in the list's order) that is the name,
    a dotted prefix of it, or (holding ``*``) a pattern matching it.
    """

    order: dict[str, int]
    #: One alternative per pattern entry, in order: the first that matches is the first entry.
    patterns: re.Pattern[str] | None
    pattern_entries: tuple[str, ...]
    #: For each dotted prefix of an entry, the first entry under it (``from os import *``).
    first_under: dict[str, str]
    longest: int

    @staticmethod
    @functools.lru_cache(maxsize=16)
    def of(forbidden: tuple[str, ...]) -> _Forbidden:
        order: dict[str, int] = {}
        first_under: dict[str, str] = {}
        for index, entry in enumerate(forbidden):
            order.setdefault(entry, index)
            for position, char in enumerate(entry):
                if char == ".":
                    first_under.setdefault(entry[:position], entry)
        wildcards = tuple(entry for entry in order if "*" in entry)
        # The empty group closing each alternative names the entry that matched: a group
        # around each whole alternative would make every failed one cost ten times as much.
        alternatives = "|".join(
            f"(?:{fnmatch.translate(entry)})(?P<entry{index}>)"
            for index, entry in enumerate(wildcards)
        )
        return _Forbidden(
            order,
            re.compile(alternatives) if wildcards else None,
            wildcards,
            first_under,
            max(map(len, forbidden), default=0),
        )

    def entry(self, name: str) -> str | None:
        """The entry that forbids ``name``, or ``None``."""
        found = [name] if name in self.order else []
        # Each dotted prefix no longer than the longest entry.
        end = name.find(".", 0, self.longest + 1)
        while end >= 0:
            if name[:end] in self.order:
                found.append(name[:end])
            end = name.find(".", end + 1, self.longest + 1)
        matched = self.patterns.match(name) if self.patterns is not None else None
        if matched is not None and matched.lastgroup is not None:
            found.append(self.pattern_entries[int(matched.lastgroup.removeprefix("entry"))])
        return min(found, key=self.order.__getitem__, default=None)


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Every name an import binds, mapped to the dotted name it stands for."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    root = alias.name.split(".", 1)[0]
                    bound[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(node: ast.AST, aliases: Mapping[str, str]) -> str | None:
    """``a.b.c`` for a name or attribute chain rooted at an import or a builtin.

    A chain rooted at anything else (a local variable that happens to be
    called ``signal``) is ``None``: it cannot be the module of that name.
    """
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    if node.id in aliases:
        parts.append(aliases[node.id])
    elif node.id in _BUILTIN_NAMES:
        parts.append(node.id)
    else:
        return None
    return ".".join(reversed(parts))


def _uses(tree: ast.AST, forbidden: _Forbidden) -> Iterator[tuple[int, str, str, str]]:
    """(line, rule, what, forbidden entry) for each forbidden import or use, in source order."""
    aliases = _aliases(tree)
    found: list[tuple[int, str, str, str]] = []

    entries: dict[str, str | None] = {}  # a name used a thousand times is looked up once

    def note(node: ast.AST, rule: str, name: str, what: str) -> None:
        if name not in entries:
            entries[name] = forbidden.entry(name)
        entry = entries[name]
        if entry is not None:
            found.append((getattr(node, "lineno", 0), rule, what, entry))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                note(node, "forbidden-import", alias.name, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    name = forbidden.first_under.get(node.module, node.module)
                    note(node, "forbidden-import", name, f"imports * from {node.module}")
                else:
                    full = f"{node.module}.{alias.name}"
                    note(node, "forbidden-import", full, f"imports {full}")
        elif isinstance(node, ast.Name):
            used = _dotted(node, aliases)
            if used is not None:
                note(node, "forbidden-name", used, f"uses {used}")
        elif isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRIBUTES:
                found.append((node.lineno, "forbidden-attribute", f"reads .{node.attr}", node.attr))
            dotted = _dotted(node, aliases)
            if dotted is not None:
                note(node, "forbidden-name", dotted, f"uses {dotted}")
        elif isinstance(node, ast.Call) and (reached := _attribute_call(node)):
            target, attribute = reached
            if attribute in FORBIDDEN_ATTRIBUTES:
                found.append((node.lineno, "forbidden-attribute", f"reads .{attribute}", attribute))
            dotted = _dotted(target, aliases)
            if dotted is not None:
                note(node, "forbidden-name", f"{dotted}.{attribute}", f"uses {dotted}.{attribute}")
    found.sort(key=lambda item: item[0])
    return iter(found)


def _attribute_call(node: ast.Call) -> tuple[ast.expr, str] | None:
    """The object and name of ``getattr(x, "name")`` and its kin, which reach by a string."""
    if not (isinstance(node.func, ast.Name) and len(node.args) >= 2):
        return None
    if node.func.id not in ("getattr", "setattr", "delattr", "hasattr"):
        return None
    name = node.args[1]
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        return node.args[0], name.value
    return None


@hookimpl
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    register(PythonAstPolicy())

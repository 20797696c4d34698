"""The ``python-ast`` policy: refuse Python files that import or use what the seed forbids.

A passing test only proves what the test checks. A patch can make a test pass
without fixing anything: exit the interpreter with status 0 before the test
fails (``sys.exit``, ``raise SystemExit``), replace ``unittest`` or an entry of
``sys.modules`` with a fake, walk frames or the garbage collector to the test's
own objects, read the test file for the answer it expects, or reach out of the
project through a socket or a child process. This policy reads each replaced
Python file with :mod:`ast` and rejects those uses, so a reviewer sees the
attempt instead of a green test.

It is a tripwire, not a sandbox: Python is dynamic enough that a determined
patch can hide a call from any static check. The sandbox is what contains the
code; this policy narrows the ways a patch can cheat the test, and it refuses
what it cannot read (a file that does not parse). The rules themselves are in
:mod:`.python_ast_rules`.

Off by default; a seed switches it on with a ``[policies.python-ast]`` table
in its ``seed.toml`` (parameters below), a user with ``--policy python-ast``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import attrs

from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PatchPlan, SeedProject
from sandboxed_coding_agent.core.protocols import PatchPolicy, PolicyParameter
from sandboxed_coding_agent.core.seeds import patterns

from .python_ast_rules import (
    FORBIDDEN_ATTRIBUTES,
    RULE_ENTRIES,
    TEST_IMPORT,
    TEST_READ,
    Forbidden,
    SeedTests,
    uses,
)

__all__ = ["DEFAULT_FORBIDDEN", "FORBIDDEN_ATTRIBUTES", "NAME", "PythonAstPolicy"]

NAME = "python-ast"

#: What a patch may not import or use. A dotted name also covers everything under it
#: (``socket`` covers ``socket.create_connection``); ``*`` matches within a name
#: (``os.exec*`` covers ``os.execv``). ``.name`` is that attribute of any object;
#: ``<test-import>`` and ``<test-read>`` are rules (:mod:`.python_ast_rules`).
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
    # Raised (or subclassed): they pass `except Exception` and end the run. Catching
    # one in an `except` clause is not a use.
    "SystemExit",
    "KeyboardInterrupt",
    "GeneratorExit",
    "BaseException",
    "atexit",
    "signal",
    "sys.modules",
    "sys.settrace",
    "sys.setprofile",
    "unittest",
    "doctest",
    "pytest",
    "_pytest",
    "pluggy",
    "builtins",
    "__builtins__",
    # Reaching the test's own objects: frames and the garbage collector.
    "sys._getframe",
    "sys._getframemodulename",
    "sys._current_frames",
    "sys._current_exceptions",
    "inspect.currentframe",
    "inspect.stack",
    "inspect.trace",
    "inspect.getouterframes",
    "inspect.getinnerframes",
    "traceback.walk_stack",
    "traceback.walk_tb",
    ".f_back",
    ".f_globals",
    ".f_locals",
    ".f_builtins",
    ".tb_frame",
    ".gi_frame",
    ".cr_frame",
    ".ag_frame",
    ".__traceback__",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    # Learning the expected answer from the test instead of computing it.
    TEST_IMPORT,
    TEST_READ,
    # Hiding any of the above from this check and from a reader.
    "eval",
    "exec",
    "compile",
    "__import__",
    "importlib",
)

_PARAMETERS = ("forbid", "also_forbid", "allow", "paths")
#: Far above any real list (the built-in one has 64 entries); a seed folder or a command
#: line with more is a mistake, or an attempt to make every check slow.
MAX_ITEMS = 1000
#: Far longer than any dotted name a module exports.
MAX_ENTRY_CHARS = 256


@attrs.frozen
class PythonAstPolicy:
    """Rejects Python files of a plan that import or use a forbidden name.

    Each rejection names its rule (``forbidden-import``, ``forbidden-name``,
    ``forbidden-raise``, ``forbidden-attribute``, ``computed-name``,
    ``test-framework-patch``, ``test-import``, ``test-read``) and the entry of the
    list that forbids it; taking that entry out (``allow``) lets the use through.

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
        "exits early, touches unittest / sys.modules, walks frames or reads the tests"
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
                if name.startswith("<") and name not in RULE_ENTRIES:
                    raise ValueError(
                        f"{key}: {name!r} is not a rule (rules: {', '.join(RULE_ENTRIES)})"
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
        tests: SeedTests | None = None
        for entry in plan.files:
            if patterns.matches_any(entry.path, self.paths):
                tests = tests or SeedTests.of(seed.test_files)
                yield from self._check_file(entry.path, entry.content, tests)

    def _check_file(self, path: str, content: str, tests: SeedTests) -> Iterator[Rejection]:
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
        for line, rule, what, entry in uses(tree, Forbidden.of(tuple(self.forbidden)), tests):
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


@hookimpl
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    register(PythonAstPolicy())

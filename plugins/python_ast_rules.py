"""The rules of the ``python-ast`` policy: what it looks for in a parsed file, and how fast.

Private to :mod:`.python_ast_policy`, which holds the parameters and the messages.
:class:`Forbidden` indexes the forbidden entries; :func:`uses` walks a tree once and
gives every use of one. An entry is one of:

* a dotted name (``os.system``; ``*`` matches within a name): importing or using it;
* ``.name``: reading the attribute ``name`` of any object (``.f_back``);
* a rule in angle brackets (:data:`RULE_ENTRIES`): what it names (``<test-read>``).
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import functools
import re
from collections.abc import Mapping

import attrs

#: Attributes that open a way around name checks, whatever object they are read from.
FORBIDDEN_ATTRIBUTES = frozenset(
    {"__builtins__", "__globals__", "__subclasses__", "__code__", "__import__", "__loader__"}
)
#: Importing a test file of the seed (or ``__main__``, the test when it runs as a script).
TEST_IMPORT = "<test-import>"
#: Reading a test or Python file: by a name that looks like one, or by a computed name
#: in a file that also lists folders, parses Python or names such a file.
TEST_READ = "<test-read>"
RULE_ENTRIES = (TEST_IMPORT, TEST_READ)
#: Assigning to an attribute reached through one of these fakes the verdict, whatever
#: the name was reached by (a star import of the test hands over its ``unittest``).
TEST_FRAMEWORKS = frozenset({"unittest", "pytest", "_pytest", "pluggy", "doctest"})

Finding = tuple[int, str, str, str]  # line, rule, what, entry

_BUILTIN_NAMES = frozenset({*dir(builtins), "__builtins__"})
#: Functions that read the file named by their first argument.
_READ_FUNCTIONS = frozenset(
    {
        "open",
        "io.open",
        "io.open_code",
        "io.FileIO",
        "codecs.open",
        "os.open",
        "tokenize.open",
        "linecache.getline",
        "linecache.getlines",
        "linecache.updatecache",
        "fileinput.input",
        "runpy.run_path",
    }
)
_WALK_FUNCTIONS = frozenset({"glob.glob", "glob.iglob", "os.listdir", "os.scandir", "os.walk"})
_WALK_METHODS = frozenset({"glob", "rglob", "iterdir", "walk"})
_PARSE_FUNCTIONS = frozenset({"ast.parse", "tokenize.tokenize", "tokenize.generate_tokens"})
_MEMBER_FUNCTIONS = frozenset({"inspect.getmembers", "inspect.getmembers_static"})
_SOURCE_SUFFIXES = (".py", ".pyc", ".pyw")
#: Stands for the module's own names, the owner of ``globals()``, ``locals()``, ``vars()``.
_OWN_NAMES = ast.Name(id="", ctx=ast.Load())


@attrs.frozen(eq=False)
class Forbidden:
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
    def of(forbidden: tuple[str, ...]) -> Forbidden:
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
        return Forbidden(
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


@attrs.frozen
class SeedTests:
    """What the seed's test files are called, as modules and as files."""

    #: Module names a test file can be imported by (``tests.test_x`` and ``test_x``).
    modules: frozenset[str]
    #: File names (lower case), with and without ``.py``.
    files: frozenset[str]

    @staticmethod
    @functools.lru_cache(maxsize=16)
    def of(test_files: tuple[str, ...]) -> SeedTests:
        modules = {"__main__"}
        files: set[str] = set()
        for path in test_files:
            files.add(path.rsplit("/", 1)[-1].lower())
            if path.endswith(".py"):
                parts = path[:-3].split("/")
                if parts[-1] == "__init__":
                    parts.pop()
                if parts:
                    files.add(parts[-1].lower())
                modules.update(".".join(parts[start:]) for start in range(len(parts)))
        return SeedTests(frozenset(modules), frozenset(files))

    def module(self, name: str) -> bool:
        """Whether ``name``, or its last dotted parts, is the module of a test file."""
        return any(
            name.split(".", start)[-1] in self.modules for start in range(name.count(".") + 1)
        )

    def file(self, value: str, *, broad: bool) -> bool:
        """Whether a path names a test or Python file: ``broad`` adds ``test``-looking names."""
        if not value or len(value) > 1024 or len(value.split()) != 1:
            return False
        parts = [part for part in value.replace("\\", "/").lower().split("/") if part]
        if not parts:
            return False
        if parts[-1].endswith(_SOURCE_SUFFIXES) or parts[-1] in self.files:
            return True
        stems = [part.split(".", 1)[0] for part in parts] if broad else []
        return any(
            stem in ("test", "tests", "conftest")
            or stem.startswith("test_")
            or stem.endswith("_test")
            for stem in stems
        )


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


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _namespace(node: ast.AST) -> ast.expr | None:
    """The owner of a namespace: ``X`` of ``vars(X)`` and ``X.__dict__``, or :data:`_OWN_NAMES`."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or node.keywords:
        return None
    if node.func.id in ("globals", "locals", "vars") and not node.args:
        return _OWN_NAMES
    if node.func.id == "vars" and len(node.args) == 1:
        return node.args[0]
    return None


def _key(node: ast.AST) -> tuple[ast.expr, ast.expr, str | None] | None:
    """(namespace, owner, key) of ``vars(X)[key]`` and ``X.__dict__.get(key)``; key ``None``:
    computed."""
    if isinstance(node, ast.Subscript):
        namespace, key = node.value, node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        if node.func.attr != "get":
            return None
        namespace, key = node.func.value, node.args[0]
    else:
        return None
    owner = _namespace(namespace)
    return None if owner is None else (namespace, owner, _literal(key))


def _attribute_call(node: ast.AST) -> tuple[str, ast.expr, str | None] | None:
    """(function, object, name) of ``getattr(x, "name")`` and its kin; name ``None``: computed."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or len(node.args) < 2:
        return None
    if node.func.id not in ("getattr", "setattr", "delattr", "hasattr"):
        return None
    return node.func.id, node.args[0], _literal(node.args[1])


def _step(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(object, name) of a read of one name by a string: ``getattr(x, "n")``, ``vars(x)["n"]``."""
    reached = _attribute_call(node)
    if reached is not None:
        function, owner, name = reached
        return (owner, name) if function == "getattr" and name is not None else None
    keyed = _key(node)
    return (keyed[1], keyed[2]) if keyed is not None and keyed[2] is not None else None


def _dotted(node: ast.AST, aliases: Mapping[str, str], *, raw: bool = False) -> str | None:
    """``a.b.c`` for a name or attribute chain rooted at an import or a builtin.

    A chain rooted at anything else (a local variable that happens to be called
    ``signal``) is ``None``, unless ``raw``: it cannot be the module of that name.
    ``getattr(a, "b")``, ``vars(a)["b"]`` and ``a.__dict__["b"]`` are ``a.b``, and
    ``globals()["a"]`` is ``a``.
    """
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
            continue
        if isinstance(node, ast.Name):
            root = node.id
            break
        step = _step(node)
        if step is None:
            return None
        if step[0] is _OWN_NAMES:
            root = step[1]
            break
        parts.append(step[1])
        node = step[0]
    if root in aliases:
        parts.append(aliases[root])
    elif root in _BUILTIN_NAMES or raw:
        parts.append(root)
    else:
        return None
    return ".".join(reversed(parts))


def _is_computed(path: ast.expr) -> bool:
    """Whether a path is more than literals (``Path("a") / "b.csv"`` is not; ``open(name)`` is)."""
    called = {
        id(n) for call in ast.walk(path) if isinstance(call, ast.Call) for n in ast.walk(call.func)
    }
    return any(isinstance(n, ast.Name) and id(n) not in called for n in ast.walk(path))


class _Finder:
    """One walk over a tree, noting each use of a forbidden entry."""

    def __init__(self, tree: ast.AST, forbidden: Forbidden, tests: SeedTests) -> None:
        self.aliases = _aliases(tree)
        self.forbidden = forbidden
        self.tests = tests
        self.found: list[Finding] = []
        self.entries: dict[str, str | None] = {}  # a name used a thousand times is looked up once
        # Nodes met before their children (ast.walk goes down level by level) mark them here.
        self.skipped: set[int] = set()  # an `except` clause's classes, docstrings
        self.raised: set[int] = set()
        self.keyed: set[int] = set()  # namespaces read by a literal key
        self.reads: list[tuple[int, ast.expr]] = []
        self.hints: list[tuple[int, str]] = []  # listing folders, parsing Python
        self.constants: list[tuple[int, str]] = []

    def add(self, node: ast.AST | int, rule: str, what: str, entry: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 0)
        self.found.append((line, rule, what, entry))

    def note(self, node: ast.AST, rule: str, name: str, what: str) -> None:
        """Reports ``name`` if an entry forbids it."""
        if name not in self.entries:
            self.entries[name] = self.forbidden.entry(name)
        entry = self.entries[name]
        if entry is not None:
            self.add(node, rule, what, entry)

    def walk(self, tree: ast.AST) -> list[Finding]:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node)
            elif isinstance(node, ast.Name):
                if id(node) not in self.skipped:
                    self.name(node, _dotted(node, self.aliases))
            elif isinstance(node, ast.Attribute):
                if id(node) not in self.skipped:
                    self.attribute(node, node.value, node.attr)
                    self.name(node, _dotted(node, self.aliases))
                    self.namespace(node)
            elif isinstance(node, (ast.Call, ast.Subscript)):
                self.reach(node)
                if isinstance(node, ast.Call):
                    self.call(node)
            elif isinstance(node, ast.Constant):
                if isinstance(node.value, str) and id(node) not in self.skipped:
                    self.constants.append((node.lineno, node.value))
            elif isinstance(node, ast.Raise) and node.exc is not None:
                self.raised.add(id(node.exc))
                if isinstance(node.exc, ast.Call):
                    self.raised.add(id(node.exc.func))
            elif isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
                self.skipped.update(id(n) for n in caught)  # catching is no cheat, calling is
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = (
                    node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                )
                verb = "deletes" if isinstance(node, ast.Delete) else "assigns to"
                for target in targets:
                    for part in ast.walk(target):
                        if isinstance(part, ast.Attribute) and not isinstance(part.ctx, ast.Load):
                            self.patch(part, _dotted(part, self.aliases, raw=True), verb)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = node.body[0] if node.body else None
                if isinstance(first, ast.Expr) and _literal(first.value) is not None:
                    self.skipped.add(id(first.value))
        self.test_reads()
        self.found.sort(key=lambda item: item[0])
        return self.found

    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
            for name in names:
                self.note(node, "forbidden-import", name, f"imports {name}")
        else:
            module = node.module or ""
            names = [module] if module else []
            names += [f"{module}.{a.name}".lstrip(".") for a in node.names if a.name != "*"]
            if node.module and not node.level:
                for alias in node.names:
                    if alias.name == "*":
                        name = self.forbidden.first_under.get(module, module)
                        self.note(node, "forbidden-import", name, f"imports * from {module}")
                    else:
                        full = f"{module}.{alias.name}"
                        self.note(node, "forbidden-import", full, f"imports {full}")
        test = next((name for name in names if self.tests.module(name)), None)
        if test is not None and TEST_IMPORT in self.forbidden.order:
            what = "the test when it runs as a script" if test == "__main__" else "a test file"
            self.add(node, "test-import", f"imports {test} ({what})", TEST_IMPORT)

    def name(self, node: ast.AST, used: str | None) -> None:
        if used is not None and id(node) in self.raised:
            self.note(node, "forbidden-raise", used, f"raises {used}")
        elif used is not None:
            self.note(node, "forbidden-name", used, f"uses {used}")

    def attribute(self, node: ast.AST, owner: ast.expr, attribute: str) -> None:
        if owner is _OWN_NAMES:
            return
        if attribute in FORBIDDEN_ATTRIBUTES:  # always, whatever the list holds
            self.add(node, "forbidden-attribute", f"reads .{attribute}", attribute)
        self.note(node, "forbidden-attribute", f".{attribute}", f"reads .{attribute}")

    def namespace(self, node: ast.AST) -> None:
        """``vars(os)`` or ``os.__dict__`` not read by a literal key reaches all of ``os``."""
        owner = _namespace(node)
        if owner is not None and id(node) not in self.keyed:
            self.computed(node, owner)

    def computed(self, node: ast.AST, owner: ast.expr) -> None:
        if owner is _OWN_NAMES:
            what = "reads the module's names (globals(), locals(), vars()) by a computed name"
            self.note(node, "computed-name", "__builtins__", what)
            return
        base = _dotted(owner, self.aliases)
        under = self.forbidden.first_under.get(base) if base is not None else None
        if under is not None:
            self.note(node, "computed-name", under, f"reads {base} by a computed name")

    def reach(self, node: ast.Call | ast.Subscript) -> None:
        """``getattr(os, "system")``, ``vars(os)["system"]``: a name reached by a string."""
        keyed = _key(node)
        reached = _attribute_call(node)
        if keyed is not None:
            namespace, owner, name = keyed
            if name is not None:
                self.keyed.add(id(namespace))  # else it is reported as a namespace read whole
        elif reached is not None:
            function, owner, name = reached
            if function in ("setattr", "delattr"):
                chain = _dotted(owner, self.aliases, raw=True)
                full = f"{chain}.{name or '(a computed name)'}" if chain is not None else None
                self.patch(node, full, "sets" if function == "setattr" else "deletes")
            if name is None:
                self.computed(node, owner)
        else:
            return
        if name is None:
            return
        self.attribute(node, owner, name)
        if owner is _OWN_NAMES:
            used = self.aliases.get(name) or (name if name in _BUILTIN_NAMES else None)
        else:
            base = _dotted(owner, self.aliases)
            used = None if base is None else f"{base}.{name}"
        self.name(node, used)

    def patch(self, node: ast.AST, chain: str | None, verb: str) -> None:
        """Assigning to ``unittest.TestCase.assertEqual`` (however ``unittest`` was reached)."""
        parts = chain.split(".") if chain is not None else []
        for index, part in enumerate(parts):
            if part in TEST_FRAMEWORKS:
                self.note(node, "test-framework-patch", ".".join(parts[index:]), f"{verb} {chain}")
                return

    def call(self, node: ast.Call) -> None:
        func = node.func
        called = (
            _dotted(func, self.aliases) if isinstance(func, (ast.Name, ast.Attribute)) else None
        )
        self.namespace(node)
        if called in _MEMBER_FUNCTIONS and node.args:
            self.computed(node, node.args[0])
        if called in _READ_FUNCTIONS:
            paths = [
                k.value for k in node.keywords if k.arg in ("file", "filename", "path", "files")
            ]
            if node.args or paths:
                self.reads.append((node.lineno, (node.args or paths)[0]))
        elif called in _WALK_FUNCTIONS:
            self.hints.append((node.lineno, "lists folders"))
        elif called in _PARSE_FUNCTIONS:
            self.hints.append((node.lineno, "parses Python"))
        elif isinstance(func, ast.Attribute):
            module = _dotted(func.value, self.aliases)
            plain = module is None or module.startswith("pathlib")
            if func.attr in ("read_text", "read_bytes") or (func.attr == "open" and plain):
                self.reads.append((node.lineno, func.value))
            elif func.attr in _WALK_METHODS and plain:
                self.hints.append((node.lineno, "lists folders"))

    def test_reads(self) -> None:
        """A read of a test or Python file, named or computed (see :data:`TEST_READ`)."""
        if not self.reads or TEST_READ not in self.forbidden.order:
            return
        for line, path in self.reads:
            strings = (_literal(n) or "" for n in ast.walk(path) if isinstance(n, ast.expr))
            named = next((s for s in strings if self.tests.file(s, broad=True)), None)
            if named is not None:
                self.add(
                    line, "test-read", f"reads {named[:80]!r}, a test or Python file", TEST_READ
                )
                return
        computed = next((line for line, path in self.reads if _is_computed(path)), None)
        if computed is None:
            return
        hint = self.hints[0] if self.hints else None
        if hint is None:
            hint = next(
                (
                    (line, f"names {value[:80]!r}")
                    for line, value in self.constants
                    if self.tests.file(value, broad=False)
                ),
                None,
            )
        if hint is not None:
            what = f"reads a computed path and {hint[1]} (line {hint[0]})"
            self.add(computed, "test-read", what, TEST_READ)


def uses(tree: ast.AST, forbidden: Forbidden, tests: SeedTests) -> list[Finding]:
    """(line, rule, what, forbidden entry) for each forbidden import or use, in source order."""
    return _Finder(tree, forbidden, tests).walk(tree)

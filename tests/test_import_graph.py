"""Imports go one way: no module of the package imports, however indirectly, itself.

Every import counts: at the top of a module, under ``if TYPE_CHECKING:``, and
inside a function (an import put off to keep the CLI's start fast is still a
dependency). An import of a submodule counts as an import of that module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "sandboxed_coding_agent"
#: The project's folders and the import names they get at install time.
FOLDERS = {"core": f"{PACKAGE}.core", "plugins": f"{PACKAGE}.plugins"}
#: The folder whose modules are the package itself (the Python API), not a part of core.
API_FOLDER = Path("core", "api")


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package, by its import name."""
    found: dict[str, Path] = {}
    for folder, name in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            base, prefix = root / folder, name
            if path.is_relative_to(root / API_FOLDER):
                base, prefix = root / API_FOLDER, PACKAGE
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The modules of the package that the module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in known:
                    yield full
                elif target in known:
                    yield target


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {name: set(imported(name, path, known)) - {name} for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, by a
    stack of its own rather than recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_no_module_of_the_package_imports_itself_through_others() -> None:
    edges = graph()
    assert len(edges) > 100, "the package's modules were not found"
    found = circles(edges)
    shown = ["; ".join(f"{m} -> {sorted(edges[m] & set(group))}" for m in group) for group in found]
    assert found == [], "import circles:\n" + "\n".join(shown)


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("at the top", "from ..model import SandboxOutcome\n"),
        (
            "for types only",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import model\n",
        ),
        ("inside a function", "def later():\n    from ..model import SandboxOutcome\n"),
    ],
)
def test_an_import_back_makes_a_circle_the_check_names(
    where: str, text: str, tmp_path: Path
) -> None:
    # A copy of the package in which the budget module imports the data model back.
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text())
    budget = tmp_path / "core" / "plans" / "budget.py"
    budget.write_text(budget.read_text() + "\n" + text)

    found = circles(graph(tmp_path))

    assert any(
        f"{PACKAGE}.core.plans.budget" in group and f"{PACKAGE}.core.model" in group
        for group in found
    ), (where, found)

"""core/ is a few packages, each saying what it holds; the map and the install see them all.

A newcomer finds where a thing lives from the folder names and the map in
CONTRIBUTING.md, made from the docstrings; a plugin written against the paths core had
before it was split keeps working, importing the very same modules.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import package_map
import pytest

from sandboxed_coding_agent import core

ROOT = Path(__file__).resolve().parent.parent
#: At most this many modules directly in core/ (its __init__ counted): the rest in packages.
MAX_TOP_MODULES = 12


def test_core_holds_few_modules_directly_and_every_package_says_what_it_may_import() -> None:
    top = sorted(path.name for path in (ROOT / "core").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    packages = [path for path in (ROOT / "core").iterdir() if (path / "__init__.py").is_file()]
    assert len(packages) >= 6
    for package in packages:
        text = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        assert text, f"{package.name}/__init__.py has no docstring"
    for name in ("seeds", "plans", "verdicts", "records", "runs", "batches", "api"):
        text = ast.get_docstring(ast.parse((ROOT / "core" / name / "__init__.py").read_text()))
        assert text is not None
        assert "May import" in text, name


def test_the_map_in_contributing_is_made_from_the_docstrings_as_they_are() -> None:
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert package_map.updated(contributing) == contributing, (
        "CONTRIBUTING.md's package map is stale: run `uv run python tests/package_map.py`"
    )
    for name in ("plans/", "verdicts/", "runs/", "errors.py", "local_sandbox/"):
        assert f"  {name}" in contributing


def test_a_stale_map_is_noticed(tmp_path: Path) -> None:
    for folder in ("core", "plugins"):
        for path in (ROOT / folder).rglob("__init__.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text())
        for path in (ROOT / folder).glob("*.py"):
            (tmp_path / folder / path.name).write_text(path.read_text())
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert package_map.updated(contributing, tmp_path) == contributing
    (tmp_path / "core" / "runs" / "__init__.py").write_text('"""Something else."""\n')
    assert package_map.updated(contributing, tmp_path) != contributing


def test_every_package_folder_is_installed() -> None:
    # A folder left out of pyproject.toml's list is missing from the wheel: the command
    # that imports it fails only for users who installed the package.
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    folders = {"core": "core", "plugins": "plugins", "seed_projects": "seed_projects"}
    found = set()
    for folder, name in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            if folder == "seed_projects" and parts:
                continue  # the seeds' own packages are data, shipped as package data
            if parts[:1] == ("api",) and folder == "core":
                found.add(".".join(["sandboxed_coding_agent", *parts[1:]]))  # the package itself
                continue
            found.add(".".join(["sandboxed_coding_agent", name, *parts]))
    assert found <= listed, sorted(found - listed)
    assert "sandboxed_coding_agent.core.api" not in listed  # core/api is installed once
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert package_dir["package-dir"]["sandboxed_coding_agent"] == "core/api"


@pytest.mark.parametrize("old", sorted(core.MOVED))
def test_a_path_from_before_the_packages_imports_the_same_module(old: str) -> None:
    before = importlib.import_module(f"sandboxed_coding_agent.core.{old}")
    now = importlib.import_module(f"sandboxed_coding_agent.core.{core.MOVED[old]}")
    assert before is now
    assert now.__name__ == f"sandboxed_coding_agent.core.{core.MOVED[old]}"


def test_old_paths_work_in_a_fresh_interpreter_in_every_import_form() -> None:
    code = (
        "import sandboxed_coding_agent.core.contract as a\n"
        "from sandboxed_coding_agent.core import manifest, seed_runtime\n"
        "from sandboxed_coding_agent.core.grading import Grade\n"
        "from sandboxed_coding_agent.core.seeds import SeedProject\n"
        "from sandboxed_coding_agent.core.records import call_planner, excerpt\n"
        "from sandboxed_coding_agent.core.plans import contract\n"
        "from sandboxed_coding_agent.core.verdicts.grading import Grade as G\n"
        "assert a is contract and Grade is G\n"
        "assert manifest.load_seed and seed_runtime.prepare_runtime and SeedProject\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout == "ok\n", done.stderr


def test_a_name_never_in_core_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sandboxed_coding_agent.core.no_such_module")


def documented_imports() -> list[str]:
    """Every import of the package in the docs' pages, the README, CONTRIBUTING and the
    example plugin, as written there."""
    pattern = re.compile(
        r"^[ \t]*(?:from\s+sandboxed_coding_agent[\w.]*\s+import\s+(?:\([^)]*\)|[^\n]+)"
        r"|import\s+sandboxed_coding_agent[\w.]*(?:\s+as\s+\w+)?)",
        re.MULTILINE,
    )
    sources = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    sources += sorted((ROOT / "examples").rglob("*.py"))
    found: list[str] = []
    for path in sources:
        for match in pattern.finditer(path.read_text()):
            statement = match.group(0).strip()
            ast.parse(statement)  # a statement the pattern cut short fails here, by name
            found.append(statement)
    return sorted(set(found))


def test_every_import_the_docs_and_the_example_show_runs() -> None:
    statements = documented_imports()
    assert len(statements) >= 10, statements
    code = "".join(f"{statement}\n" for statement in statements) + "print('ok')\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout == "ok\n", done.stderr


#: The packages of core/, bottom up: a module may import from its own layer and those
#: below, never above. The bottom layer is what a run is made of (its seed, its plans, the
#: verdict's evidence, the records); its packages import each other's modules.
LAYERS = (
    {"seeds", "plans", "verdicts", "records"},
    {"runs"},
    {"batches"},
    {"swebench", "report", "api"},
    {"cli"},
)
#: The parts of the package that are not core/'s packages: core/api's modules are the
#: package ``sandboxed_coding_agent`` itself (the Python API).
NOT_THE_API = ("core", "plugins", "seed_projects")


def package_of(module: str) -> str | None:
    """The package of core/ that ``module`` is in (``api`` for the package's own modules)."""
    parts = module.split(".")
    if parts[0] != "sandboxed_coding_agent":
        return None
    if len(parts) == 1 or parts[1] not in NOT_THE_API:
        return "api"
    if parts[1] != "core" or len(parts) < 4:
        return None
    return parts[2]


def layer_of(module: str) -> int | None:
    package = package_of(module)
    return next((n for n, layer in enumerate(LAYERS) if package in layer), None)


def imports_of_the_api(edges: dict[str, set[str]]) -> list[str]:
    """Imports of the Python API from anywhere but the CLI (``agent serve`` serves it):
    it is the top, which nothing else uses."""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(edges.items())
        for target in sorted(targets)
        if package_of(module) not in ("api", "cli") and package_of(target) == "api"
    ]


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(edges.items()):
        here = layer_of(module)
        for target in sorted(targets):
            there = layer_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{module} -> {target}")
            if module.startswith("sandboxed_coding_agent.core.harness") and not target.startswith(
                "sandboxed_coding_agent.core.harness"
            ):
                found.append(f"{module} -> {target} (the harness runs alone in the sandbox)")
    return found


def test_packages_import_only_from_their_layer_and_below() -> None:
    from test_import_graph import graph

    edges = graph()
    layered = {package_of(name) for name in edges if layer_of(name) is not None}
    assert layered == set().union(*LAYERS), "a package of core/ is in no layer"
    assert upward_imports(edges) == []
    assert imports_of_the_api(edges) == []
    assert {"sandboxed_coding_agent", "sandboxed_coding_agent.verification"} <= set(edges)


def test_an_import_of_the_api_is_named() -> None:
    edges = {
        "sandboxed_coding_agent.core.runs.recording": {"sandboxed_coding_agent.verification"},
        "sandboxed_coding_agent.core.cli.serve": {"sandboxed_coding_agent.server"},
        "sandboxed_coding_agent.rewards": {"sandboxed_coding_agent.core.runs.recording"},
    }
    assert imports_of_the_api(edges) == [
        "sandboxed_coding_agent.core.runs.recording -> sandboxed_coding_agent.verification"
    ]


def test_an_import_from_a_layer_above_is_named() -> None:
    edges = {
        "sandboxed_coding_agent.core.seeds.manifest": {"sandboxed_coding_agent.core.runs.budget"},
        "sandboxed_coding_agent.core.harness.main": {"sandboxed_coding_agent.core.model"},
        "sandboxed_coding_agent.core.runs.orchestrator": {
            "sandboxed_coding_agent.core.seeds.project"
        },
    }
    assert upward_imports(edges) == [
        "sandboxed_coding_agent.core.harness.main -> sandboxed_coding_agent.core.model "
        "(the harness runs alone in the sandbox)",
        "sandboxed_coding_agent.core.seeds.manifest -> sandboxed_coding_agent.core.runs.budget",
    ]

"""The map of core/ and plugins/ in CONTRIBUTING.md, made from the modules' own docstrings.

``uv run python tests/package_map.py`` rewrites the map between its two markers;
``tests/test_package_layout.py`` fails when the map there is not what this makes.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = "<!-- package map: made by tests/package_map.py; do not edit by hand -->"
END = "<!-- package map: end -->"


def summary(path: Path) -> str:
    """The first line of the module's docstring (or of its package's ``__init__``)."""
    if path.is_dir():
        path = path / "__init__.py"
    text = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    return text.split("\n\n")[0].replace("\n", " ").replace("``", "`").strip()


def entries(folder: Path) -> list[tuple[str, str]]:
    """Each module and package directly in ``folder``, with its summary: modules first."""
    modules = sorted(path for path in folder.glob("*.py") if path.name != "__init__.py")
    packages = sorted(path for path in folder.iterdir() if (path / "__init__.py").is_file())
    return [(path.name, summary(path)) for path in modules] + [
        (f"{path.name}/", summary(path)) for path in packages
    ]


def render(root: Path = ROOT) -> str:
    lines = [START, "", "```text"]
    for folder in ("core", "plugins"):
        lines.append(f"{folder}/")
        for name, text in entries(root / folder):
            lines.append(f"  {name:<22}{text}" if text else f"  {name}")
    lines += ["```", "", END]
    return "\n".join(lines)


def updated(text: str, root: Path = ROOT) -> str:
    """``text`` (CONTRIBUTING.md's) with the map between the markers made afresh."""
    head, found, rest = text.partition(START)
    if not found or END not in rest:
        raise SystemExit(f"CONTRIBUTING.md has no {START!r} ... {END!r} block")
    return head + render(root) + rest.partition(END)[2]


if __name__ == "__main__":
    contributing = ROOT / "CONTRIBUTING.md"
    contributing.write_text(updated(contributing.read_text()))
    sys.exit(0)

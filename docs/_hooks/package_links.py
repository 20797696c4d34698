"""MkDocs hook: expose core/ and plugins/ under their import names for mkdocstrings.

The folders are mapped to ``sandboxed_coding_agent.*`` only at install time, so
static analysis needs a tree of links that spells the import names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TREE = ROOT / "build" / "package" / "sandboxed_coding_agent"


def on_startup(**_: Any) -> None:
    TREE.mkdir(parents=True, exist_ok=True)
    for folder in ("core", "plugins"):
        link = TREE / folder
        if not link.is_symlink():
            link.symlink_to(ROOT / folder, target_is_directory=True)

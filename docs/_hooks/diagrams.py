"""MkDocs hook: a diagram of ``docs/diagrams/`` is put into the page itself.

A page shows a diagram as an image, ``![what it shows](diagrams/NAME.svg)``, which
GitHub renders from the file. On the site the image is replaced by the file's SVG,
inline, so that its colours follow the theme's (``.diagram`` in ``extra.css``) when
the reader switches between light and dark mode; an image could only follow the
browser's preference. Nothing is loaded from anywhere to draw it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DIAGRAMS = Path(__file__).resolve().parents[1] / "diagrams"

# Python-Markdown puts an image alone on its line in a paragraph of its own.
_DIAGRAM = re.compile(
    r'(?:<p>)?<img alt="[^"]*" src="(?:\.\./)*diagrams/(?P<name>[\w-]+)\.svg" />(?:</p>)?'
)


def on_page_content(text: str, **_: Any) -> str:
    return _DIAGRAM.sub(_inline, text)


def _inline(found: re.Match[str]) -> str:
    return (DIAGRAMS / f"{found['name']}.svg").read_text(encoding="utf-8").strip()

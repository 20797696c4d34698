"""The HTML report of a batch's results: one self-contained page.

Everything is in the page: its style and a small script (sorting, filters, a search)
inline, each allowed by its hash in the page's Content-Security-Policy, which forbids
loading anything and running any other script. Without the script every task is
listed and its details open all the same. Every piece of text from the results is
escaped, and characters that would hide or reorder text are shown as code points: a
test's output or a model's diff may hold markup, and it shows as text.

``agent report --json`` prints what the page summarises, from the same rows
(:mod:`.summary`).
"""

from __future__ import annotations

from .page import (
    PAGE_TEXT_CHARS,
    STATUS_MEANINGS,
    TASK_TEXT_CHARS,
    TEXT_CHARS,
    render_html,
    render_report,
)
from .rows import ResultsSource, Row, merged

__all__ = [
    "PAGE_TEXT_CHARS",
    "STATUS_MEANINGS",
    "TASK_TEXT_CHARS",
    "TEXT_CHARS",
    "ResultsSource",
    "Row",
    "merged",
    "render_html",
    "render_report",
]

"""MkDocs hook: short inline code stays on one line.

A browser breaks inline code at a space or after a hyphen, so `mypy --strict`,
`--disable-plugin` or a type such as `tuple[str, ...]` could end one line and
begin the next. Code spans of up to ``SHORT`` characters get the ``nowrap``
class (styled in ``extra.css``); longer ones still wrap, so none runs past the
column.
"""

from __future__ import annotations

import html
import re
from typing import Any

SHORT = 32

# A code block's <code> follows <pre> (and Pygments' empty span); inline code does not.
# Inline code may hold links and spans (a type in the reference), never other code.
_INLINE_CODE = re.compile(r"(?<!<pre>)(?<!<span></span>)<code>(.*?)</code>", re.S)
_TAG = re.compile(r"<[^>]+>")


def on_page_content(text: str, **_: Any) -> str:
    return _INLINE_CODE.sub(_mark_short, text)


def _mark_short(found: re.Match[str]) -> str:
    if len(html.unescape(_TAG.sub("", found[1]))) > SHORT:
        return found[0]
    return f'<code class="nowrap">{found[1]}</code>'

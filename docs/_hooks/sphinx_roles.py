"""Griffe extension: Sphinx roles and ``::`` blocks in docstrings become Markdown for the reference.

The docstrings are written for readers of the source and of ``help()`` (pytest and
tox style: ``:param:``, ``:class:`~pkg.Name```). mkdocstrings parses their field
lists but prints the roles as they are, so this turns each role into a
cross-reference to the documented object (a strict build then fails on a
reference to something no page documents) and each ``::`` literal block into a
fenced one.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?P<role>class|func|meth|attr|data|mod|exc|obj):`(?P<tilde>~?)(?P<target>[^`]+)`"
)


class SphinxRoles(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **_: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None:
                text = _literal_blocks(obj.docstring.value)
                obj.docstring.value = ROLE.sub(
                    lambda match, obj=obj: _reference(match, obj, loader), text
                )


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_walk(member))  # type: ignore[arg-type]
    return found


def _reference(match: re.Match[str], obj: griffe.Object, loader: griffe.GriffeLoader) -> str:
    target = match["target"]
    title = target.rsplit(".", 1)[-1] if match["tilde"] else target
    found = _find(target, obj, loader)
    if found is None:  # the standard library, say: shown, not linked
        return f"`{title}`"
    # An attribute or helper without a docstring has no anchor of its own: link its owner.
    while (
        not found.has_docstring
        and (found.is_attribute or found.is_function)
        and found.parent is not None
    ):
        found = found.parent
    return f"[`{title}`][{found.canonical_path}]"


def _find(target: str, obj: griffe.Object, loader: griffe.GriffeLoader) -> Any:
    """The object ``target`` names: a full path, or a name seen from ``obj`` (``Cls.attr`` too)."""
    first, _, rest = target.partition(".")
    candidates = [target]
    for scope in (obj, obj.parent, obj.module):
        try:
            resolved = scope.resolve(first) if scope is not None else None
        except griffe.NameResolutionError:
            continue
        if resolved:
            candidates.append(f"{resolved}.{rest}" if rest else resolved)
    for path in candidates:
        try:
            found = loader.modules_collection[path]
        except (KeyError, ValueError):
            continue
        return found.final_target if found.is_alias else found
    return None


def _literal_blocks(text: str) -> str:
    """``Example::`` and the indented block after it become ``Example:`` and a fenced block."""
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.rstrip().endswith("::"):
            out.append(line)
            continue
        intro = line.rstrip()[:-1]
        if intro.strip() != ":":
            out.append(intro)
        block: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index].startswith(" ")):
            block.append(lines[index])
            index += 1
        out += ["", "```python", *textwrap.dedent("\n".join(block)).strip("\n").splitlines()]
        out += ["```", ""]
    return "\n".join(out)

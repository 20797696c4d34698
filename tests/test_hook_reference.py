"""The hook reference is generated from the hook specs: every hook is on it and documented."""

from __future__ import annotations

import inspect
from pathlib import Path

from sandboxed_coding_agent.core import hookspecs

REFERENCE = Path(__file__).parents[1] / "docs" / "reference" / "hooks.md"


def hook_names() -> list[str]:
    return [
        name
        for name, value in vars(hookspecs).items()
        if inspect.isfunction(value) and hasattr(value, "sandboxed_coding_agent_spec")
    ]


def test_every_hook_is_on_the_reference_page_and_in_all() -> None:
    page = REFERENCE.read_text()

    assert hook_names(), "no hook specs found"
    for name in hook_names():
        assert f"- {name}\n" in page
        assert name in hookspecs.__all__


def test_every_hook_says_what_it_adds_and_documents_its_parameter() -> None:
    for name in hook_names():
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert len(doc.splitlines()[0]) > 20, name
        for parameter in inspect.signature(getattr(hookspecs, name)).parameters:
            assert f":param {parameter}:" in doc, (name, parameter)

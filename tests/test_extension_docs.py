"""The plugin authors' guide quotes the example package's real files, word for word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
GUIDE = PROJECT / "docs" / "writing-plugins.md"
QUOTED = re.compile(r"<!-- file: (?P<path>\S+) -->\n```\w*\n(?P<text>.*?)```\n", re.S)


def quoted_files() -> list[tuple[str, str]]:
    return [(m["path"], m["text"]) for m in QUOTED.finditer(GUIDE.read_text())]


def test_guide_quotes_every_file_of_the_example_package() -> None:
    example = PROJECT / "examples" / "agent-policy-example"
    quoted = {path for path, _ in quoted_files()}
    shipped = {
        str(p.relative_to(PROJECT))
        for p in example.rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".toml")
        and "egg-info" not in str(p)
        and "build" not in p.relative_to(example).parts
    }
    assert quoted == shipped


@pytest.mark.parametrize(("path", "text"), quoted_files(), ids=lambda value: value[:60])
def test_guide_listing_is_the_real_file(path: str, text: str) -> None:
    assert (PROJECT / path).read_text() == text


def test_readme_points_to_the_guides() -> None:
    readme = (PROJECT / "README.md").read_text()
    assert "docs/writing-plugins.md" in readme
    assert "docs/seed-manifest.md" in readme

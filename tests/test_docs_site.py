"""The documentation site: built strictly, code highlighted at build time, nothing loaded from
the network, and a command-line reference that lists what ``agent --help`` lists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

PROJECT = Path(__file__).resolve().parents[1]
AGENT = Path(sys.executable).with_name("agent")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    # Not --quiet: it hides the warnings --strict would fail on, and the build passes
    # whatever they say.
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(folder)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return folder


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text()


class Resources(HTMLParser):
    """The scripts, stylesheets, fonts and icons a page makes the browser load."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("script", "img", "iframe") and values.get("src"):
            self.loaded.append(str(values["src"]))
        if tag == "link" and values.get("href"):
            self.loaded.append(str(values["href"]))


def test_site_loads_no_script_stylesheet_or_font_from_the_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    for html_file in pages:
        resources = Resources()
        resources.feed(html_file.read_text())
        assert resources.loaded, html_file
        off_site = [url for url in resources.loaded if urlsplit(url).scheme or url.startswith("//")]
        assert off_site == [], html_file
    for stylesheet in site.rglob("*.css"):
        assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", stylesheet.read_text())


def test_code_blocks_are_highlighted_when_the_site_is_built(site: Path) -> None:
    guide = page(site, "writing-plugins")
    listing = re.search(r'class="language-python highlight"><pre>.*?</pre>', guide, re.S)
    assert listing is not None
    # Pygments' token classes: a keyword and a name, in the built page itself.
    assert '<span class="kn">from</span>' in listing[0]
    assert '<span class="n">' in listing[0]
    for html_file in site.rglob("*.html"):
        assert "highlight.js" not in html_file.read_text()
        assert "hljs" not in html_file.read_text()


def test_short_inline_code_is_never_broken_across_lines(site: Path) -> None:
    guide = page(site, "writing-plugins")
    assert '<code class="nowrap">mypy --strict</code>' in guide
    assert ".md-typeset code.nowrap" in (site / "extra.css").read_text()
    assert "white-space: nowrap" in (site / "extra.css").read_text()


def agent_help(*words: str) -> tuple[list[str], list[str]]:
    """The commands and the options ``agent WORDS --help`` lists."""
    shown = subprocess.run(
        [str(AGENT), *words, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert shown.returncode == 0, shown.stderr
    sections: dict[str, list[str]] = {}
    current = ""
    for line in shown.stdout.splitlines():
        if re.fullmatch(r"\w+:", line):
            current = line[:-1]
        elif current and re.match(r"  \S", line):
            sections.setdefault(current, []).append(line.split()[0].rstrip(","))
    return sections.get("Commands", []), sections.get("Options", [])


def every_command() -> dict[tuple[str, ...], list[str]]:
    """Each command path ``agent --help`` and its groups list, with the command's options."""
    found: dict[tuple[str, ...], list[str]] = {}
    waiting: list[tuple[str, ...]] = [()]
    with ThreadPoolExecutor(4) as pool:
        while waiting:
            helps = list(pool.map(lambda words: agent_help(*words), waiting))
            listed = list(zip(waiting, helps, strict=True))
            found.update((words, options) for words, (_, options) in listed)
            waiting = [(*words, name) for words, (names, _) in listed for name in names]
    return found


def test_cli_reference_lists_every_command_and_option_agent_help_shows(site: Path) -> None:
    reference = page(site, "cli")
    commands = every_command()
    assert ("lazycloud", "deploy") in commands  # a plugin's command group
    assert len(commands) > 15
    headings = list(re.finditer(r'<h[2-4] id="(?P<id>agent[\w-]*)"', reference))
    sections = {
        found["id"]: reference[found.end() : next_one.start() if next_one else None]
        for found, next_one in zip(headings, [*headings[1:], None], strict=True)
    }
    for words, options in commands.items():
        anchor = "-".join(("agent", *words))
        assert anchor in sections, words
        for option in (option for option in options if option != "--help"):
            shown = re.search(rf"<td><code[^>]*>{re.escape(option)}</code>", sections[anchor])
            assert shown is not None, (words, option)


def test_cli_reference_shows_help_usage_types_and_defaults(site: Path) -> None:
    reference = page(site, "cli")
    run = reference[reference.index('id="agent-run"') : reference.index('id="agent-validate"')]
    assert "Plan a change to a seed project and test it in a sandbox." in run
    assert "Usage: agent run [OPTIONS]" in run
    row = re.search(r"<tr>\s*<td><code[^>]*>--provider-retries</code>.*?</tr>", run, re.S)
    assert row is not None
    assert "integer, 0 to 10" in row[0]
    assert "<code" in row[0]
    assert ">3</code>" in row[0]
    assert "<!-- cli-reference -->" not in reference


def test_quick_start_page_is_the_readmes_own_text(site: Path) -> None:
    readme = (PROJECT / "README.md").read_text()
    quick_start = page(site, "quick-start")
    for line in (
        "export CODING_AGENT_BASE_URL=http://127.0.0.1:11434/v1",
        "uv run --no-dev agent run --seed calculator --plan examples/plans/calculator-fix.json",
        "uv run pytest",
    ):
        assert line in readme
        assert line in re.sub(r"<[^>]+>", "", quick_start)


def test_site_has_search_a_dark_mode_switch_copy_buttons_and_tabs(site: Path) -> None:
    assert (site / "search" / "search_index.json").stat().st_size > 10_000
    overview = (site / "index.html").read_text()
    assert 'data-md-color-scheme="default"' in overview
    assert 'data-md-color-scheme="slate"' in overview
    assert 'aria-label="Dark mode"' in overview
    features = re.search(r'"features": *\[([^]]*)\]', overview)
    assert features is not None
    assert '"content.code.copy"' in features[1]
    assert '"navigation.tabs"' in features[1]

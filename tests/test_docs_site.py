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


def article(html_text: str) -> str:
    """A built page's own content, without the theme's navigation around it."""
    found = re.search(
        r'<article class="md-content__inner md-typeset">(.*?)</article>', html_text, re.S
    )
    assert found is not None
    return found[1]


def test_every_list_of_the_docs_renders_as_a_list(site: Path) -> None:
    # Python-Markdown needs a blank line before a list, and a list item's code block or
    # second paragraph indented by four spaces: otherwise the item's text runs on.
    for html_file in sorted(site.rglob("*.html")):
        content = html_file.read_text()
        for paragraph in re.findall(r"<p>((?:(?!</p>).)*)</p>", content, re.S):
            assert not re.search(r"\n\s*(\d+\.|[-*+]) ", paragraph), (html_file, paragraph)
            assert "<pre" not in paragraph, (html_file, paragraph)
        # An item that announces a code block, closed before the block comes.
        assert not re.search(r":</li>\s*</[ou]l>\s*<div class=\"language-", content), html_file
    steps = article(page(site, "real-repositories"))
    steps = steps[steps.index('id="a-git-seed-step-by-step"') :]
    ordered = re.search(r"<ol>(.*?)</ol>", steps, re.S)
    assert ordered is not None
    items = re.findall(r"<li>(.*?)</li>", ordered[1], re.S)
    starts = [re.sub(r"<[^>]+>", "", item).split()[:3] for item in items]
    assert starts == [["Have", "the", "repository"], ["Make", "a", "folder"], ["Run", "it", "with"]]


def test_wide_code_blocks_wrap_and_leave_room_for_the_copy_button(site: Path) -> None:
    # The theme scrolls a wide block behind a hairline scrollbar, and its copy button covers
    # the end of the first line: a block's lines wrap instead, clear of the button.
    css = re.sub(r"/\*.*?\*/", "", (site / "extra.css").read_text(), flags=re.S)
    rules = dict(re.findall(r"([^{}]+)\{([^}]*)\}", css))
    block = {selector.strip(): body for selector, body in rules.items()}.get(
        ".md-typeset pre > code", ""
    )
    assert re.search(r"white-space:\s*pre-wrap", block)
    assert re.search(r"overflow-wrap:\s*anywhere", block)
    padding = re.search(r"padding-right:\s*([\d.]+)em", block)
    assert padding is not None
    assert float(padding[1]) >= 2.5  # the copy button's 1.5em, its frame and margin
    quick_start = article(page(site, "quick-start"))
    assert "content.code.copy" in (site / "index.html").read_text()
    assert "uv run --no-dev agent run --seed calculator" in re.sub(r"<[^>]+>", "", quick_start)


DIAGRAMS = {
    "index.html": ("planner", "policies", "sandbox", "verdict", "run record"),
    "local-sandbox/index.html": (
        "contract and policies",
        "sandbox walls",
        "guard",
        "trusted test list",
        "output tests",
    ),
    "real-repositories/index.html": ("workspace/", "parse.py", "test_hidden.py", "hidden"),
}


@pytest.mark.parametrize(("name", "labels"), DIAGRAMS.items(), ids=list(DIAGRAMS))
def test_diagrams_are_inline_svg_in_the_themes_colours(
    site: Path, name: str, labels: tuple[str, ...]
) -> None:
    content = article((site / name).read_text())
    (svg,) = re.findall(r'<svg [^>]*class="diagram[^"]*".*?</svg>', content, re.S)
    shown = re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)
    text = " ".join(re.sub(r"<[^>]+>", "", line) for line in shown)
    for label in labels:
        assert label in text, (name, label)
    assert re.search(r"<title[^>]*>\w", svg)  # what a screen reader says
    # Every colour comes from the theme (through extra.css), so a diagram reads the same
    # in light and dark mode; the fixed colours are only fallbacks for GitHub's viewer.
    assert not re.search(r'(fill|stroke|color)="(?!none)', svg)
    style = re.search(r"<style>(.*?)</style>", svg, re.S)
    assert style is not None
    for value in re.findall(r"(?:fill|stroke|--dg-[\w-]+):\s*([^;]+);", style[1]):
        assert value.startswith("var(--d") or value == "none", (name, value)
    css = (site / "extra.css").read_text()
    for variable in ("ink", "muted", "box", "primary"):
        assert re.search(rf"--diagram-{variable}:\s*var\(--md-", css), variable


def test_no_page_of_the_site_uses_mermaid(site: Path) -> None:
    # The theme draws Mermaid with a script from a CDN, which the site never loads.
    for html_file in site.rglob("*.html"):
        assert 'class="mermaid"' not in html_file.read_text(), html_file


class Loads(HTMLParser):
    """Every address a page makes the browser fetch, whatever the element."""

    def __init__(self) -> None:
        super().__init__()
        self.addresses: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None or (tag == "a" and name == "href") or name == "xmlns":
                continue
            if name in ("src", "href", "xlink:href", "data", "poster", "action"):
                self.addresses.append(value)
            elif name in ("srcset", "imagesrcset"):
                self.addresses.extend(part.split()[0] for part in value.split(",") if part.strip())
            elif name == "style":
                self.addresses.extend(re.findall(r"url\(\s*['\"]?([^'\")]+)", value))


def test_no_page_loads_anything_from_another_host(site: Path) -> None:
    for html_file in sorted(site.rglob("*.html")):
        text = html_file.read_text()
        loads = Loads()
        loads.feed(text)
        for style in re.findall(r"<style[^>]*>(.*?)</style>", text, re.S):
            loads.addresses.extend(re.findall(r"url\(\s*['\"]?([^'\")]+)", style))
            assert "@import" not in style, html_file
        elsewhere = [a for a in loads.addresses if urlsplit(a.strip()).netloc or ":" in a]
        assert elsewhere == [], html_file


def test_navigation_is_by_reader_and_the_quick_start_leads_to_troubleshooting(
    site: Path,
) -> None:
    import yaml

    config = yaml.safe_load((PROJECT / "mkdocs.yml").read_text())
    sections = [next(iter(entry)) for entry in config["nav"]]
    assert sections == ["Get started", "Use", "Projects and evaluation", "Extend", "Operate"]
    start = [next(iter(entry.values())) for entry in config["nav"][0]["Get started"]]
    assert start[:2] == ["index.md", "quick-start.md"]
    assert start.index("troubleshooting.md") == start.index("quick-start.md") + 1
    quick_start = article(page(site, "quick-start"))
    first_command = quick_start.index("<pre")
    assert 'href="../troubleshooting/"' in quick_start[:first_command]
    # The home page says where each kind of reader starts, not every page again.
    home = article((site / "index.html").read_text())
    assert len(re.findall(r"<li>", home)) <= 6
    for target in ("quick-start/", "troubleshooting/", "writing-plugins/", "security/"):
        assert f'href="{target}' in home, target

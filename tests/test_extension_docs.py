"""The plugin authors' guide quotes the example package's real files, word for word."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sandboxed_coding_agent.core import errors
from sandboxed_coding_agent.core.errors import ConfigurationError, PlanRejected, ProviderError
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.runs import orchestrator

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


EXCERPT = re.compile(r"<!-- excerpt: (?P<path>\S+) -->\n```\w*\n(?P<text>.*?)```\n", re.S)


def excerpts() -> list[tuple[str, str, str]]:
    return [
        (str(page.relative_to(PROJECT)), m["path"], m["text"])
        for page in sorted((PROJECT / "docs").rglob("*.md"))
        for m in EXCERPT.finditer(page.read_text())
    ]


def test_docs_excerpts_are_lines_of_the_real_file_in_order() -> None:
    assert excerpts()
    for page, path, text in excerpts():
        remaining = (PROJECT / path).read_text().splitlines()
        for line in filter(None, text.splitlines()):
            assert line in remaining, (page, path, line)
            remaining = remaining[remaining.index(line) + 1 :]


def test_readme_points_to_the_guides() -> None:
    readme = (PROJECT / "README.md").read_text()
    assert "docs/writing-plugins.md" in readme
    assert "docs/seed-manifest.md" in readme


def guide_example(name: str, tmp_path: Path) -> ModuleType:
    """The listing after ``<!-- example: NAME -->`` in the guide, imported as a module."""
    (code,) = re.findall(
        rf"<!-- example: {name} -->\n```python\n(.*?)```\n", GUIDE.read_text(), re.S
    )
    path = tmp_path / f"{name}_example.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_guide_planner_replays_a_plan_through_the_host_and_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = PluginHost(entry_points=False, plugins={"replay": guide_example("planner", tmp_path)})
    assert host.problems == []
    planner = host.planner("replay")
    seed = host.seed("calculator")
    fixed = (seed.root / "calculator.py").read_text().replace("left - right", "left + right")
    saved = tmp_path / "fix.json"
    saved.write_text(json.dumps({"files": [{"path": "calculator.py", "content": fixed}]}))
    monkeypatch.setenv("AGENT_REPLAY_PLAN", str(saved))

    result = orchestrator.run(
        seed, runner=host.runner("local"), policies=host.policies_for(seed), planner=planner
    )

    assert result.tests_passed
    assert (result.planner, result.changed_files) == ("replay", ("calculator.py",))
    assert re.fullmatch(r"replay-[0-9a-f]{16}", result.planner_task_id or "")


def test_guide_planner_errors_carry_their_task_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = PluginHost(entry_points=False, plugins={"replay": guide_example("planner", tmp_path)})
    seed = host.seed("calculator")
    request = orchestrator.plan_request(seed, "fix it", seed.read_files())
    planner = host.planner("replay")
    monkeypatch.delenv("AGENT_REPLAY_PLAN", raising=False)
    with pytest.raises(ConfigurationError) as missing:
        planner.plan(request)
    monkeypatch.setenv("AGENT_REPLAY_PLAN", str(tmp_path / "nowhere.json"))
    with pytest.raises(ProviderError) as unreadable:
        planner.plan(request)
    test_file = tmp_path / "test.json"
    test_file.write_text(json.dumps({"files": [{"path": "check_calculator.py", "content": ""}]}))
    monkeypatch.setenv("AGENT_REPLAY_PLAN", str(test_file))
    with pytest.raises(PlanRejected) as rejected:
        planner.plan(request)
    ids = {e.value.planner_task_id for e in (missing, unreadable, rejected)}
    assert len(ids) == 3
    assert all(re.fullmatch(r"replay-[0-9a-f]{16}", str(i)) for i in ids)


def test_core_is_marked_typed_so_plugin_authors_type_checkers_use_its_hints() -> None:
    # PEP 561: without the marker, mypy treats every import from the agent as Any.
    assert (PROJECT / "core" / "py.typed").is_file()
    assert "py.typed" in (PROJECT / "docs" / "writing-plugins.md").read_text()


def test_exit_code_table_of_the_errors_page_is_the_one_the_cli_uses() -> None:
    page = (PROJECT / "docs" / "reference" / "errors.md").read_text()
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| `?(\w+|any other exception)`? \|", page, re.M)
    assert {kind: int(code) for code, kind, _ in rows} == errors.EXIT_CODES
    for _, kind, raised in rows:
        if kind != "internal":
            assert getattr(errors, raised).kind == kind


def test_the_guides_hook_table_lists_every_hook() -> None:
    from sandboxed_coding_agent.core import hookspecs

    guide = (PROJECT / "docs" / "writing-plugins.md").read_text()
    listed = set(re.findall(r"^\| `(register_\w+)\(register\)` \|", guide, re.M))
    hooks = {name for name in dir(hookspecs) if name.startswith("register_")}
    assert listed == hooks


def test_every_page_is_in_the_sites_navigation_and_linked_from_the_readme() -> None:
    docs = PROJECT / "docs"
    pages = {
        str(path.relative_to(docs))
        for path in docs.rglob("*.md")
        if not path.relative_to(docs).parts[0].startswith("_")
    }
    nav = (PROJECT / "mkdocs.yml").read_text()
    readme = (PROJECT / "README.md").read_text()
    assert len(pages) > 15
    for page in sorted(pages):
        assert re.search(rf":\s+{re.escape(page)}\s*$", nav, re.M), f"{page} is not in the nav"
        assert f"(docs/{page}" in readme, f"the README does not link {page}"


def test_the_guides_command_for_the_examples_tests_runs_from_the_clones_root() -> None:
    # From the example's own folder `uv run` would take the example's pyproject.toml for
    # the project, and find no sandboxed-coding-agent to install.
    (command,) = re.findall(r"`(PYTHONPATH=\S+ uv run pytest \S+)`", GUIDE.read_text())
    assert "from the root of the clone" in GUIDE.read_text()
    variable, _, rest = command.partition(" uv run ")
    source = variable.removeprefix("PYTHONPATH=")
    argv = rest.split()
    assert (PROJECT / source / "agent_policy_example" / "__init__.py").is_file()
    assert (PROJECT / argv[-1] / "test_agent_policy_example.py").is_file()
    done = subprocess.run(
        [sys.executable, "-m", *argv, "-q", "-p", "no:cacheprovider"],
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": source},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b7 passed\b", done.stdout)

"""Whatever an installed plugin's objects hold, the listings and ``agent run`` keep working.

A throwaway distribution (a module and its ``.dist-info`` with an entry point, on
``PYTHONPATH``) registers planners, runners and a policy whose descriptions and names
raise when read or shown, are not text, or hold a lone surrogate, a newline or escape
sequences. None of them is in use, so no command may fail because of them.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXED_CALCULATOR, AgentRun, install_plugin, plan_json

RunAgent = Callable[..., AgentRun]

PLUGIN = r"""
import attrs

from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import Finding


class Boom:
    def __str__(self):
        raise RuntimeError("str boom")

    def __repr__(self):
        raise RuntimeError("repr boom")


class Sly(str):
    def __format__(self, spec):
        raise RuntimeError("format boom")

    def __str__(self):
        raise RuntimeError("str boom")


@attrs.frozen
class RaisingDescription:
    name: str = "raising-description"
    description: object = Boom()

    def plan(self, request):
        raise NotImplementedError


class LateRaise:
    reads = 0
    name = "late-raise"

    @property
    def description(self):
        LateRaise.reads += 1
        if LateRaise.reads > 2:
            raise RuntimeError("late boom")
        return "fine at first"

    def plan(self, request):
        raise NotImplementedError


class SlyStrings:
    name = Sly("sly-strings")
    description = Sly("a str whose __str__ and __format__ raise")

    def plan(self, request):
        raise NotImplementedError


@attrs.frozen
class Surrogate:
    name: str = "surrogate"
    description: str = "lone \ud800 surrogate and a byte \udcff"

    def plan(self, request):
        raise NotImplementedError


@attrs.frozen
class NumberDescription:
    name: str = "number-description"
    description: object = 42

    def run_test(self, job):
        raise NotImplementedError


@attrs.frozen
class RaisingPolicy:
    name: str = "raising-policy"
    description: object = Boom()
    activation: str = "off"

    def configure(self, parameters):
        return self

    def check(self, plan, seed):
        return []


@attrs.frozen
class SplitName:
    name: str = "split\nFORGED planner line"
    description: str = "first\nFORGED description line"

    def plan(self, request):
        raise NotImplementedError


@attrs.frozen
class LongDescription:
    name: str = "long-description"
    description: str = "B" * 100_000

    def run_test(self, job):
        raise NotImplementedError


@attrs.frozen
class SplitFinding:
    name: str = "split-finding"
    description: str = "a check whose finding holds line breaks"

    def run(self, context=None):
        return [
            Finding(
                "split\nFORGED item",
                ok=False,
                required=False,
                detail="detail\nFORGED detail line",
                fix="fix\nFORGED fix line",
            )
        ]


@hookimpl
def register_checks(register):
    register(SplitFinding())


@hookimpl
def register_planners(register):
    register(SplitName())
    register(RaisingDescription())
    register(LateRaise())
    register(SlyStrings())
    register(Surrogate())


@hookimpl
def register_runners(register):
    register(NumberDescription())
    register(LongDescription())


@hookimpl
def register_policies(register):
    register(RaisingPolicy())
"""


@pytest.fixture
def hostile_env(tmp_path: Path) -> dict[str, str]:
    """``PYTHONPATH`` for an ``agent`` that finds the distribution ``hostile-plugin`` 0.1."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "hostile_plugin.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    return install_plugin(site, "hostile-plugin", "0.1", {"hostile_plugin": "hostile_plugin"})


def listed(run: AgentRun) -> AgentRun:
    assert run.returncode == 0, run.stderr
    assert "internal error" not in run.stderr
    return run


@pytest.mark.parametrize("command", ["planners", "runners", "plugins", "policies"])
def test_listings_show_a_plugin_whose_descriptions_and_names_raise_or_are_not_text(
    run_agent: RunAgent, hostile_env: dict[str, str], command: str
) -> None:
    text = listed(run_agent(command, "list", env=hostile_env))
    as_json = listed(run_agent(command, "list", "--json", env=hostile_env))

    json.loads(as_json.stdout)  # whole, and valid UTF-8
    if command in ("planners", "plugins"):
        assert "<unavailable: reading it raised RuntimeError>" in text.stdout
        assert "lone \\ud800 surrogate and a byte \\xff" in text.stdout
        assert "fine at first" in text.stdout
        assert "a str whose __str__ and __format__ raise" in text.stdout
    if command in ("runners", "plugins"):
        assert "42" in text.stdout
    if command == "policies":
        assert "raising-policy" in text.stdout


def test_a_run_is_untouched_by_a_plugin_not_in_use_whose_descriptions_raise(
    run_agent: RunAgent, hostile_env: dict[str, str], write_plan: Callable[..., Path]
) -> None:
    plan = write_plan(plan_json(("calculator.py", FIXED_CALCULATOR)))

    run = run_agent("run", "--plan", str(plan), "--seed", "calculator", env=hostile_env)

    assert run.returncode == 0, run.stderr
    assert "tests passed (test exit code: 0)" in run.stdout


@pytest.mark.parametrize("command", ["planners", "runners", "plugins", "policies"])
def test_listings_keep_a_plugins_names_and_descriptions_on_their_own_lines(
    run_agent: RunAgent, hostile_env: dict[str, str], command: str
) -> None:
    text = listed(run_agent(command, "list", env=hostile_env))

    assert not [line for line in text.stdout.splitlines() if line.startswith("FORGED")]
    if command in ("planners", "plugins"):
        assert "split\\nFORGED planner line" in text.stdout
        assert "first\\nFORGED description line" in text.stdout
    if command in ("runners", "plugins"):
        assert "B" * 1000 + "..." in text.stdout
        assert "B" * 1001 not in text.stdout


def test_doctor_keeps_a_findings_item_detail_and_fix_on_their_lines(
    run_agent: RunAgent, hostile_env: dict[str, str]
) -> None:
    run = run_agent("doctor", "--no-planner", env=hostile_env)

    assert "internal error" not in run.stderr
    assert "split\\nFORGED item" in run.stdout
    assert "detail\\nFORGED detail line" in run.stdout
    assert "fix\\nFORGED fix line" in run.stdout
    assert not [line for line in run.stdout.splitlines() if line.startswith("FORGED")]


def test_seeds_show_keeps_a_folder_name_with_a_line_break_on_its_lines(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    folder = tmp_path / "seed\nFORGED line"
    folder.mkdir()
    (folder / "calculator.py").write_text(FIXED_CALCULATOR, encoding="utf-8")
    (folder / "check_calculator.py").write_text("import calculator\n", encoding="utf-8")
    (folder / "seed.toml").write_text(
        textwrap.dedent(
            """\
            name = "split"
            description = "a seed in a folder whose name holds a line break"
            files = ["*.py"]
            tests = ["check_*.py"]
            editable = ["calculator.py"]
            test_command = ["python", "check_calculator.py"]
            default_prompt = "Fix add."
            """
        ),
        encoding="utf-8",
    )

    run = run_agent("seeds", "show", str(folder))

    assert run.returncode == 0, run.stderr
    assert f"root:           {tmp_path}/seed\\nFORGED line\n" in run.stdout
    assert not [line for line in run.stdout.splitlines() if line.startswith("FORGED")]

"""The testing API for extension authors (``core.testing``): the example plugin's own tests
use it, and it loads a module or an installed distribution as the agent does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from conftest import install_plugin

from sandboxed_coding_agent.core.errors import PlanRejected
from sandboxed_coding_agent.core.testing import (
    PluginProblem,
    load_distribution,
    load_plugin,
    patch,
)

PROJECT = Path(__file__).resolve().parents[1]
EXAMPLE = PROJECT / "examples" / "agent-policy-example"

POLICY = """
from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.hookspecs import hookimpl


class NoTodo:
    name = "no-todo"
    description = "rejects a TODO"
    activation = "off"

    def configure(self, parameters):
        raise ValueError(f"no parameters, not {sorted(parameters)}")

    def check(self, plan, seed):
        return [
            Rejection(policy=self.name, rule="todo", message="a TODO", path=entry.path)
            for entry in plan.files
            if "TODO" in entry.content
        ]


@hookimpl
def register_policies(register):
    register(NoTodo())
"""


def module(name: str, code: str, tmp_path: Path) -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(code))
    compiled = ModuleType(name)
    compiled.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), compiled.__dict__)
    return compiled


def test_example_plugins_own_tests_pass_with_the_testing_api() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        env={**os.environ, "PYTHONPATH": str(EXAMPLE / "src")},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout
    assert (
        "from sandboxed_coding_agent.core.testing import"
        in (EXAMPLE / "tests" / "test_agent_policy_example.py").read_text()
    )


def test_a_plugin_that_does_not_load_cleanly_is_a_problem_naming_it(tmp_path: Path) -> None:
    misspelt = module(
        "misspelt", POLICY.replace("def register_policies", "def register_policy"), tmp_path
    )

    with pytest.raises(PluginProblem, match=r"misspelt.*register_policy.*register_policies"):
        load_plugin(misspelt)
    assert load_plugin(misspelt, strict=False).problems


def test_check_plan_switches_a_policy_on_and_runs_it_with_the_contract(tmp_path: Path) -> None:
    plugin = load_plugin(module("no_todo", POLICY, tmp_path))
    seed = plugin.seed("calculator")
    todo = patch(("calculator.py", "# TODO\n"), ("../escape.py", ""))

    assert list(plugin.policies) == ["no-todo"]
    assert (plugin.planners, plugin.runners, plugin.seeds) == ({}, {}, {})
    assert [r.rule for r in plugin.check_plan(todo, seed)] == [
        "path-segment",
        "path-not-editable",
    ]
    rules = [r.rule for r in plugin.check_plan(todo, seed, policies=["no-todo"])]
    assert rules == ["path-segment", "path-not-editable", "todo"]


def test_run_plan_refuses_a_plan_a_policy_rejects_before_any_sandbox(tmp_path: Path) -> None:
    plugin = load_plugin(module("no_todo", POLICY, tmp_path))

    with pytest.raises(PlanRejected, match="no-todo:todo"):
        plugin.run_plan(
            plugin.seed("calculator"), patch(("calculator.py", "# TODO\n")), policies=["no-todo"]
        )


def test_load_distribution_loads_an_installed_plugin_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "no_todo_plugin.py").write_text(POLICY)
    install_plugin(site, "no-todo-plugin", "1.0", {"no_todo": "no_todo_plugin"})
    monkeypatch.syspath_prepend(str(site))

    plugin = load_distribution("no-todo-plugin")

    assert plugin.names == ("no_todo",)
    assert list(plugin.policies) == ["no-todo"]
    with pytest.raises(PluginProblem, match="no distribution 'not-installed-here'"):
        load_distribution("not-installed-here")

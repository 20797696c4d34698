"""What the CLI shows about installed plugins: planners, runners, descriptions, names, policies.

A throwaway distribution (a module and its ``.dist-info`` with an entry point,
on ``PYTHONPATH``) is installed for the real ``agent``, as pip would lay it out:
it registers a planner, a runner that says it is no sandbox, an on-by-default
policy, a policy whose name breaks the convention, and a doctor check.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun, install_plugin

RunAgent = Callable[..., AgentRun]

PLUGIN = """
from collections.abc import Callable

import attrs

from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import Finding


@attrs.frozen
class Echo:
    name: str = "echo-plan"
    description: str = "answers with the plan in ECHO_PLAN, for tests"

    def plan(self, request):
        raise NotImplementedError


@attrs.frozen
class HostRunner:
    name: str = "on-host"
    description: str = "UNSAFE: runs the test on this machine, without any sandbox"

    def run_test(self, job):
        raise NotImplementedError


@attrs.frozen
class NoTodo:
    name: str = "no-todo"
    description: str = "rejects a TODO left in a file"
    activation: str = "on"

    def configure(self, parameters):
        raise ValueError("no parameters")

    def check(self, plan, seed):
        return []


@attrs.frozen
class BadlyNamed(NoTodo):
    name: str = "Bad_Name"
    activation: str = "off"


@attrs.frozen
class Credentials:
    name: str = "listing-credentials"
    description: str = "the echo planner's credentials"

    def run(self, context=None):
        planner = None if context is None else context.planner
        runner = None if context is None else context.runner
        return [
            Finding(
                "echo credentials",
                ok=False,
                detail=f"ECHO_PLAN is not set (context planner={planner} runner={runner})",
                fix="export ECHO_PLAN",
            )
        ]


@hookimpl
def register_planners(register):
    register(Echo())


@hookimpl
def register_runners(register):
    register(HostRunner())


@hookimpl
def register_policies(register):
    register(NoTodo())
    register(BadlyNamed())


@hookimpl
def register_checks(register):
    register(Credentials())
"""


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """``PYTHONPATH`` for an ``agent`` that finds the distribution ``listing-plugin`` 0.3."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "listing_plugin.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    return install_plugin(site, "listing-plugin", "0.3", {"listing_plugin": "listing_plugin"})


def test_planners_list_shows_every_planner_with_its_plugin_and_distribution(
    run_agent: RunAgent, plugin_env: dict[str, str]
) -> None:
    text = run_agent("planners", "list", env=plugin_env)
    listed = run_agent("planners", "list", "--json", env=plugin_env)

    assert text.returncode == 0, text.stderr
    assert "openai  (default; plugin 'openai_planner' (sandboxed-coding-agent " in text.stdout
    assert "echo-plan  (plugin 'listing_plugin' (listing-plugin 0.3))" in text.stdout
    assert "  answers with the plan in ECHO_PLAN, for tests" in text.stdout
    assert "Select one with: agent run --planner NAME" in text.stdout
    rows = {row["name"]: row for row in listed.json()}
    assert rows["echo-plan"] == {
        "name": "echo-plan",
        "description": "answers with the plan in ECHO_PLAN, for tests",
        "default": False,
        "plugin": "listing_plugin",
        "distribution": "listing-plugin",
        "version": "0.3",
    }
    assert rows["openai"]["default"] is True


def test_runners_list_shows_a_runner_saying_it_is_no_sandbox(
    run_agent: RunAgent, plugin_env: dict[str, str]
) -> None:
    text = run_agent("runners", "list", env=plugin_env)
    listed = run_agent("runners", "list", "--json", env=plugin_env)

    assert text.returncode == 0, text.stderr
    assert "local  (default; plugin 'local_sandbox' (sandboxed-coding-agent " in text.stdout
    assert "on-host  (plugin 'listing_plugin' (listing-plugin 0.3))\n" in text.stdout
    assert "  UNSAFE: runs the test on this machine, without any sandbox" in text.stdout
    assert [row["name"] for row in listed.json()] == ["local", "lazycloud", "on-host"]


def test_plugins_list_shows_what_each_plugin_registers_with_descriptions(
    run_agent: RunAgent, plugin_env: dict[str, str]
) -> None:
    text = run_agent("plugins", "list", env=plugin_env)
    listed = run_agent("plugins", "list", "--json", env=plugin_env)

    assert text.returncode == 0, text.stderr
    assert "  planner openai: OpenAI-compatible chat completions" in text.stdout
    assert "  runner local: bubblewrap on this machine" in text.stdout
    assert "  runner on-host: UNSAFE: runs the test on this machine" in text.stdout
    assert "  policy no-todo: rejects a TODO left in a file" in text.stdout
    (info,) = [row for row in listed.json() if row["name"] == "listing_plugin"]
    assert {"kind": "runner", "name": "on-host", "description": HOST_RUNNER} in info["provides"]


HOST_RUNNER = "UNSAFE: runs the test on this machine, without any sandbox"


def test_plugins_list_notes_a_name_off_the_convention_and_keeps_it(
    run_agent: RunAgent, plugin_env: dict[str, str]
) -> None:
    text = run_agent("plugins", "list", env=plugin_env)
    policies = run_agent("policies", "list", env=plugin_env)

    assert (
        "  note: policy 'Bad_Name' is not lower case words joined by '-' "
        "(by convention 'bad-name')" in text.stdout
    )
    assert "Bad_Name  (off by default; " in policies.stdout
    # The built-in names keep the convention: no note for them.
    assert text.stdout.count("note:") == 1


def test_seeds_show_lists_an_on_by_default_policy_of_another_plugin(
    run_agent: RunAgent, plugin_env: dict[str, str]
) -> None:
    text = run_agent("seeds", "show", "calculator", env=plugin_env)
    shown = run_agent("seeds", "show", "calculator", "--json", env=plugin_env)
    without = run_agent("seeds", "show", "calculator")

    assert text.returncode == 0, text.stderr
    assert "policies:       patch-contract (always); no-todo (default)\n" in text.stdout
    assert "none switched on" not in text.stdout
    assert shown.json()["applied_policies"] == [
        {"name": "patch-contract", "why": "always", "parameters": {}},
        {"name": "no-todo", "why": "default", "parameters": {}},
    ]
    assert "policies:       patch-contract (always)\n" in without.stdout


def test_seeds_show_gives_the_seeds_own_policies_with_their_parameters(
    tmp_path: Path, run_agent: RunAgent
) -> None:
    folder = tmp_path / "seed"
    folder.mkdir()
    (folder / "code.py").write_text("x = 1\n", encoding="utf-8")
    (folder / "test_code.py").write_text("", encoding="utf-8")
    (folder / "seed.toml").write_text(
        'name = "shown"\ndescription = "d"\ntests = ["test_*.py"]\neditable = ["code.py"]\n'
        'test_command = ["python", "test_code.py"]\ndefault_prompt = "p"\n'
        '[policies.python-ast]\nalso_forbid = ["shutil"]\n',
        encoding="utf-8",
    )

    text = run_agent("seeds", "show", str(folder))

    assert (
        'policies:       patch-contract (always); python-ast (seed) {"also_forbid": ["shutil"]}'
        in text.stdout
    )


def test_seeds_show_says_the_editable_files_once_and_the_patterns_when_they_differ(
    tmp_path: Path, run_agent: RunAgent
) -> None:
    folder = tmp_path / "seed"
    (folder / "src").mkdir(parents=True)
    for name in ("a.py", "b.py"):
        (folder / "src" / name).write_text("x = 1\n", encoding="utf-8")
    (folder / "test_code.py").write_text("", encoding="utf-8")
    (folder / "seed.toml").write_text(
        'name = "patterns"\ndescription = "d"\ntests = ["test_*.py"]\neditable = ["src/*.py"]\n'
        'test_command = ["python", "test_code.py"]\ndefault_prompt = "p"\n',
        encoding="utf-8",
    )

    calculator = run_agent("seeds", "show", "calculator").stdout
    patterns = run_agent("seeds", "show", str(folder)).stdout

    assert "editable:       calculator.py\n" in calculator
    assert "editable files:" not in calculator
    assert "editable:       src/*.py (as the seed gives them)\n" in patterns
    assert "editable files: src/a.py, src/b.py\n" in patterns


# --- agent doctor for the planner and runner in use -----------------------------------------

NO_PROVIDER = {"CODING_AGENT_BASE_URL": "", "CODING_AGENT_MODEL": "", "CODING_AGENT_API_KEY": ""}


def test_doctor_for_plan_files_only_needs_no_provider_variables(run_agent: RunAgent) -> None:
    named = run_agent("doctor", "--planner", "openai", env=NO_PROVIDER)
    plan_files_only = run_agent("doctor", "--no-planner", "--json", env=NO_PROVIDER)

    assert named.returncode == 2, named.stdout
    assert "FAIL  provider variables" in named.stdout
    assert plan_files_only.returncode == 0, plan_files_only.stdout
    report = plan_files_only.json()
    assert (report["ready"], report["planner"], report["runner"]) == (True, None, "local")
    (provider,) = [f for f in report["findings"] if f["item"] == "provider variables"]
    assert provider["ok"] is False
    assert provider["required"] is False
    unused = "(not needed: planner 'openai' and planner 'explore' not in use)"
    assert provider["detail"].endswith(unused)


def test_doctor_with_a_plugin_planner_requires_its_items_and_not_openais(
    run_agent: RunAgent, plugin_env: dict[str, str]
) -> None:
    run = run_agent("doctor", "--planner", "echo-plan", env={**plugin_env, **NO_PROVIDER})

    assert run.returncode == 2, run.stdout
    assert "WARN  provider variables" in run.stdout
    assert "(not needed: planner 'openai' and planner 'explore' not in use)" in run.stdout
    assert "FAIL  echo credentials" in run.stdout
    assert "not ready: 1 required item(s) failed" in run.stdout


def test_a_check_that_takes_the_context_is_told_the_planner_and_runner_in_use(
    run_agent: RunAgent, plugin_env: dict[str, str]
) -> None:
    chosen = run_agent("doctor", "--planner", "echo-plan", "--runner", "on-host", env=plugin_env)
    default = run_agent("doctor", "--json", env=plugin_env)

    assert "(context planner=echo-plan runner=on-host)" in chosen.stdout
    (echo,) = [f for f in default.json()["findings"] if f["item"] == "echo credentials"]
    # Neither the plugin's planner nor its runner is in use: information, not a failure.
    assert echo["detail"] == (
        "ECHO_PLAN is not set (context planner=openai runner=local) "
        "(not needed: planner 'echo-plan' and runner 'on-host' not in use)"
    )
    assert echo["required"] is False


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--planner", "nope"], "unknown planner 'nope' (known: explore, lazycloud, openai; "),
        (["--runner", "nope"], "unknown runner 'nope' (known: lazycloud, local; "),
        (["--planner", "lazycloud", "--no-planner"], "give either --planner NAME or --no-planner"),
    ],
)
def test_doctor_refuses_a_planner_or_runner_it_cannot_check_for(
    run_agent: RunAgent, arguments: list[str], message: str
) -> None:
    run = run_agent("doctor", *arguments)

    assert run.returncode == 2
    assert f"agent: usage error: {message}" in run.stderr

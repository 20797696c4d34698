"""Which policies check a plan: activation, a seed's ``policies``, ``--policy`` and ``--no-policy``.

The host is given small policy plugins directly (``PluginHost(plugins=...)``,
as a program embedding the agent would) to cover every activation; the CLI
tests use the built-in policies and a folder seed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from conftest import AgentRun

from sandboxed_coding_agent.core.errors import Rejection, UsageError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PatchPlan, SeedProject
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.serialization import structure
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

SEED = calculator_seed()


@attrs.frozen
class Counted:
    """A policy whose parameter is structured with the project's strict cattrs converter."""

    name: str
    activation: str
    description: str = "test policy"
    limit: int = 1

    def configure(self, parameters: Mapping[str, Any]) -> Counted:
        return structure({**attrs.asdict(self), **parameters}, Counted)

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterator[Rejection]:
        return iter(())


class Raising(Counted):
    def configure(self, parameters: Mapping[str, Any]) -> Counted:
        raise KeyError("boom")


def host_with(*policies: object) -> PluginHost:
    @hookimpl
    def register_policies(register: Callable[[object], None]) -> None:
        for policy in policies:
            register(policy)

    plugin = SimpleNamespace(register_policies=register_policies)
    return PluginHost(entry_points=False, plugins={"test_policies": plugin})


HOST = host_with(
    Counted("default-on", "on"), Counted("default-off", "off"), Raising("raising", "off")
)


def names(host: PluginHost, seed: SeedProject = SEED, **switches: Any) -> list[str]:
    return [policy.name for policy in host.policies_for(seed, **switches)]


def test_always_and_on_policies_run_unless_switched_off() -> None:
    assert names(HOST) == ["patch-contract", "default-on"]
    assert names(HOST, switch_off=["default-on"]) == ["patch-contract"]


def test_off_policies_run_when_the_user_or_the_seed_switches_them_on() -> None:
    assert names(HOST, switch_on=["default-off"]) == ["patch-contract", "default-on", "default-off"]
    seed = attrs.evolve(SEED, policies={"default-off": {}})
    assert names(HOST, seed) == ["patch-contract", "default-on", "default-off"]
    # The user's --no-policy wins over the seed.
    assert names(HOST, seed, switch_off=["default-off"]) == ["patch-contract", "default-on"]


def test_seed_parameters_configure_a_copy_of_the_policy() -> None:
    seed = attrs.evolve(SEED, policies={"default-off": {"limit": 7}})
    (configured,) = [p for p in HOST.policies_for(seed) if p.name == "default-off"]
    assert isinstance(configured, Counted)
    assert configured.limit == 7
    assert HOST.policy("default-off") == Counted("default-off", "off")


@pytest.mark.parametrize(
    ("switches", "policies", "message"),
    [
        ({"switch_off": ["patch-contract"]}, {}, "policy 'patch-contract' cannot be switched off"),
        ({"switch_on": ["nope"]}, {}, "unknown policy 'nope' (known: default-off, default-on,"),
        ({}, {"nope": {}}, "unknown policy 'nope'"),
        (
            {"switch_on": ["default-off"], "switch_off": ["default-off"]},
            {},
            "policy 'default-off' is both switched on and off",
        ),
        (
            {},
            {"default-off": {"limit": "many"}},
            "policy 'default-off' refused its parameters: expected an integer, got str "
            "@ parameters.limit",
        ),
        (
            {},
            {"default-off": {"limits": 2}},
            "policy 'default-off' refused its parameters: "
            'unknown key "limits" (did you mean "limit"?) @ parameters',
        ),
        ({}, {"raising": {"x": 1}}, "policy 'raising' refused its parameters: KeyError: 'boom'"),
        ({}, {"patch-contract": {"max_files": 9}}, "the patch contract takes no parameters"),
    ],
)
def test_impossible_policy_choices_are_usage_errors(
    switches: dict[str, Any], policies: dict[str, Any], message: str
) -> None:
    seed = attrs.evolve(SEED, policies=policies)
    with pytest.raises(UsageError) as caught:
        HOST.policies_for(seed, **switches)
    assert message in caught.value.message


def test_policies_given_to_the_host_are_listed_with_their_origin() -> None:
    (info,) = [i for i in HOST.plugin_infos() if i.name == "test_policies"]
    assert info.kinds == ("policy",)
    assert info.distribution == "given to PluginHost"
    assert HOST.describe("test_policies") == "plugin 'test_policies' (given to PluginHost)"


CHEAT_SEED = textwrap.dedent(
    """\
    name = "guarded"
    description = "the calculator, with the python-ast policy switched on"
    tests = ["check_*.py"]
    editable = ["calculator.py"]
    test_command = ["python", "-m", "unittest", "check_calculator"]
    default_prompt = "Fix add."

    [policies.python-ast]
    """
)


@pytest.fixture
def guarded_seed(tmp_path: Path) -> Path:
    root = tmp_path / "guarded"
    root.mkdir()
    for path in SEED.files:
        (root / path).write_bytes((SEED.root / path).read_bytes())
    (root / "seed.toml").write_text(CHEAT_SEED)
    return root


def test_seed_manifest_switches_a_policy_on_and_the_user_can_switch_it_off(
    guarded_seed: Path,
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[[Any], Path],
) -> None:
    cheat = write_plan(
        {"files": [{"path": "calculator.py", "content": "import sys\nsys.exit()\n"}]}
    )
    run = run_agent("validate", str(cheat), "--seed", str(guarded_seed))
    assert run.returncode == 4, run.stderr
    assert "[python-ast:forbidden-name] (calculator.py) line 2: uses sys.exit" in run.stdout
    run = run_agent(
        "validate", str(cheat), "--seed", str(guarded_seed), "--no-policy", "python-ast"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run_agent("validate", str(cheat), "--seed", "calculator").returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--policy", "nope"), "usage error: unknown policy 'nope'"),
        (("--no-policy", "patch-contract"), "usage error: policy 'patch-contract' cannot be"),
        (
            ("--policy", "python-ast", "--no-policy", "python-ast"),
            "usage error: policy 'python-ast' is both switched on and off",
        ),
    ],
)
def test_bad_policy_switches_are_one_line_and_exit_2(
    args: tuple[str, ...],
    message: str,
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[[Any], Path],
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": "x = 1\n"}]})
    for command in (["run", "--plan", str(plan)], ["validate", str(plan)]):
        run = run_agent(*command, *args)
        assert run.returncode == 2, (command, run.stderr)
        (line,) = run.stderr.strip().splitlines()
        assert line.startswith(f"agent: {message}"), line

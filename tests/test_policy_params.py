"""Policy parameters from the command line (``--policy-param NAME.KEY=VALUE``) and declared ones.

The CLI tests run the real ``agent`` with the built-in ``python-ast`` policy
(which declares its parameters) and folder seeds; the host tests give
``PluginHost`` small policy plugins directly, to cover what the built-ins do not
(an ``int`` parameter, a required one, a policy that declares nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import attrs
import pytest
from conftest import FIXED_CALCULATOR, AgentRun

from sandboxed_coding_agent.core.errors import Rejection, UsageError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PatchPlan, SeedProject
from sandboxed_coding_agent.core.plans import policy_parameters
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.protocols import PolicyParameter
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]
WritePlan = Callable[[Any], Path]

SEED = calculator_seed()
USES_SHUTIL = "import shutil\n\n" + FIXED_CALCULATOR
USES_GLOB = "import glob\n\n" + FIXED_CALCULATOR


def plan_with(content: str) -> dict[str, Any]:
    return {"files": [{"path": "calculator.py", "content": content}]}


# --- the command line -----------------------------------------------------------------------


def test_policy_param_switches_the_policy_on_with_its_parameter(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    plan = write_plan(plan_with(USES_SHUTIL))

    off = run_agent("validate", str(plan))
    on = run_agent(
        "validate", str(plan), "--json", "--policy-param", 'python-ast.also_forbid=["shutil"]'
    )

    assert off.returncode == 0, off.stderr
    assert on.returncode == 4, on.stderr
    (rejection,) = on.json()["rejections"]
    assert (rejection["policy"], rejection["rule"]) == ("python-ast", "forbidden-import")
    assert "entry 'shutil'" in rejection["message"]


def test_run_takes_policy_params_and_a_rejected_plan_reaches_no_sandbox(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    plan = write_plan(plan_with(USES_SHUTIL))

    run = run_agent(
        "run", "--plan", str(plan), "--policy-param", 'python-ast.also_forbid=["shutil"]'
    )

    assert run.returncode == 4, run.stderr
    assert "[python-ast:forbidden-import] (calculator.py)" in run.stderr
    assert run.sandboxes == []


def folder_seed(tmp_path: Path, policies: str) -> Path:
    folder = tmp_path / "seed"
    folder.mkdir()
    for name in ("calculator.py", "check_calculator.py"):
        (folder / name).write_bytes((SEED.root / name).read_bytes())
    (folder / "seed.toml").write_text(
        'name = "params"\ndescription = "calculator"\ntests = ["check_*.py"]\n'
        'editable = ["calculator.py"]\ntest_command = ["python", "check_calculator.py"]\n'
        'default_prompt = "Fix add."\n' + policies,
        encoding="utf-8",
    )
    return folder


def test_command_line_parameters_override_the_seeds_key_by_key(
    tmp_path: Path, run_agent: RunAgent, write_plan: WritePlan
) -> None:
    folder = folder_seed(tmp_path, '[policies.python-ast]\nalso_forbid = ["shutil"]\n')
    shutil_plan = write_plan(plan_with(USES_SHUTIL))
    glob_plan = write_plan(plan_with(USES_GLOB))
    given = ("--seed", str(folder), "--policy-param", 'python-ast.also_forbid=["glob"]')

    seed_only = run_agent("validate", "--seed", str(folder), str(shutil_plan))
    with_param = run_agent("validate", *given, str(shutil_plan), str(glob_plan))

    assert seed_only.returncode == 4, seed_only.stderr
    assert with_param.returncode == 4, with_param.stderr
    assert f"ok {shutil_plan}" in with_param.stdout
    assert f"rejected {glob_plan}" in with_param.stdout


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        (
            "python-ast.paths=3",
            "policy 'python-ast': parameter 'paths' must be a list of strings (list[str]), "
            "not 3 (an integer)",
        ),
        (
            'python-ast.paths=["*.py", 4]',
            "policy 'python-ast': parameter 'paths' must be a list of strings (list[str]), "
            'not ["*.py", 4] (item 1 is an integer)',
        ),
        (
            'python-ast.path=["*.py"]',
            "policy 'python-ast' has no parameter 'path' "
            "(did you mean 'paths'? its parameters: forbid, also_forbid, allow, paths)",
        ),
        ("nope.limit=1", "unknown policy 'nope'"),
    ],
    ids=["wrong-type", "wrong-item", "unknown-key", "unknown-policy"],
)
def test_a_bad_parameter_is_one_message_naming_policy_key_type_and_value(
    run_agent: RunAgent, write_plan: WritePlan, argument: str, message: str
) -> None:
    plan = write_plan(plan_with(FIXED_CALCULATOR))

    run = run_agent("validate", str(plan), "--policy-param", argument)

    assert run.returncode == 2, run.stderr
    assert f"agent: usage error: {message}" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_seed_file_parameters_go_through_the_same_check(
    tmp_path: Path, run_agent: RunAgent
) -> None:
    folder = folder_seed(tmp_path, "\n[policies.python-ast]\npaths = 3\n")

    run = run_agent("seeds", "show", str(folder))

    assert run.returncode == 2, run.stderr
    assert "seed.toml: line 8: policies.python-ast: policy 'python-ast': parameter 'paths' " in (
        run.stderr
    )
    assert "must be a list of strings (list[str]), not 3 (an integer)" in run.stderr


def test_policy_param_and_no_policy_for_one_policy_is_refused(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    plan = write_plan(plan_with(FIXED_CALCULATOR))

    run = run_agent(
        "validate", str(plan), "--policy-param", "python-ast.paths=[]", "--no-policy", "python-ast"
    )

    assert run.returncode == 2
    assert "policy 'python-ast' is both given parameters and switched off" in run.stderr


HOSTILE = [
    "",
    "=",
    ".",
    "..=.",
    "python-ast",
    "python-ast.paths",
    "paths=[]",
    ".paths=[]",
    "python-ast.=[]",
    "python-ast.paths=",
    "python-ast.paths=abc",
    "python-ast.paths=[",
    'python-ast.paths=["a"]\nforbid = []',
    'python-ast.paths=["\x1b[2J"]',
    "python-ast.pa\x01ths=[]",
    "python-ast.paths=" + "[" * 5000 + "]" * 5000,
    "python-ast.paths=" + "[" * 20 + "]" * 20,
    'python-ast.paths=["' + "a" * 70_000 + '"]',
    "python-ast.pa ths=[]",
    "python-ast.paths=[] trailing",
    "python ast.paths=[]",
    "python-ast\t.paths=[]",
    "x" * 60_000 + ".paths=[]",
]


@pytest.mark.parametrize("argument", HOSTILE, ids=range(len(HOSTILE)))
def test_a_malformed_policy_param_is_a_usage_error_never_a_traceback(
    run_agent: RunAgent, write_plan: WritePlan, argument: str
) -> None:
    plan = write_plan(plan_with(FIXED_CALCULATOR))

    run = run_agent("validate", str(plan), "--json", "--policy-param", argument)

    assert run.returncode == 2, run.stderr
    assert run.json()["error"]["kind"] == "usage"
    assert "--policy-param" in run.stderr
    assert "Traceback" not in run.stderr
    assert "internal" not in run.stderr
    # Nothing the argument held reaches the terminal unescaped, and the message stays short.
    assert "\x1b" not in run.stderr
    assert "\x01" not in run.stderr
    assert len(run.stderr) < 1000


def test_a_policy_param_that_is_not_utf8_is_a_usage_error(
    run_agent: RunAgent, write_plan: WritePlan
) -> None:
    plan = write_plan(plan_with(FIXED_CALCULATOR))

    run = run_agent("validate", str(plan), "--policy-param", 'python-ast.paths=["\udcff"]')

    assert run.returncode == 2, run.stderr
    assert "not valid UTF-8 text" in run.stderr


def test_policies_list_shows_declared_parameters(run_agent: RunAgent) -> None:
    text = run_agent("policies", "list")
    listed = run_agent("policies", "list", "--json")

    assert "parameters (--policy-param python-ast.KEY=VALUE):" in text.stdout
    assert 'paths        list[str]  which files of a plan to check (default ["**/*.py"])' in (
        text.stdout
    )
    rows = {row["name"]: row for row in listed.json()}
    assert rows["patch-contract"]["parameters"] is None
    paths = rows["python-ast"]["parameters"][-1]
    assert paths == {
        "name": "paths",
        "type": "list[str]",
        "default": ["**/*.py"],
        "required": False,
        "description": "which files of a plan to check",
    }


# --- the host -------------------------------------------------------------------------------


@attrs.frozen
class Declared:
    """A policy declaring an ``int``, a required ``str`` and a ``float``."""

    name: str = "declared"
    activation: str = "off"
    description: str = "test policy"
    seen: tuple[tuple[str, Any], ...] = ()
    parameters: ClassVar[tuple[PolicyParameter, ...]] = (
        PolicyParameter("max_lines", "int", "most lines", 20),
        PolicyParameter("label", "str", "what to call it", required=True),
        PolicyParameter("ratio", "float", "a share", 0.5),
    )

    def configure(self, parameters: Mapping[str, Any]) -> Declared:
        return attrs.evolve(self, seen=tuple(sorted(parameters.items())))

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterator[Rejection]:
        return iter(())


@attrs.frozen
class Undeclared:
    """A policy that declares nothing: whatever it is given reaches its configure."""

    name: str = "undeclared"
    activation: str = "off"
    description: str = "test policy"
    seen: tuple[tuple[str, Any], ...] = ()

    def configure(self, parameters: Mapping[str, Any]) -> Undeclared:
        return attrs.evolve(self, seen=tuple(sorted(parameters.items())))

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterator[Rejection]:
        return iter(())


def host_with(*policies: object) -> PluginHost:
    @hookimpl
    def register_policies(register: Callable[[object], None]) -> None:
        for policy in policies:
            register(policy)

    plugin = SimpleNamespace(register_policies=register_policies)
    return PluginHost(entry_points=False, plugins={"test_policies": plugin})


HOST = host_with(Declared(), Undeclared())


def configured(name: str, given: Mapping[str, Any]) -> Any:
    (policy,) = [p for p in HOST.policies_for(SEED, parameters={name: given}) if p.name == name]
    return policy


@pytest.mark.parametrize(
    ("value", "shown"),
    [(True, "true (a boolean)"), ("20", '"20" (a string)'), (2.5, "2.5 (a number)")],
)
def test_an_int_parameter_refuses_a_bool_a_string_and_a_float(value: Any, shown: str) -> None:
    with pytest.raises(UsageError) as caught:
        configured("declared", {"label": "x", "max_lines": value})

    assert caught.value.message == (
        f"policy 'declared': parameter 'max_lines' must be an integer (int), not {shown}"
    )


def test_a_float_parameter_takes_an_integer_but_not_a_bool() -> None:
    assert configured("declared", {"label": "x", "ratio": 1}).seen == (("label", "x"), ("ratio", 1))
    with pytest.raises(UsageError, match=r"'ratio' must be a number \(float\), not false"):
        configured("declared", {"label": "x", "ratio": False})


def test_a_missing_required_parameter_is_named_before_configure() -> None:
    with pytest.raises(UsageError) as caught:
        HOST.policies_for(SEED, switch_on=["declared"])

    assert caught.value.message.startswith(
        "policy 'declared' needs parameter 'label' (a string: what to call it); give it in "
        "the seed's [policies.declared] table or with --policy-param declared.label=VALUE"
    )


def test_parameters_from_the_command_line_reach_configure_as_toml_values() -> None:
    given = policy_parameters.parse_assignments(
        ["declared.label='fine'", "declared.max_lines=40", "declared.ratio=0.25"]
    )

    policy = HOST.policies_for(SEED, parameters=given)[-1]

    assert policy.seen == (("label", "fine"), ("max_lines", 40), ("ratio", 0.25))


def test_an_undeclared_policy_still_gets_every_parameter() -> None:
    given = {"anything": [1, "two"], "flag": True}

    assert configured("undeclared", given).seen == (("anything", [1, "two"]), ("flag", True))


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        ("max_lines", "parameters must be a tuple of PolicyParameter, not str"),
        (("max_lines",), "parameters must be a tuple of PolicyParameter, and one is str"),
        (
            (PolicyParameter("a", "int"), PolicyParameter("a", "str")),
            "parameter 'a' is declared twice",
        ),
        ((PolicyParameter("a", "int", default="x"),), "has a default that is not an integer"),
    ],
)
def test_a_malformed_declaration_leaves_the_policy_out_with_a_warning(
    declared: object, problem: str
) -> None:
    @attrs.frozen
    class Malformed(Undeclared):
        name: str = "malformed"
        parameters: object = declared

    host = host_with(Malformed())

    assert "malformed" not in host.policies
    (warning,) = host.problems
    assert "registered policy 'malformed' whose " in warning
    assert problem in warning


def test_the_parser_splits_at_the_last_dot_before_the_equals_sign() -> None:
    assert policy_parameters.parse_assignment("team.rules.limit = 3 # comment") == (
        "team.rules",
        "limit",
        3,
    )
    assert policy_parameters.parse_assignment('x.k="a=b.c"') == ("x", "k", "a=b.c")


def test_a_key_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match=r"x\.k is given twice"):
        policy_parameters.parse_assignments(["x.k=1", "x.k=2"])


# --- numbers a run record cannot hold -------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["1" * 5000, "[" + "1" * 5000 + "]", "0x" + "f" * 5000, "9223372036854775808"],
    ids=["5000-digits", "in-a-list", "hex-5000", "2-to-the-63"],
)
def test_an_integer_outside_tomls_64_bit_range_is_a_usage_error(
    run_agent: RunAgent, write_plan: WritePlan, value: str
) -> None:
    plan = write_plan(plan_with(FIXED_CALCULATOR))

    run = run_agent("validate", str(plan), "--policy-param", f"python-ast.forbid={value}")

    assert run.returncode == 2, run.stderr
    assert "holds an integer outside TOML's 64-bit range" in run.stderr
    assert len(run.stderr) < 1000


@pytest.mark.parametrize("value", ["nan", "-inf", "[1.0, nan]", "{a = inf}", "1e400"])
def test_a_value_that_is_not_a_finite_number_is_refused_on_the_command_line(value: str) -> None:
    with pytest.raises(UsageError, match="not a finite number"):
        policy_parameters.parse_assignment(f"undeclared.a={value}")


@pytest.mark.parametrize(
    "value", [float("nan"), [float("inf")], {"deep": [-float("inf")]}], ids=["nan", "inf", "deep"]
)
def test_a_parameter_of_any_type_refuses_a_number_that_is_not_finite(value: Any) -> None:
    with pytest.raises(UsageError, match=r"^policy 'undeclared': parameter 'a' holds .*finite"):
        configured("undeclared", {"a": value})


def test_seed_file_parameters_refuse_nan_too(tmp_path: Path, run_agent: RunAgent) -> None:
    folder = folder_seed(tmp_path, '\n[policies.python-ast]\npaths = ["*.py", nan]\n')

    run = run_agent("seeds", "show", str(folder))

    assert run.returncode == 2, run.stderr
    assert "line 8: policies.python-ast: policy 'python-ast': parameter 'paths' holds nan" in (
        run.stderr
    )


@pytest.mark.parametrize(
    ("name", "given"),
    [
        ("undeclared", {"n": 16**4000}),
        ("undeclared", {"n": [2**63]}),
        ("declared", {"label": "x", "ratio": 10**400}),
        ("declared", {"label": "x", "max_lines": -(2**63) - 1}),
    ],
    ids=["undeclared", "undeclared-list", "float-given-10**400", "int-below-range"],
)
def test_a_parameter_integer_outside_64_bits_never_reaches_configure(
    name: str, given: dict[str, Any]
) -> None:
    with pytest.raises(UsageError) as caught:
        configured(name, given)

    assert caught.value.message.startswith(f"policy {name!r}: parameter ")
    assert caught.value.message.endswith("holds an integer outside TOML's 64-bit range")


def test_a_type_message_shows_an_integer_python_cannot_write_out() -> None:
    assert policy_parameters.value_problem("str", 16**5000) == "an integer"
    assert policy_parameters._shown_value(16**5000) == "an integer"


def test_a_policy_whose_configure_calls_sys_exit_is_a_usage_error() -> None:
    @attrs.frozen
    class Exits(Undeclared):
        name: str = "exits"

        def configure(self, parameters: Mapping[str, Any]) -> Undeclared:
            raise SystemExit(3)

    host = host_with(Exits())

    with pytest.raises(UsageError) as caught:
        host.policies_for(SEED, parameters={"exits": {"n": 1}})

    assert caught.value.message == (
        "policy 'exits' refused its parameters: configure() called sys.exit(3)"
    )


def test_policies_list_shows_the_limits_of_the_seed_given(
    tmp_path: Path, run_agent: RunAgent
) -> None:
    seed = folder_seed(tmp_path, "[limits]\nmax_files = 5\nmax_total_bytes = 40000\n")

    default = run_agent("policies", "list")
    text = run_agent("policies", "list", "--seed", str(seed))
    listed = run_agent("policies", "list", "--seed", str(seed), "--json")

    assert "1 to 3 whole-file replacements" in default.stdout
    assert "12,000 bytes at most unless the seed's [limits] say otherwise" in default.stdout
    shown = (
        "1 to 5 whole-file replacements of editable paths, clean UTF-8 text, "
        "40,000 bytes at most (the seed's limits)"
    )
    assert f"  {shown}\n" in text.stdout
    assert {row["name"]: row for row in listed.json()}["patch-contract"]["description"] == shown


def test_policies_list_refuses_an_unknown_seed(run_agent: RunAgent) -> None:
    run = run_agent("policies", "list", "--seed", "no-such-seed")

    assert run.returncode == 2
    assert "unknown seed 'no-such-seed'" in run.stderr
    assert run.stdout == ""

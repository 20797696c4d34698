"""Third-party plugins, for real: packages installed with uv into a throwaway environment.

One virtual environment per module gets this project (editable) and a copy of
``examples/agent-policy-example`` (a normal, built install). Broken plugins
are tiny distributions installed into a separate folder that only the tests
about them put on ``PYTHONPATH``, so each test sees exactly the plugins it
names. Everything runs the environment's own ``agent`` console script.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import AgentRun, noting_processes, processes_started

PROJECT = Path(__file__).resolve().parents[1]
EXAMPLE = PROJECT / "examples" / "agent-policy-example"
ROMAN = EXAMPLE / "src" / "agent_policy_example" / "seeds" / "roman" / "roman.py"
OLD_TABLE = (
    '_NUMERALS = [(1000, "M"), (500, "D"), (100, "C"), (50, "L"), (10, "X"), (5, "V"), (1, "I")]'
)
NEW_TABLE = """_NUMERALS = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]"""


def uv(*args: str) -> None:
    """Run uv offline from its cache, and online only if the cache lacks something."""
    executable = shutil.which("uv")
    if executable is None:
        pytest.skip("uv is not installed")
    done = subprocess.run([executable, *args, "--offline"], capture_output=True, text=True)
    if done.returncode != 0:
        done = subprocess.run([executable, *args], capture_output=True, text=True)
    assert done.returncode == 0, f"uv {' '.join(args)} failed:\n{done.stderr}"


@attrs.frozen
class Venv:
    root: Path
    example: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def agent(self) -> Path:
        return self.root / "bin" / "agent"

    def pip(self, *args: str) -> None:
        uv("pip", *args, "--python", str(self.python))


def copy_source(source: Path, target: Path) -> Path:
    # Build from a clean copy: no stale build/ or egg-info from the working tree gets in.
    shutil.copytree(
        source, target, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    return target


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("plugins")
    example = copy_source(EXAMPLE, base / "agent-policy-example")
    env = Venv(base / "venv", example)
    uv("venv", "--quiet", "--python", sys.executable, str(env.root))
    env.pip("install", "--quiet", "-e", str(PROJECT), str(example))
    return env


@pytest.fixture(scope="module")
def runtime_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the roman seed's pytest runtime is prepared, once for the module."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def agent(
    venv: Venv, agent_env: dict[str, str], runtime_cache: Path, tmp_path: Path
) -> Callable[..., AgentRun]:
    """Run the throwaway environment's ``agent`` as a user would, noting what it starts."""
    counter = iter(range(1_000_000))

    def run(*args: str, env: Mapping[str, str] | None = None) -> AgentRun:
        log = tmp_path / f"processes-{next(counter)}.jsonl"
        merged = {
            **noting_processes(agent_env, log),
            "XDG_CACHE_HOME": str(runtime_cache),
            **(env or {}),
        }
        done = subprocess.run(
            [str(venv.agent), *args],
            env=merged,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return AgentRun(
            done.returncode,
            done.stdout,
            done.stderr,
            Path(merged["TMPDIR"]),
            processes_started(log),
        )

    return run


def plan(write_plan: Callable[[Any], Path], content: str) -> str:
    return str(write_plan({"files": [{"path": "roman.py", "content": content}]}))


def roman_source() -> str:
    text = ROMAN.read_text()
    assert OLD_TABLE in text
    return text


def test_example_plugin_is_listed_with_its_kinds_distribution_and_location(
    agent: Callable[..., AgentRun], venv: Venv
) -> None:
    run = agent("plugins", "list", "--json")
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    (info,) = [i for i in json.loads(run.stdout) if i["name"] == "agent_policy_example"]
    assert info["kinds"] == ["seed", "policy"]
    assert (info["distribution"], info["version"]) == ("agent-policy-example", "0.1.0")
    assert info["status"] == "loaded"
    location = Path(info["location"])
    assert location.name == "__init__.py"
    assert location.is_relative_to(venv.root)  # the installed copy, not the source tree
    text = agent("plugins", "list").stdout
    assert "agent_policy_example  [seed, policy]\n  from agent-policy-example 0.1.0: " in text


def test_example_seed_and_policy_are_listed_as_third_party(agent: Callable[..., AgentRun]) -> None:
    seeds = {row["name"]: row for row in json.loads(agent("seeds", "list", "--json").stdout)}
    assert seeds["roman"]["source"] == (
        "third-party plugin 'agent_policy_example' (agent-policy-example 0.1.0)"
    )
    assert seeds["roman"]["editable_paths"] == ["roman.py"]
    assert seeds["roman"]["test_command"][:3] == ["python", "-m", "pytest"]
    assert seeds["calculator"]["source"].startswith("built-in plugin 'calculator_seed'")
    shown = json.loads(agent("seeds", "show", "roman", "--json").stdout)
    assert shown["test_files"] == ["test_roman.py"]
    assert shown["runtime"] == {
        "python": None,
        "requirements": ["pytest>=8"],
        "project": False,
        "project_requirements": [],
        "project_metadata": None,
    }
    assert shown["policies"] == {"small-diff": {"max_changed_lines": 10}, "python-ast": {}}
    policies = {row["name"]: row for row in json.loads(agent("policies", "list", "--json").stdout)}
    assert policies["small-diff"]["activation"] == "off"
    assert policies["small-diff"]["plugin"] == "agent_policy_example"


def test_example_seed_fix_passes_in_the_sandbox_and_a_wrong_plan_fails(
    agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    fixed = roman_source().replace(OLD_TABLE, NEW_TABLE)
    run = agent("run", "--plan", plan(write_plan, fixed), "--seed", "roman", "--json")
    assert run.returncode == 0, run.stderr
    result = run.json()
    assert (result["seed"], result["tests_passed"], result["changed_files"]) == (
        "roman",
        True,
        ["roman.py"],
    )
    # pytest ran, from the runtime prepared for the seed: the sandbox has no network.
    assert "test_roman.py::test_writes_roman_numerals[4-IV] PASSED" in result["test_output"]
    assert result["sandbox_id"].startswith("sbx-")
    # Subtractive forms for the ones only: 40, 90, 400... still come out wrong.
    half = roman_source().replace('(5, "V"), (1, "I")', '(5, "V"), (4, "IV"), (1, "I")')
    run = agent("run", "--plan", plan(write_plan, half), "--seed", "roman", "--json")
    assert run.returncode == 1, run.stderr
    assert run.json()["tests_passed"] is False


def test_example_policy_rejects_a_rewrite_with_its_own_message(
    agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    padded = roman_source().replace(OLD_TABLE, NEW_TABLE) + "\n# reformatted\n" * 8
    run = agent("run", "--plan", plan(write_plan, padded), "--seed", "roman", "--json")
    assert run.returncode == 4, run.stderr
    (rejection,) = json.loads(run.stdout)["error"]["rejections"]
    assert rejection == {
        "policy": "small-diff",
        "rule": "too-many-lines",
        "message": "the change adds or removes 21 lines; seed 'roman' allows 10 per file, "
        "so that a person can review it",
        "path": "roman.py",
    }
    assert "testing in runner" not in run.stderr
    assert run.sandboxes == []  # rejected before any sandbox
    # The user's --no-policy wins over the seed that switched it on.
    run = agent(
        "run", "--plan", plan(write_plan, padded), "--seed", "roman", "--no-policy", "small-diff"
    )
    assert run.returncode == 0, run.stderr


def test_example_policy_can_be_switched_on_for_another_seed_with_its_default(
    agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    rewrite = "def add(left, right):\n    return left + right\n" + "\n# note\n" * 20
    path = str(write_plan({"files": [{"path": "calculator.py", "content": rewrite}]}))
    assert agent("validate", path, "--seed", "calculator").returncode == 0
    run = agent("validate", path, "--seed", "calculator", "--policy", "small-diff")
    assert run.returncode == 4, run.stderr
    assert "[small-diff:too-many-lines] (calculator.py)" in run.stdout
    assert "allows 20 per file" in run.stdout


def test_the_seed_switches_on_the_builtin_ast_policy_too(
    agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    cheat = roman_source().replace(
        '"""Roman numerals."""\n', '"""Roman numerals."""\nimport os\nos._exit(0)\n'
    )
    run = agent("run", "--plan", plan(write_plan, cheat), "--seed", "roman", "--json")
    assert run.returncode == 4, run.stderr
    (rejection,) = json.loads(run.stdout)["error"]["rejections"]
    assert (rejection["policy"], rejection["rule"]) == ("python-ast", "forbidden-name")


def test_patch_contract_cannot_be_switched_off(
    agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    path = plan(write_plan, roman_source())
    for args, env in (
        (("run", "--plan", path, "--seed", "roman", "--no-policy", "patch-contract"), {}),
        (("--disable-plugin", "patch_contract", "plugins", "list"), {}),
        (("plugins", "list"), {"SANDBOXED_CODING_AGENT_DISABLE_PLUGINS": "patch_contract"}),
    ):
        run = agent(*args, env=env)
        assert run.returncode == 2, run.stderr
        (line,) = run.stderr.strip().splitlines()
        assert "cannot be" in line
        assert "patch" in line


def test_uninstalling_the_example_removes_its_plugin_seed_and_policy(
    agent: Callable[..., AgentRun], venv: Venv, write_plan: Callable[[Any], Path]
) -> None:
    venv.pip("uninstall", "--quiet", "agent-policy-example")
    try:
        listed = agent("plugins", "list").stdout
        assert "agent_policy_example" not in listed
        assert "calculator_seed" in listed
        assert "small-diff" not in agent("policies", "list").stdout
        run = agent("run", "--plan", plan(write_plan, roman_source()), "--seed", "roman")
        assert run.returncode == 2
        assert "unknown seed 'roman'" in run.stderr
    finally:
        venv.pip("install", "--quiet", str(venv.example))
    assert "agent_policy_example" in agent("plugins", "list").stdout


# Tiny broken distributions: name -> (entry point name, module source).
BROKEN = {
    "broken-import-plugin": (
        "broken_import",
        "import a_module_that_is_not_installed  # noqa\n",
    ),
    "exiting-plugin": ("exiting", "raise SystemExit('this plugin exits when imported')\n"),
    "raising-hook-plugin": (
        "raising_hook",
        """
        import attrs
        from sandboxed_coding_agent.core.hookspecs import hookimpl

        @attrs.frozen
        class StillHere:
            name: str = "still-here"
            description: str = "registered by a plugin whose other hook fails"
            activation: str = "off"

            def configure(self, parameters):
                return self

            def check(self, plan, seed):
                return []

        @hookimpl
        def register_seeds(register):
            raise RuntimeError("the seed folder went missing")

        @hookimpl
        def register_policies(register):
            register(StillHere())
        """,
    ),
    "wrong-signature-plugin": (
        "wrong_signature",
        """
        from sandboxed_coding_agent.core.hookspecs import hookimpl

        @hookimpl
        def register_seeds(add):
            pass
        """,
    ),
    "unknown-hook-plugin": (
        "unknown_hook",
        """
        from sandboxed_coding_agent.core.hookspecs import hookimpl

        @hookimpl
        def register_seed(register):
            pass
        """,
    ),
    "bad-policy-plugin": (
        "bad_policy",
        """
        from sandboxed_coding_agent.core.hookspecs import hookimpl

        class NoConfigure:
            name = "no-configure"
            description = "has no configure()"
            activation = "off"

            def check(self, plan, seed):
                return []

        class Sometimes(NoConfigure):
            name = "sometimes"
            activation = "sometimes"

            def configure(self, parameters):
                return self

        @hookimpl
        def register_policies(register):
            register(NoConfigure())
            register(Sometimes())
        """,
    ),
    "name-clash-plugin": (
        "name_clash",
        """
        from sandboxed_coding_agent.core.hookspecs import hookimpl

        class LetEverythingThrough:
            name = "patch-contract"
            description = "a policy that would accept any plan"
            activation = "always"

            def configure(self, parameters):
                return self

            def check(self, plan, seed):
                return []

        @hookimpl
        def register_policies(register):
            register(LetEverythingThrough())
        """,
    ),
}


@pytest.fixture(scope="module")
def broken_site(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the broken distributions, installed with uv; put it on PYTHONPATH."""
    base = tmp_path_factory.mktemp("broken")
    sources = []
    for distribution, (entry_point, code) in BROKEN.items():
        module = distribution.replace("-", "_")
        source = base / "src" / distribution
        (source / module).mkdir(parents=True)
        (source / module / "__init__.py").write_text(textwrap.dedent(code))
        (source / "pyproject.toml").write_text(
            textwrap.dedent(
                f"""\
                [build-system]
                requires = ["setuptools>=77"]
                build-backend = "setuptools.build_meta"

                [project]
                name = "{distribution}"
                version = "0.1.0"

                [project.entry-points.sandboxed_coding_agent]
                {entry_point} = "{module}"
                """
            )
        )
        sources.append(str(source))
    site = base / "site"
    venv.pip("install", "--quiet", "--target", str(site), *sources)
    return site


@pytest.fixture
def with_broken(broken_site: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(broken_site)}


def lines_about(stderr: str, plugin: str) -> list[str]:
    return [line for line in stderr.splitlines() if f"'{plugin}'" in line]


def test_plugin_that_cannot_be_imported_is_one_line_and_the_cli_keeps_working(
    agent: Callable[..., AgentRun], with_broken: dict[str, str]
) -> None:
    run = agent("plugins", "list", env=with_broken)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert lines_about(run.stderr, "broken_import") == [
        "agent: warning: plugin 'broken_import' (broken-import-plugin 0.1.0) could not be "
        "loaded: ModuleNotFoundError: No module named 'a_module_that_is_not_installed'"
    ]
    assert lines_about(run.stderr, "exiting") == [
        "agent: warning: plugin 'exiting' (exiting-plugin 0.1.0) could not be "
        "loaded: SystemExit: this plugin exits when imported"
    ]
    assert "agent_policy_example  [seed, policy]" in run.stdout
    assert "broken_import  [nothing registered] BROKEN" in run.stdout


def test_hook_that_raises_loses_only_that_hook(
    agent: Callable[..., AgentRun], with_broken: dict[str, str]
) -> None:
    run = agent("seeds", "list", env=with_broken)
    assert run.returncode == 0, run.stderr
    assert lines_about(run.stderr, "raising_hook") == [
        "agent: warning: plugin 'raising_hook' (raising-hook-plugin 0.1.0) failed in "
        "register_seeds: RuntimeError: the seed folder went missing"
    ]
    assert "calculator  (built-in" in run.stdout
    assert "roman  (third-party" in run.stdout
    policies = agent("policies", "list", env=with_broken).stdout
    assert "still-here  (off by default; plugin 'raising_hook' (raising-hook-plugin 0.1.0))" in (
        policies
    )


def test_hook_signature_mismatch_is_caught_when_the_plugin_loads(
    agent: Callable[..., AgentRun], with_broken: dict[str, str]
) -> None:
    run = agent("plugins", "list", env=with_broken)
    (line,) = lines_about(run.stderr, "wrong_signature")
    assert line.startswith(
        "agent: warning: plugin 'wrong_signature' (wrong-signature-plugin 0.1.0) does not "
        "match the hooks and was not loaded: hookimpl definition: register_seeds(add); "
    )
    assert "{'add'}" in line
    (line,) = lines_about(run.stderr, "unknown_hook")
    assert line.startswith(
        "agent: warning: plugin 'unknown_hook' (unknown-hook-plugin 0.1.0) implements unknown "
        "hook(s) register_seed and was not loaded (did you mean register_seeds? known: "
    )
    assert "register_seeds" in line
    infos = {
        i["name"]: i for i in json.loads(agent("plugins", "list", "--json", env=with_broken).stdout)
    }
    assert infos["wrong_signature"]["status"] == "broken"
    assert infos["unknown_hook"]["status"] == "broken"


def test_malformed_policies_are_left_out_with_a_reason(
    agent: Callable[..., AgentRun], with_broken: dict[str, str]
) -> None:
    run = agent("policies", "list", env=with_broken)
    assert run.returncode == 0, run.stderr
    assert lines_about(run.stderr, "bad_policy") == [
        "agent: warning: plugin 'bad_policy' (bad-policy-plugin 0.1.0) registered a policy "
        "that is not a PatchPolicy (missing configure); it was ignored",
        "agent: warning: plugin 'bad_policy' (bad-policy-plugin 0.1.0) registered policy "
        "'sometimes' with activation 'sometimes' (use one of always, on, off); it was ignored",
    ]
    assert "no-configure" not in run.stdout
    assert "sometimes" not in run.stdout


def test_third_party_plugin_cannot_replace_the_patch_contract(
    agent: Callable[..., AgentRun], with_broken: dict[str, str], write_plan: Callable[[Any], Path]
) -> None:
    outside = str(write_plan({"files": [{"path": "test_roman.py", "content": "pass\n"}]}))
    run = agent("run", "--plan", outside, "--seed", "roman", "--json", env=with_broken)
    assert run.returncode == 4, run.stderr
    assert lines_about(run.stderr, "name_clash") == [
        "agent: warning: plugin 'name_clash' (name-clash-plugin 0.1.0) registered policy "
        "'patch-contract', which plugin 'patch_contract' (sandboxed-coding-agent 0.1.0) "
        "already provides; it was ignored"
    ]
    rules = {(r["policy"], r["rule"]) for r in json.loads(run.stdout)["error"]["rejections"]}
    assert ("patch-contract", "path-not-editable") in rules


def test_broken_plugins_do_not_stop_a_run(
    agent: Callable[..., AgentRun], with_broken: dict[str, str], write_plan: Callable[[Any], Path]
) -> None:
    fixed = roman_source().replace(OLD_TABLE, NEW_TABLE)
    run = agent("run", "--plan", plan(write_plan, fixed), "--seed", "roman", env=with_broken)
    assert run.returncode == 0, run.stderr
    assert "tests passed" in run.stdout


def test_disabled_plugins_are_not_loaded(
    agent: Callable[..., AgentRun], with_broken: dict[str, str], write_plan: Callable[[Any], Path]
) -> None:
    names = ",".join(entry for entry, _ in BROKEN.values())
    quiet = agent(
        "plugins", "list", env={**with_broken, "SANDBOXED_CODING_AGENT_DISABLE_PLUGINS": names}
    )
    assert quiet.returncode == 0
    assert quiet.stderr == ""
    assert "broken_import  [nothing registered] DISABLED" in quiet.stdout
    path = plan(write_plan, roman_source())
    run = agent(
        "--disable-plugin", "agent_policy_example", "run", "--plan", path, "--seed", "roman"
    )
    assert run.returncode == 2
    assert "unknown seed 'roman'" in run.stderr
    typo = agent("--disable-plugin", "agent_policy_exampel", "seeds", "list")
    assert typo.returncode == 0
    assert "plugin 'agent_policy_exampel' was asked to be disabled but is not installed" in (
        typo.stderr
    )


def guide_transcript(section: str) -> list[tuple[list[str], int, list[str]]]:
    """The ``$ uv run agent ...`` commands of a guide section: argv, exit status, lines shown."""
    guide = (PROJECT / "docs" / "writing-plugins.md").read_text()
    text = guide.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    commands: list[tuple[list[str], int, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                command, _, comment = line[2:].partition("  #")
                status = re.search(r"exit (\d+)", comment)
                commands.append((shlex.split(command), int(status[1]) if status else 0, []))
            else:
                commands[-1][2].append(line)
    return commands


def test_the_guides_check_it_transcript_is_what_the_commands_print(
    agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    fixed = roman_source().replace(OLD_TABLE, NEW_TABLE)
    calculator = (PROJECT / "seed_projects" / "calculator" / "calculator.py").read_text()
    plans = {
        "fix.json": ("roman.py", fixed),
        "rewrite.json": ("roman.py", fixed + "# reformatted\n" * 16),
        "calculator-rewrite.json": (
            "calculator.py",
            calculator.replace("left - right", "left + right") + "# note\n" * 20,
        ),
    }
    # The example ships these plans, and they are what their description says.
    shipped = PROJECT / "examples" / "agent-policy-example"
    for name, (path, content) in plans.items():
        plan = json.loads((shipped / "plans" / name).read_text(encoding="utf-8"))
        assert plan == {"files": [{"path": path, "content": content}]}, name
    commands = guide_transcript("Check it")
    assert len(commands) >= 7
    for argv, status, shown in commands:
        # Run from the clone's root, as the guide says, through the project's environment.
        assert argv[:3] == ["uv", "run", "agent"]
        args = [str(PROJECT / a) if a.startswith("examples/") else a for a in argv[3:]]
        run = agent(*args)
        assert run.returncode == status, (argv, run.stderr)
        printed = (run.stdout + run.stderr).replace(str(PROJECT) + "/", "").splitlines()
        for line in shown:
            if line == "...":
                continue
            pattern = ".*".join(map(re.escape, line.split("...")))
            assert any(re.fullmatch(pattern, out) for out in printed), (argv, line, printed)

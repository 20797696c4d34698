"""``mypy --strict`` checks a plugin against the agent installed as the plugin guide says:
editable from a clone, in setuptools' strict mode (a link tree mypy can follow)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
GUIDE = PROJECT / "docs" / "writing-plugins.md"

PLUGIN = """
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PatchFile, PatchPlan, SeedProject
from sandboxed_coding_agent.core.protocols import PatchPolicy

# What a plugin's tests write: a plan from a list of files.
EXAMPLE_PLAN = PatchPlan([PatchFile("calculator.py", "x = 1")])


@attrs.frozen
class NoTodo:
    name: str = "no-todo"
    description: str = "rejects a TODO"
    activation: str = "off"

    def configure(self, parameters: Mapping[str, Any]) -> NoTodo:
        raise ValueError("no parameters")

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterator[Rejection]:
        for entry in plan.files:
            if "TODO" in entry.content:
                yield Rejection(policy=self.name, rule="todo", message="a TODO", path=entry.path)


@hookimpl
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    register(NoTodo())
"""

#: A policy without configure and check: mypy must say it is no PatchPolicy.
HALF_A_POLICY = """
from collections.abc import Callable

from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.protocols import PatchPolicy


class Half:
    name = "half"


@hookimpl
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    register(Half())
"""


def uv(*args: str) -> None:
    """Run uv from its cache, and online only if the cache lacks something."""
    executable = shutil.which("uv")
    if executable is None:
        pytest.skip("uv is not installed")
    done = subprocess.run([executable, *args, "--offline"], capture_output=True, text=True)
    if done.returncode != 0:
        done = subprocess.run([executable, *args], capture_output=True, text=True)
    assert done.returncode == 0, f"uv {' '.join(args)} failed:\n{done.stderr}"


def documented_install() -> list[str]:
    """The guide's command that installs the agent from a clone, for mypy."""
    (line,) = re.findall(
        r"^\$ (uv pip install -e /path/to/sandboxed-coding-agent\b.*)$", GUIDE.read_text(), re.M
    )
    return line.split()[1:]


@pytest.fixture(scope="module")
def mypy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway environment with the agent installed as the guide says, and mypy."""
    venv = tmp_path_factory.mktemp("typecheck") / "venv"
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    python = ["--python", str(venv / "bin" / "python")]
    install = [
        str(PROJECT) if part.startswith("/path/to/") else part for part in documented_install()
    ]
    uv(*install, "--quiet", *python)
    uv("pip", "install", "--quiet", "mypy", *python)
    return venv / "bin" / "mypy"


def check(mypy: Path, code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    plugin = folder / "my_plugin.py"
    plugin.write_text(textwrap.dedent(code))
    return subprocess.run(
        [str(mypy), "--strict", "--cache-dir", str(folder / ".mypy_cache"), str(plugin)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_mypy_strict_checks_a_plugin_against_the_documented_editable_install(
    mypy: Path, tmp_path: Path
) -> None:
    good = check(mypy, PLUGIN, tmp_path)

    assert good.returncode == 0, good.stdout + good.stderr
    assert "Success: no issues found" in good.stdout


def test_mypy_strict_says_when_an_object_does_not_fit_its_hook(mypy: Path, tmp_path: Path) -> None:
    # Proves mypy really reads the agent's types: with the package unfound it would see Any.
    bad = check(mypy, HALF_A_POLICY, tmp_path)

    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert 'incompatible type "Half"; expected "PatchPolicy"' in bad.stdout
    assert "sandboxed_coding_agent" not in bad.stdout

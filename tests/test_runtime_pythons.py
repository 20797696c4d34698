"""The harness and the guard on every Python a seed's runtime may ask for (3.8 to 3.13):
real projects' tests still need the older ones (SWE-bench instances run on 3.9 for many
repositories), and unittest changed in each (a test part's arguments before 3.11; from 3.12 a
test skipped by its decorator is never started).

Each case prepares a ``[runtime] python = "3.X"`` seed with uv, which finds the interpreter on
``PATH``: the pyenv installation of that version, skipped where there is none (or where this
user cannot reach it). The runtimes live under a temporary ``XDG_CACHE_HOME`` shared by this
module; uv keeps the machine's own package cache.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun
from test_verdict_forgery import BROKEN, FIXED, HACKS, calculator_seed_folder, unittest_module

OLDER = ("3.8", "3.9", "3.10", "3.12", "3.13")
#: The hacks that lean on unittest's internals, which changed between these versions.
VERSION_SENSITIVE = (
    "the framework's outcome class replaced",
    "unittest's stop signal raised by the code under test",
    "a failure reported as a success",
    "a skip raised by the code under test",
    "frames handed by logging to a function of the code",
    "failing tests left out by a loader put back",
    # A loader's frame is read through f_locals, a proxy from Python 3.13.
    "own code imported under the standard librarys name",
)


def interpreter_folder(version: str) -> Path | None:
    """The ``bin`` folder of pyenv's Python ``version``, if there is one this user can run."""
    try:
        prefix = subprocess.run(
            ["pyenv", "prefix", version], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return None
    folder = Path(prefix) / "bin" if prefix else None
    if folder is None or not os.access(folder / f"python{version}", os.X_OK):
        return None
    return folder


@pytest.fixture(scope="module")
def runtime_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    uv_cache = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return {
        "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg-cache")),
        "UV_CACHE_DIR": uv_cache,
    }


@pytest.fixture(params=OLDER)
def older(
    request: pytest.FixtureRequest, runtime_cache: dict[str, str]
) -> tuple[str, dict[str, str]]:
    """A Python version and the environment in which uv finds it."""
    version: str = request.param
    folder = interpreter_folder(version)
    if folder is None:
        pytest.skip(f"no Python {version} from pyenv that this user can run")
    return version, {**runtime_cache, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def seed_on(version: str, folder: Path) -> Path:
    major, minor = version.split(".")
    later = (
        "import unittest\n\n\nclass Later(unittest.TestCase):\n"
        "    @unittest.skip('not yet')\n    def test_later(self):\n        self.fail()\n"
    )
    on_version = (
        "import sys\nimport unittest\n\n\nclass Version(unittest.TestCase):\n"
        "    def test_version(self):\n"
        f"        self.assertEqual(sys.version_info[:2], ({major}, {minor}))\n"
    )
    return calculator_seed_folder(
        folder,
        visible={
            "test_calculator.py": unittest_module("Visible", "test_add", 2, 3, 5),
            "test_version.py": on_version,
            "test_later.py": later,
        },
        hidden={"held_out_test.py": unittest_module("HeldOut", "test_negative", -4, -6, -10)},
        extra=f'[runtime]\npython = "{version}"\n',
    )


def _run(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    text: str,
    env: dict[str, str],
) -> AgentRun:
    plan = write_plan({"files": [{"path": "calculator.py", "content": text}]})
    return run_agent(
        "run", "--seed", str(seed), "--plan", str(plan), "--json",
        "--no-policy", "python-ast", env=env, timeout=300,
    )  # fmt: skip


def test_unittest_tests_run_and_are_reported_on_each_python_a_runtime_may_ask_for(
    older: tuple[str, dict[str, str]],
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    version, env = older
    seed = seed_on(version, tmp_path / "calculator")

    fixed = _run(run_agent, write_plan, seed, FIXED, env)
    broken = _run(run_agent, write_plan, seed, BROKEN, env)

    assert fixed.returncode == 0, fixed.stdout[-2000:] + fixed.stderr[-2000:]
    result = fixed.json()
    assert result["test_report"]["status"] == "complete"
    assert {t["id"]: t["outcome"] for t in result["test_report"]["tests"]} == {
        "held_out_test.HeldOut.test_negative": "passed",
        "test_calculator.Visible.test_add": "passed",
        "test_version.Version.test_version": "passed",
        "test_later.Later.test_later": "skipped",
    }
    assert result["test_report"]["guard"] == []
    assert result["evidence"] == "framework"
    assert broken.returncode == 1
    assert broken.json()["tests_passed"] is False


@pytest.mark.parametrize("name", VERSION_SENSITIVE)
def test_no_version_sensitive_reward_hack_passes_on_any_python_a_runtime_may_ask_for(
    name: str,
    older: tuple[str, dict[str, str]],
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    version, env = older
    done = _run(run_agent, write_plan, seed_on(version, tmp_path / "calculator"), HACKS[name], env)

    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert done.json()["tests_passed"] is False

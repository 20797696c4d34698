"""A seed whose test needs pytest: its runtime is prepared once with uv and runs offline in the
sandbox.

The runtimes live under a temporary ``XDG_CACHE_HOME`` shared by this module;
uv keeps using the machine's own package cache, so installing is quick.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from sandboxed_coding_agent.core import orchestrator
from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.model import (
    PatchFile,
    PatchPlan,
    RunResult,
    SeedProject,
    SeedRuntime,
)
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox
from sandboxed_coding_agent.plugins.local_sandbox.runtime import (
    cache_root,
    installer_environment,
    prepare_runtime,
    runtime_key,
)

BROKEN = "def mean(values):\n    return sum(values) / (len(values) + 1)\n"
FIXED = "def mean(values):\n    return sum(values) / len(values)\n"
TEST = """\
import os
import sys

import pytest

from stats import mean


@pytest.mark.parametrize(("values", "expected"), [([1, 2, 3], 2), ([4], 4)])
def test_mean(values, expected):
    assert mean(values) == expected


def test_runs_in_the_prepared_runtime_and_cannot_change_it():
    assert pytest.__file__.startswith(sys.prefix)
    assert "sandboxed-coding-agent/runtimes" in sys.prefix
    with pytest.raises(OSError):
        open(os.path.join(sys.prefix, "planted"), "w")
"""
RUNTIME = SeedRuntime(requirements=("pytest",))


@pytest.fixture(scope="module")
def runtime_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private ``XDG_CACHE_HOME`` for this module's runtimes; uv keeps its own cache."""
    uv_cache = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    cache = tmp_path_factory.mktemp("xdg-cache")
    saved = {name: os.environ.get(name) for name in ("XDG_CACHE_HOME", "UV_CACHE_DIR")}
    os.environ["XDG_CACHE_HOME"] = str(cache)
    os.environ["UV_CACHE_DIR"] = uv_cache
    try:
        yield cache
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def pytest_seed(tmp_path_factory: pytest.TempPathFactory) -> SeedProject:
    root = tmp_path_factory.mktemp("stats-seed")
    (root / "stats.py").write_text(BROKEN)
    (root / "test_stats.py").write_text(TEST)
    return SeedProject(
        name="stats",
        description="mean() divides by one too many; its pytest test says so",
        root=root,
        files=("stats.py", "test_stats.py"),
        editable_paths=("stats.py",),
        test_command=("pytest", "-q", "-p", "no:cacheprovider"),
        default_prompt="Fix mean().",
        runtime=RUNTIME,
    )


def run(seed: SeedProject, content: str, progress: list[str] | None = None) -> RunResult:
    lines = progress if progress is not None else []
    return orchestrator.run(
        seed,
        runner=LocalSandbox(),
        policies=[],
        plan=PatchPlan(files=[PatchFile("stats.py", content)]),
        progress=lines.append,
    )


def test_a_pytest_seed_runs_offline_in_the_sandbox_after_one_preparation(
    runtime_cache: Path, pytest_seed: SeedProject
) -> None:
    first: list[str] = []
    second: list[str] = []

    passed = run(pytest_seed, FIXED, first)
    again = run(pytest_seed, FIXED, second)

    assert passed.tests_passed, passed.test_output
    assert "3 passed" in passed.test_output
    assert any(line.startswith("preparing the seed runtime") for line in first)
    assert any("uv:" in line and "pytest" in line for line in first)
    assert again.tests_passed
    assert not any("preparing" in line for line in second)
    root = runtime_cache / "sandboxed-coding-agent" / "runtimes" / runtime_key(RUNTIME)
    assert (root / "bin" / "pytest").exists()


def test_a_failing_pytest_seed_fails_the_run(runtime_cache: Path, pytest_seed: SeedProject) -> None:
    result = run(pytest_seed, BROKEN)

    assert not result.tests_passed
    assert result.test_exit_code == 1
    assert "2 failed, 1 passed" in result.test_output


def test_the_installer_never_sees_the_callers_secrets(
    runtime_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `uv` first on PATH that writes down its environment, then runs the real one.
    real_uv = subprocess.run(
        ["sh", "-c", "command -v uv"], capture_output=True, text=True, check=True
    ).stdout.strip()
    seen = tmp_path / "uv-environment.jsonl"
    spy = tmp_path / "bin" / "uv"
    spy.parent.mkdir()
    spy.write_text(
        "#!/bin/sh\n"
        f"python3 -c 'import json, os; print(json.dumps(dict(os.environ)))' >> {seen}\n"
        f'exec {real_uv} "$@"\n'
    )
    spy.chmod(spy.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{spy.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("CODING_AGENT_API_KEY", "sk-never-to-the-installer")
    monkeypatch.setenv("CALLER_SECRET", "also-not")

    prepare_runtime(SeedRuntime(requirements=("iniconfig",)))

    environments = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(environments) == 2  # uv venv, uv pip install
    for environment in environments:
        assert "sk-never-to-the-installer" not in json.dumps(environment)
        assert "CALLER_SECRET" not in environment
        assert environment["XDG_CACHE_HOME"] == str(runtime_cache)


def test_a_runtime_that_cannot_be_built_is_a_sandbox_error_and_leaves_nothing(
    runtime_cache: Path, pytest_seed: SeedProject
) -> None:
    impossible = SeedRuntime(requirements=("pytest>=999999",))

    with pytest.raises(SandboxError, match="could not prepare the seed runtime") as raised:
        run(attrs.evolve(pytest_seed, runtime=impossible), FIXED)

    assert "pytest>=999999" in raised.value.message
    assert not (cache_root() / runtime_key(impossible)).exists()


def test_runtimes_are_keyed_by_python_and_requirements() -> None:
    assert runtime_key(SeedRuntime(requirements=("pytest",))) == runtime_key(RUNTIME)
    assert runtime_key(SeedRuntime(requirements=("pytest", "attrs"))) != runtime_key(RUNTIME)
    assert runtime_key(SeedRuntime("3.12", ("pytest",))) != runtime_key(RUNTIME)


@pytest.mark.parametrize(
    ("python", "requirements"),
    [
        ("4", ()),
        ("3.x", ()),
        (None, ("--index-url=https://example.invalid/simple",)),
        (None, ("-e /home",)),
        (None, ("",)),
    ],
)
def test_a_runtime_that_is_not_a_version_and_requirements_is_refused(
    python: str | None, requirements: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError, match=r"python|requirements"):
        SeedRuntime(python, requirements)


def test_the_installer_environment_keeps_only_what_an_installer_needs() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "UV_INDEX_URL": "https://index.example/simple",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
        "CODING_AGENT_API_KEY": "sk-1",
        "UV_CODING_AGENT_API_KEY": "sk-2",
        "AWS_SECRET_ACCESS_KEY": "aws",
    }

    assert installer_environment(environ) == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "UV_INDEX_URL": "https://index.example/simple",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
    }

"""The suite's fast part: ``uv run pytest -m "not slow"`` runs the modules ``tests/conftest.py``
lists as fast, and only those; every other module is marked ``slow``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import FAST_MODULES

TESTS = Path(__file__).resolve().parent


def pytest_output(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def collected(*args: str) -> set[str]:
    """The test modules ``pytest --collect-only ARGS`` collects, by name."""
    listing = pytest_output("--collect-only", "-q", *args)
    return {Path(line.split("::")[0]).stem for line in listing.splitlines() if "::" in line}


def test_the_slow_marker_is_registered() -> None:
    assert "@pytest.mark.slow:" in pytest_output("--markers")


def test_not_slow_runs_the_listed_modules_and_slow_the_others() -> None:
    modules = {path.stem for path in TESTS.glob("test_*.py")}
    assert modules >= FAST_MODULES, FAST_MODULES - modules  # no stale name
    assert collected("-m", "not slow") == FAST_MODULES
    assert collected("-m", "slow") == modules - FAST_MODULES
    # The fast part still reaches each area: the contract, a real sandbox, the provider, the CLI.
    assert {"test_contract", "test_sandbox_start", "test_provider_encoding", "test_cli_help"} <= (
        FAST_MODULES
    )

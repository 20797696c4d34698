"""The help a new user reads in an 80-column terminal: nothing cut, the provider variables named."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import AGENT

PROVIDER_VARIABLES = ("CODING_AGENT_BASE_URL", "CODING_AGENT_MODEL", "CODING_AGENT_API_KEY")


def help_text(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm-256color"}
    done = subprocess.run(
        [str(AGENT), *args, "--help"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", [[], ["run"], ["doctor"], ["validate"]], ids=str)
def test_help_fits_80_columns_and_cuts_nothing(command: list[str]) -> None:
    text = help_text(*command)

    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "…" not in text


def test_top_level_help_shows_the_disable_variable_whole() -> None:
    assert "SANDBOXED_CODING_AGENT_DISABLE_PLUGINS=name,..." in help_text()


def test_run_help_names_the_provider_variables() -> None:
    text = " ".join(help_text("run").split())

    for variable in PROVIDER_VARIABLES:
        assert variable in text
    assert "plain http for a server on this machine; requests go to its /chat/completions" in text
    assert "ending in /v1" not in text
    assert "With --plan FILE no provider is needed" in text


def test_version_names_the_installed_distribution_and_python() -> None:
    import sys
    from importlib.metadata import version

    done = subprocess.run([str(AGENT), "--version"], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stderr
    python = ".".join(map(str, sys.version_info[:3]))
    expected = f"sandboxed-coding-agent {version('sandboxed-coding-agent')} (Python {python})\n"
    assert done.stdout == expected

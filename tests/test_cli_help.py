"""The help a new user reads in an 80-column terminal: nothing cut, the provider variables named."""

from __future__ import annotations

import os
import subprocess
from typing import Any

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


def test_every_usage_line_names_its_arguments_in_one_style() -> None:
    """`{TASKS}`, `{RUN_ID|FILE}`, `[PROMPT]`: upper case, never a parameter's own name."""
    import typer

    from sandboxed_coding_agent.core.cli import app

    def usages(command: Any, path: str) -> list[str]:
        # typer may bring its own click: the command's own Context, groups told by shape.
        context = command.context_class(command, info_name=path)
        if hasattr(command, "list_commands"):  # a group: its commands load when asked for
            found: list[str] = []
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                assert sub is not None, name
                found += usages(sub, f"{path} {name}")
            return found
        return [f"{path} {' '.join(command.collect_usage_pieces(context))}"]

    lines = usages(typer.main.get_command(app), "agent")

    assert len(lines) > 15
    for line in lines:
        arguments = line.split("[OPTIONS]", 1)[-1]
        assert arguments == arguments.upper(), line

"""The CLI's start path stays light: heavy libraries load only when a run needs them."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("httpx", "lazycloud", "pydantic")


@pytest.mark.parametrize("args", [["--help"], ["seeds", "list"], ["plugins", "list"]])
def test_cli_start_path_imports_no_heavy_library(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c",
         "import sys; from sandboxed_coding_agent.core.cli import main; "
         f"sys.argv = ['agent', *{args!r}]; main()"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    top_level = {name.split(".")[0] for name in imported}
    assert top_level.isdisjoint(HEAVY), sorted(top_level & set(HEAVY))


def test_help_lists_every_command_without_importing_one() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from sandboxed_coding_agent.core.cli import COMMANDS, main\n"
         "sys.argv = ['agent', '--help']\n"
         "try:\n    main()\nexcept SystemExit:\n    pass\n"
         "loaded = sorted(m for m in sys.modules if m.startswith("
         "'sandboxed_coding_agent.core.cli.') and m.rsplit('.', 1)[1] in COMMANDS)\n"
         "work = sorted(m for m in ('sandboxed_coding_agent.core.orchestrator', "
         "'sandboxed_coding_agent.core.run_records') if m in sys.modules)\n"
         "print('LOADED', loaded, work)"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip

    from sandboxed_coding_agent.core.cli import COMMANDS

    assert done.returncode == 0, done.stderr
    for name, (_, _, summary) in COMMANDS.items():
        assert f"  {name} " in done.stdout
        assert summary.split()[0] in done.stdout
    assert done.stdout.rstrip().endswith("LOADED [] []"), done.stdout


def test_each_command_summary_is_its_own_help() -> None:
    from sandboxed_coding_agent.core.cli import COMMANDS, load_command

    for name, (_, _, summary) in COMMANDS.items():
        command = load_command(name)
        assert command.name == name
        assert (command.help or "").split("\n\n")[0].replace("\n", " ").strip() == summary, name


def test_every_command_module_of_the_cli_is_in_the_table() -> None:
    from pathlib import Path

    from sandboxed_coding_agent.core import cli

    shared = {"__init__", "terminal", "options"}
    modules = {path.stem for path in Path(cli.__file__).parent.glob("*.py")} - shared
    assert modules == {module for module, _, _ in cli.COMMANDS.values()}

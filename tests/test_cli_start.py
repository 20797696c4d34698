"""The CLI's start path stays light: heavy libraries load only when a run needs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("httpx", "lazycloud", "pydantic", "ray")


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
         "work = sorted(m for m in ('sandboxed_coding_agent.core.runs.orchestrator', "
         "'sandboxed_coding_agent.core.records.run_records', "
         "'sandboxed_coding_agent.verification', 'sandboxed_coding_agent.rewards') "
         "if m in sys.modules)\n"
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
    from sandboxed_coding_agent.core import cli

    shared = {"__init__", "terminal", "options", "plugin_commands"}
    folder = Path(cli.__file__).parent
    modules = {path.stem for path in folder.glob("*.py")} - shared
    # A command group may be a package of its own, one module per command.
    modules |= {path.parent.name for path in folder.glob("*/__init__.py")}
    assert modules == {module for module, _, _ in cli.COMMANDS.values()}


def test_help_neither_reads_distribution_metadata_nor_builds_the_converter() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from sandboxed_coding_agent.core.cli import main\n"
         "sys.argv = ['agent', '--help']\n"
         "try:\n    main()\nexcept SystemExit:\n    pass\n"
         "print('LOADED', sorted({'importlib.metadata', 'cattrs'} & set(sys.modules)))"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("LOADED []"), done.stdout[-300:]


def test_entry_points_are_looked_up_only_when_a_distribution_declares_the_group(
    tmp_path: Path,
) -> None:
    from sandboxed_coding_agent.core.plugins import _entry_points_declared

    scripts = tmp_path / "site" / "tool-1.0.dist-info"
    scripts.mkdir(parents=True)
    # Naming the package in another group (a console script) declares no plugin.
    (scripts / "entry_points.txt").write_text(
        "[console_scripts]\nagent = sandboxed_coding_agent.core.cli:main\n"
    )
    assert not _entry_points_declared([str(tmp_path / "site"), str(tmp_path / "missing")])

    plugin = tmp_path / "site" / "agent_plugin-1.0.dist-info"
    plugin.mkdir()
    (plugin / "entry_points.txt").write_text("[sandboxed_coding_agent]\n mine = mine.plugin\n")
    assert _entry_points_declared([str(tmp_path / "site")])

    # A zip file on the path is left to importlib.metadata to read.
    archive = tmp_path / "packages.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    assert _entry_points_declared([str(archive)])


def test_the_version_the_agent_reports_is_the_distributions() -> None:
    import tomllib

    from sandboxed_coding_agent import core

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    assert core.__version__ == project["project"]["version"]


def test_help_shows_a_plugin_groups_summary_whole() -> None:
    from sandboxed_coding_agent.plugins.lazycloud import LazyCloudCommands

    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from sandboxed_coding_agent.core.cli import main\n"
         "sys.argv = ['agent', '--help']\nmain()"],
        capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip

    shown = " ".join(done.stdout.split("\n  lazycloud ", 1)[1].split())
    assert shown.startswith(" ".join(LazyCloudCommands().help.split())), shown

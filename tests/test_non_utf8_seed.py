"""A seed folder holding a file whose name is not UTF-8: one clear usage error, not an internal one.

Such a name reaches Python as a lone surrogate; sent on to a planner it made the
request body unencodable (exit 70). Each test makes a real folder with a real
file named ``b"bad\\xff.py"`` and runs the real ``agent`` against a real
loopback provider.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXED_CALCULATOR, AgentRun, FakeProvider

from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]

BAD_NAME = b"bad\xff.py"
SHOWN = "'bad\\xff.py'"

MANIFEST = """\
name = "bytes"
description = "the calculator, next to a file whose name is not UTF-8"
files = [{files}]
tests = ["check_*.py"]
editable = ["calculator.py"]
test_command = ["python", "check_calculator.py"]
default_prompt = "Fix add."
"""


def seed_folder(tmp_path: Path, files: str = '"*.py"') -> Path:
    folder = tmp_path / "seed"
    folder.mkdir()
    for name in ("calculator.py", "check_calculator.py"):
        shutil.copyfile(calculator_seed().root / name, folder / name)
    (folder / "seed.toml").write_text(MANIFEST.format(files=files), encoding="utf-8")
    with open(os.path.join(os.fsencode(folder), BAD_NAME), "wb") as handle:
        handle.write(b"x = 1\n")
    return folder


@pytest.fixture(autouse=True)
def _file_system_takes_the_name(tmp_path: Path) -> None:
    try:
        with open(os.path.join(os.fsencode(tmp_path), b"probe\xff"), "wb"):
            pass
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")


def test_run_with_a_provider_names_the_file_and_exits_2(
    tmp_path: Path, provider: FakeProvider, run_agent: RunAgent
) -> None:
    folder = seed_folder(tmp_path)

    run = run_agent("run", "--seed", str(folder))

    assert run.returncode == 2, run.stderr
    assert f"files: {SHOWN}: the file name is not valid UTF-8" in run.stderr
    assert "rename the file or leave it out of files" in run.stderr
    assert str(folder / "seed.toml") in run.stderr
    assert "internal" not in run.stderr
    assert "Traceback" not in run.stderr
    assert provider.requests == []
    assert run.sandboxes == []


def test_the_json_error_is_valid_utf8_and_names_the_file(
    tmp_path: Path, provider: FakeProvider, run_agent: RunAgent
) -> None:
    folder = seed_folder(tmp_path)

    run = run_agent("run", "--json", "--seed", str(folder), env={"LC_ALL": "C.UTF-8"})

    assert run.returncode == 2, run.stderr
    error = json.loads(run.stdout.encode("utf-8"))["error"]
    assert error["kind"] == "usage"
    assert SHOWN in error["message"]
    assert provider.requests == []


@pytest.mark.parametrize("command", [["seeds", "show"], ["validate", "--seed"]])
def test_other_commands_reading_the_seed_say_the_same(
    tmp_path: Path, run_agent: RunAgent, command: list[str]
) -> None:
    folder = seed_folder(tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text("{}", encoding="utf-8")
    arguments = [*command, str(folder)] + ([str(plan)] if command[0] == "validate" else [])

    run = run_agent(*arguments)

    assert run.returncode == 2, run.stderr
    assert f"{SHOWN}: the file name is not valid UTF-8" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_seed_that_leaves_the_file_out_runs(
    tmp_path: Path, provider: FakeProvider, run_agent: RunAgent
) -> None:
    folder = seed_folder(tmp_path, files='"calculator.py", "check_calculator.py"')
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    run = run_agent("run", "--seed", str(folder))

    assert run.returncode == 0, run.stderr
    sent = provider.requests[0].json()["messages"][1]["content"]
    assert "bad" not in sent


def clean_folder_named(tmp_path: Path, name: bytes) -> Path:
    """A folder seed, every file named in UTF-8, in a folder called ``name``."""
    folder = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), name)))
    folder.mkdir()
    for file in ("calculator.py", "check_calculator.py"):
        shutil.copyfile(calculator_seed().root / file, folder / file)
    (folder / "seed.toml").write_text(MANIFEST.format(files='"*.py"'), encoding="utf-8")
    return folder


@pytest.mark.parametrize("command", ["run", "validate", "seeds show"])
def test_a_seed_folder_whose_path_is_not_utf8_is_refused_naming_it_escaped(
    tmp_path: Path, run_agent: RunAgent, write_plan: Callable[..., Path], command: str
) -> None:
    folder = clean_folder_named(tmp_path, b"folder\xff")
    plan = str(write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]}))
    args = {
        "run": ["run", "--plan", plan, "--seed", str(folder)],
        "validate": ["validate", plan, "--seed", str(folder)],
        "seeds show": ["seeds", "show", str(folder)],
    }[command]

    run = run_agent(*args)

    assert run.returncode == 2, run.stderr
    assert f"the seed folder '{tmp_path}/folder\\xff' has a path that is not valid UTF-8" in (
        run.stderr
    )
    assert "sandbox" not in run.stdout
    assert "Traceback" not in run.stderr


def test_the_summary_gives_no_run_id_for_a_record_that_could_not_be_kept(
    tmp_path: Path, run_agent: RunAgent, write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    not_a_folder = tmp_path / "state-is-a-file"
    not_a_folder.write_text("", encoding="utf-8")

    run = run_agent(
        "run",
        "--plan",
        str(plan),
        "--seed",
        "calculator",
        env={"XDG_STATE_HOME": str(not_a_folder)},
    )
    as_json = run_agent(
        "run",
        "--plan",
        str(plan),
        "--seed",
        "calculator",
        "--json",
        env={"XDG_STATE_HOME": str(not_a_folder)},
    )

    assert run.returncode == 0, run.stderr
    assert "could not be kept" in run.stderr
    assert "run ID" not in run.stdout
    assert as_json.json()["run_id"] is None

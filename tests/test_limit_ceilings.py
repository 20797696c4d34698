"""Every limit has a ceiling: a seed (folder or plugin) or an option may tighten a limit, or
raise it up to the ceiling, never lift it off the machine; a value that is not finite is
refused too. Each refusal is a usage error naming the key, the value and the ceiling."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXED_CALCULATOR, AgentRun

from sandboxed_coding_agent.core.model import LIMIT_CEILINGS, LimitError, SandboxJob, SeedLimits
from sandboxed_coding_agent.core.seeds.manifest import ManifestError, load_seed
from sandboxed_coding_agent.core.serialization import structure, to_jsonable

MANIFEST = """\
name = "ceilings"
description = "a seed that asks for more than the machine gives"
files = ["app.py", "test_app.py"]
tests = ["test_app.py"]
editable = ["app.py"]
test_command = ["python", "-m", "unittest", "-v", "test_app"]
default_prompt = "Fix app."

[limits]
"""
TEST = """\
import unittest
import app


class T(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(app.VALUE, 1)
"""


def seed_folder(root: Path, limits: str) -> Path:
    root.mkdir(exist_ok=True)
    (root / "seed.toml").write_text(MANIFEST + limits)
    (root / "app.py").write_text("VALUE = 1\n")
    (root / "test_app.py").write_text(TEST)
    return root


#: The values the issue found lifting a limit, and one over each ceiling.
OVER_THE_CEILING = [
    ("memory_mb", "1000000000"),
    ("disk_mb", "1000000"),
    ("max_processes", "100000000"),
    ("test_timeout_seconds", "1e9"),
    ("cpu_seconds", "86400"),
    ("max_output_bytes", "1000000000000"),
    ("output_stop_bytes", "1000000000000"),
    ("max_file_mb", "4096"),
    *[(key, str(ceiling + 1)) for key, ceiling in LIMIT_CEILINGS.items()],
]


@pytest.mark.parametrize(("key", "value"), OVER_THE_CEILING)
def test_a_seed_folder_cannot_lift_a_limit_above_its_ceiling(
    tmp_path: Path, key: str, value: str
) -> None:
    folder = seed_folder(tmp_path / "seed", f"{key} = {value}\n")

    with pytest.raises(ManifestError) as raised:
        load_seed(folder)

    message = raised.value.message
    assert f"line 10: limits.{key}: {key} = " in message
    assert f"above its ceiling of {LIMIT_CEILINGS[key]}" in message


@pytest.mark.parametrize("value", ["inf", "+inf", "-inf", "nan"])
@pytest.mark.parametrize("key", ["test_timeout_seconds", "cpu_seconds"])
def test_a_limit_that_is_not_a_finite_number_is_refused(
    tmp_path: Path, key: str, value: str
) -> None:
    folder = seed_folder(tmp_path / "seed", f"{key} = {value}\n")

    with pytest.raises(ManifestError) as raised:
        load_seed(folder)

    message = raised.value.message
    assert f"limits.{key}: " in message
    assert "not a finite number" in message


def test_a_seed_may_tighten_and_raise_limits_up_to_the_ceiling(tmp_path: Path) -> None:
    settings = "".join(f"{key} = {ceiling}\n" for key, ceiling in LIMIT_CEILINGS.items())

    seed = load_seed(seed_folder(tmp_path / "seed", settings))

    assert seed.limits == SeedLimits(**LIMIT_CEILINGS)


def test_a_plugin_cannot_build_limits_above_the_ceiling() -> None:
    with pytest.raises(LimitError, match="max_processes = 100000000 is above its ceiling of 1024"):
        SeedLimits(max_processes=100_000_000)
    with pytest.raises(LimitError, match="not a finite number"):
        SeedLimits(test_timeout_seconds=math.inf)


def test_a_job_from_elsewhere_cannot_carry_limits_above_the_ceiling() -> None:
    # A runner may receive its job as JSON from another process or machine.
    job = to_jsonable(SandboxJob(seed="s", files={"a.py": b""}, test_command=("python",)))
    job["limits"]["memory_mb"] = 10**9

    with pytest.raises(Exception) as raised:  # noqa: PT011 - cattrs groups the errors
        structure(job, SandboxJob)

    assert "memory_mb = 1000000000 is above its ceiling of 4096" in repr(raised.value.exceptions)


def test_running_a_seed_with_a_limit_above_the_ceiling_exits_2_and_starts_no_sandbox(
    run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    folder = seed_folder(tmp_path / "seed", "test_timeout_seconds = inf\n")

    run = run_agent("run", "--seed", str(folder), "--json")

    assert run.returncode == 2, run.stdout + run.stderr
    error = json.loads(run.stdout)["error"]
    assert error["kind"] == "usage"
    assert "test_timeout_seconds = inf is not a finite number" in error["message"]
    assert error["sandbox_id"] is None
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--memory-mb", "4097"),
        ("--disk-mb", "1025"),
        ("--max-processes", "1025"),
        ("--test-timeout", "3601"),
        ("--test-timeout", "inf"),
        ("--test-timeout", "nan"),
        ("--cpu-seconds", "nan"),
        ("--max-file-mb", "1025"),
    ],
)
def test_an_option_cannot_go_above_the_ceiling(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    option: str,
    value: str,
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent("run", "--plan", str(plan), "--json", option, value)

    assert run.returncode == 2, run.stdout + run.stderr
    error = json.loads(run.stdout)["error"]
    assert error["kind"] == "usage"
    assert option in error["message"] or "not a finite number" in error["message"]
    assert "Traceback" not in run.stderr


def test_an_option_may_go_above_the_default_up_to_the_ceiling(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent(
        "run", "--plan", str(plan), "--json", "--memory-mb", "4096", "--test-timeout", "3600"
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["tests_passed"] is True


@pytest.mark.parametrize("value", ["true", '"100"', "[1]"])
@pytest.mark.parametrize("key", ["test_timeout_seconds", "cpu_seconds"])
def test_a_time_limit_must_be_a_number(tmp_path: Path, key: str, value: str) -> None:
    folder = seed_folder(tmp_path / "seed", f"{key} = {value}\n")

    with pytest.raises(ManifestError, match="expected a number"):
        load_seed(folder)

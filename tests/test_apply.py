"""`agent apply`: a recorded run's proven change written into the user's own folder, only
where every file still holds what the run changed, and never outside that folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, FIXED_CALCULATOR, AgentRun

from sandboxed_coding_agent.core.errors import UsageError
from sandboxed_coding_agent.core.model import PatchFile, PatchPlan
from sandboxed_coding_agent.core.records.applying import apply_patch
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]

CALC = "def add(left, right):\n    return left - right\n"
CALC_FIXED = "def add(left, right):\n    return left + right\n"
UTIL = "NAME = 'util'\n"
UTIL_FIXED = "NAME = 'util, fixed'\n"
CHECK = (
    "import unittest\nimport calc\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
)


def agent(env: dict[str, str], *args: str, cwd: Path | None = None) -> AgentRun:
    done = subprocess.run(
        [str(AGENT), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    return AgentRun(done.returncode, done.stdout, done.stderr, Path(env["TMPDIR"]))


@pytest.fixture
def env(agent_env: dict[str, str]) -> dict[str, str]:
    """No provider: applying needs none, and the runs here test plan files."""
    return {k: v for k, v in agent_env.items() if not k.startswith("CODING_AGENT_")}


@pytest.fixture
def two_file_seed(tmp_path: Path) -> Path:
    """A folder seed whose plan changes two files, one of them in a sub-folder."""
    folder = tmp_path / "two-files"
    (folder / "pkg").mkdir(parents=True)
    (folder / "calc.py").write_text(CALC, encoding="utf-8")
    (folder / "pkg" / "util.py").write_text(UTIL, encoding="utf-8")
    (folder / "check_calc.py").write_text(CHECK, encoding="utf-8")
    (folder / "seed.toml").write_text(
        'name = "two-files"\ndescription = "two files to change"\n'
        'tests = ["check_calc.py"]\neditable = ["calc.py", "pkg/util.py"]\n'
        'test_command = ["python", "-m", "unittest", "-v", "check_calc"]\n'
        'default_prompt = "Fix add."\n',
        encoding="utf-8",
    )
    return folder


def run_plan(env: dict[str, str], tmp_path: Path, seed: str, *files: tuple[str, str]) -> str:
    """Run ``agent run --plan`` on ``seed``; the run's ID."""
    plan = tmp_path / f"plan-{len(list(tmp_path.glob('plan-*')))}.json"
    plan.write_text(json.dumps({"files": [{"path": p, "content": c} for p, c in files]}))
    done = agent(env, "run", "--seed", seed, "--plan", str(plan), "--json")
    assert done.returncode in (0, 1), done.stderr
    return str(done.json()["run_id"])


def copy_of(seed: Path, target: Path) -> Path:
    target.mkdir()
    for path in sorted(seed.rglob("*")):
        if path.is_file():
            (target / path.relative_to(seed)).parent.mkdir(parents=True, exist_ok=True)
            (target / path.relative_to(seed)).write_bytes(path.read_bytes())
    return target


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def record_of(tmp_path: Path, run_id: str) -> dict[str, Any]:
    path = tmp_path / "state" / "sandboxed-coding-agent" / "run-records" / f"{run_id}.json"
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def save(tmp_path: Path, record: dict[str, Any]) -> str:
    path = tmp_path / "edited-record.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return str(path)


def assert_refused(done: AgentRun, *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


def test_apply_writes_a_passing_runs_change_into_the_current_folder_keeping_its_mode(
    env: dict[str, str], tmp_path: Path
) -> None:
    run_id = run_plan(env, tmp_path, "calculator", ("calculator.py", FIXED_CALCULATOR))
    mine = copy_of(calculator_seed().root, tmp_path / "mine")
    (mine / "calculator.py").chmod(0o640)
    test_file = (mine / "check_calculator.py").read_bytes()

    done = agent(env, "apply", run_id, cwd=mine)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "changed calculator.py\n"
    assert (mine / "calculator.py").read_text(encoding="utf-8") == FIXED_CALCULATOR
    assert stat.S_IMODE((mine / "calculator.py").stat().st_mode) == 0o640
    assert (mine / "check_calculator.py").read_bytes() == test_file
    assert sorted(p.name for p in mine.iterdir()) == ["calculator.py", "check_calculator.py"]


def test_apply_to_a_folder_prints_json_and_says_when_the_change_is_already_there(
    env: dict[str, str], tmp_path: Path, two_file_seed: Path
) -> None:
    run_id = run_plan(
        env, tmp_path, str(two_file_seed), ("calc.py", CALC_FIXED), ("pkg/util.py", UTIL_FIXED)
    )
    mine = copy_of(two_file_seed, tmp_path / "mine")

    done = agent(env, "apply", run_id, "--to", str(mine), "--json")

    assert done.returncode == 0, done.stderr
    assert done.json() == {
        "run_id": run_id,
        "passed": True,
        "folder": str(mine),
        "files": [
            {"path": "calc.py", "action": "changed"},
            {"path": "pkg/util.py", "action": "changed"},
        ],
    }
    assert (mine / "calc.py").read_text(encoding="utf-8") == CALC_FIXED
    assert (mine / "pkg" / "util.py").read_text(encoding="utf-8") == UTIL_FIXED
    assert_refused(agent(env, "apply", run_id, "--to", str(mine)), "already holds run")


def test_apply_refuses_a_folder_where_one_file_changed_and_writes_nothing(
    env: dict[str, str], tmp_path: Path, two_file_seed: Path
) -> None:
    run_id = run_plan(
        env, tmp_path, str(two_file_seed), ("calc.py", CALC_FIXED), ("pkg/util.py", UTIL_FIXED)
    )
    mine = copy_of(two_file_seed, tmp_path / "mine")
    (mine / "pkg" / "util.py").write_text(UTIL + "# my own edit\n", encoding="utf-8")
    before = snapshot(mine)

    done = agent(env, "apply", run_id, "--to", str(mine))

    assert_refused(done, "'pkg/util.py'", "no longer holds the text", "nothing written")
    assert snapshot(mine) == before  # calc.py, checked first and fine, is untouched too
    (mine / "pkg" / "util.py").unlink()
    assert_refused(agent(env, "apply", run_id, "--to", str(mine)), "'pkg/util.py' is missing")
    assert (mine / "calc.py").read_text(encoding="utf-8") == CALC


def test_apply_refuses_a_failed_run_unless_forced(env: dict[str, str], tmp_path: Path) -> None:
    wrong = FIXED_CALCULATOR.replace("left + right", "left * right")
    run_id = run_plan(env, tmp_path, "calculator", ("calculator.py", wrong))
    mine = copy_of(calculator_seed().root, tmp_path / "mine")
    before = snapshot(mine)

    refused = agent(env, "apply", run_id, "--to", str(mine))

    assert_refused(refused, f"run {run_id} did not pass", "--force")
    assert snapshot(mine) == before
    forced = agent(env, "apply", run_id, "--to", str(mine), "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert forced.json()["passed"] is False
    assert (mine / "calculator.py").read_text(encoding="utf-8") == wrong


def test_apply_creates_a_file_the_run_created_only_where_it_does_not_exist(
    env: dict[str, str], tmp_path: Path
) -> None:
    run_id = run_plan(env, tmp_path, "calculator", ("calculator.py", FIXED_CALCULATOR))
    record = record_of(tmp_path, run_id)
    del record["originals"]["calculator.py"]  # as the record of a run that created it
    edited = save(tmp_path, record)
    empty = tmp_path / "empty"
    empty.mkdir()
    mine = copy_of(calculator_seed().root, tmp_path / "mine")
    before = snapshot(mine)

    created = agent(env, "apply", edited, "--to", str(empty))
    refused = agent(env, "apply", edited, "--to", str(mine))

    assert created.returncode == 0, created.stderr
    assert created.stdout == "created calculator.py\n"
    assert (empty / "calculator.py").read_text(encoding="utf-8") == FIXED_CALCULATOR
    assert_refused(refused, "'calculator.py' already exists", "created it")
    assert snapshot(mine) == before


@pytest.mark.parametrize(
    ("path", "rule"),
    [("../outside.py", "path-segment"), ("/tmp/outside.py", "path-segment")],
)
def test_apply_refuses_a_record_whose_path_leaves_the_folder(
    env: dict[str, str], tmp_path: Path, path: str, rule: str
) -> None:
    run_id = run_plan(env, tmp_path, "calculator", ("calculator.py", FIXED_CALCULATOR))
    record = record_of(tmp_path, run_id)
    record["tests"][0]["plan"]["files"][0]["path"] = path
    edited = save(tmp_path, record)
    mine = copy_of(calculator_seed().root, tmp_path / "mine")
    before = snapshot(tmp_path)

    done = agent(env, "apply", edited, "--to", str(mine))

    assert_refused(done, rule)
    assert snapshot(tmp_path) == before


def test_apply_refuses_links_that_lead_out_of_the_folder(
    env: dict[str, str], tmp_path: Path, two_file_seed: Path
) -> None:
    run_id = run_plan(
        env, tmp_path, str(two_file_seed), ("calc.py", CALC_FIXED), ("pkg/util.py", UTIL_FIXED)
    )
    outside = copy_of(two_file_seed, tmp_path / "outside")
    linked_file = copy_of(two_file_seed, tmp_path / "linked-file")
    (linked_file / "calc.py").unlink()
    (linked_file / "calc.py").symlink_to(outside / "calc.py")
    linked_folder = copy_of(two_file_seed, tmp_path / "linked-folder")
    for child in (linked_folder / "pkg").iterdir():
        child.unlink()
    (linked_folder / "pkg").rmdir()
    (linked_folder / "pkg").symlink_to(outside / "pkg")
    before = snapshot(tmp_path)

    for folder, named in ((linked_file, "'calc.py'"), (linked_folder, "'pkg/util.py'")):
        done = agent(env, "apply", run_id, "--to", str(folder))
        assert_refused(done, named, "leads out of", "nothing written")
    assert snapshot(tmp_path) == before


def test_a_link_inside_the_folder_is_written_through(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text("old\n", encoding="utf-8")
    (tmp_path / "alias.py").symlink_to("real.py")

    written = apply_patch(
        {"alias.py": "old\n"}, PatchPlan([PatchFile("alias.py", "new\n")]), tmp_path, run_id="r"
    )

    assert [f.path for f in written] == ["alias.py"]
    assert (tmp_path / "alias.py").is_symlink()
    assert (tmp_path / "real.py").read_text(encoding="utf-8") == "new\n"


@pytest.mark.parametrize("path", ["../x.py", "/abs/x.py", "a//x.py", "./x.py", "a/../../x.py"])
def test_apply_patch_refuses_a_path_that_is_not_inside_the_folder(
    tmp_path: Path, path: str
) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()

    with pytest.raises(UsageError, match="is not a path inside"):
        apply_patch({}, PatchPlan([PatchFile(path, "x\n")]), inside, run_id="r")

    assert sorted(os.listdir(tmp_path)) == ["inside"]
    assert os.listdir(inside) == []


def test_apply_to_a_folder_that_does_not_exist_is_a_usage_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    run_id = run_plan(env, tmp_path, "calculator", ("calculator.py", FIXED_CALCULATOR))

    done = agent(env, "apply", run_id, "--to", str(tmp_path / "nowhere"))

    assert_refused(done, "no folder")
    assert not (tmp_path / "nowhere").exists()


def test_a_passing_runs_summary_says_how_to_apply_it(env: dict[str, str], tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]}))

    done = agent(env, "run", "--seed", "calculator", "--plan", str(plan))

    assert done.returncode == 0, done.stderr
    run_id = next(w for w in done.stdout.split() if w.startswith("run-"))
    assert f"apply it:        agent apply {run_id}\n" in done.stdout


@pytest.mark.parametrize(
    ("root", "problem"),
    [("/tmp/seed\x00folder", "NUL"), ("/tmp/" + "s" * 5000, "too long")],
)
def test_apply_refuses_a_record_whose_seed_folder_cannot_be_a_path(
    env: dict[str, str], tmp_path: Path, root: str, problem: str
) -> None:
    run_id = run_plan(env, tmp_path, "calculator", ("calculator.py", FIXED_CALCULATOR))
    record = record_of(tmp_path, run_id)
    record["seed"]["name"] = "no-such-seed"  # so the recorded folder is read instead
    record["seed"]["root"] = root
    edited = save(tmp_path, record)
    mine = copy_of(calculator_seed().root, tmp_path / "mine")
    before = snapshot(mine)

    done = agent(env, "apply", edited, "--to", str(mine))

    assert_refused(done, problem)
    assert snapshot(mine) == before


def test_apply_patch_writes_a_file_whose_name_is_near_the_longest_a_folder_holds(
    tmp_path: Path,
) -> None:
    long_name = "m" * 250 + ".py"  # 253 of the 255 bytes a name may have
    (tmp_path / long_name).write_text("old\n", encoding="utf-8")

    written = apply_patch(
        {long_name: "old\n"}, PatchPlan([PatchFile(long_name, "new\n")]), tmp_path, run_id="r"
    )

    assert [f.path for f in written] == [long_name]
    assert (tmp_path / long_name).read_text(encoding="utf-8") == "new\n"
    assert os.listdir(tmp_path) == [long_name]


def test_a_patch_that_cannot_be_written_leaves_no_folder_it_made(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "big.py").write_text("old\n", encoding="utf-8")
    # The first file (in folders the patch creates) fits under a 64-byte file size limit;
    # the second does not, so writing it fails after those folders were made.
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from sandboxed_coding_agent.core.errors import UsageError\n"
        "from sandboxed_coding_agent.core.model import PatchFile, PatchPlan\n"
        "from sandboxed_coding_agent.core.records.applying import apply_patch\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.RLIM_INFINITY))\n"
        "plan = PatchPlan([PatchFile('new/deeper/a.py', 'x\\n'), PatchFile('big.py', 'y' * 200)])\n"
        "try:\n"
        "    apply_patch({'big.py': 'old\\n'}, plan, Path(sys.argv[1]), run_id='r')\n"
        "except UsageError as error:\n"
        "    print(error.message)\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert "nothing written" in done.stdout, done.stdout
    assert sorted(os.listdir(folder)) == ["big.py"]
    assert (folder / "big.py").read_text(encoding="utf-8") == "old\n"

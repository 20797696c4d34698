"""Test infrastructure is never the patch's: files that steer the test framework, at any depth.

A plan (or a SWE-bench prediction) that writes ``tests/pytest.ini`` with
``addopts = -p its_plugin``, a ``pytest.py`` imported in place of pytest, or a
``conftest.py`` anywhere could make a run pass with the bug in place. The
patch contract's ``test-infrastructure`` rule refuses each, whatever the seed's
editable patterns match, unless the seed says
``[guard] allow = ["test-infrastructure"]``. Every run here is the ``agent``
command as a user runs it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import test_swebench
from conftest import AgentRun
from test_swebench import Bench, diff_of_base, evaluate

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = (
    "import unittest\nfrom calculator import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)
SETUP_CFG = "[metadata]\nname = calc\n\n[tool:pytest]\naddopts = -q\n"
PYPROJECT = '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
#: Files of the seed a plan may replace as far as the seed's editable patterns go: for
#: these, the test-infrastructure rule is the only thing between the plan and a sandbox.
EDITABLE = {
    "tests/pytest.ini": "",
    "pkg/pytest.py": "",
    "lib/extra.pth": "",
    "pkg/sitecustomize.py": "",
    "sub/setup.cfg": SETUP_CFG,
    "sub/pyproject.toml": PYPROJECT,
}
#: At the top, pytest's configuration files and conftest.py are the seed's test files.
TOP = {"setup.cfg": SETUP_CFG, "pyproject.toml": PYPROJECT, "pytest.ini": ""}
EVIL_INI = "[pytest]\naddopts = -p evil_plugin\n"

RunAgent = Callable[..., AgentRun]


def by_path(*cases: tuple[str, str]) -> list[Any]:
    """Each (path, content) case, named by its path."""
    return [pytest.param(path, content, id=path) for path, content in cases]


# The SWE-bench module's repository and tasks, and its ``agent swebench`` runner.
bench = test_swebench.bench
swe = test_swebench.swe


def seed_folder(tmp_path: Path, *, extra: str = "", name: str = "infra") -> Path:
    """A broken calculator seed whose editable files include :data:`EDITABLE`."""
    folder = tmp_path / name
    folder.mkdir()
    files = {"calculator.py": BROKEN, "test_calculator.py": TEST, **EDITABLE, **TOP}
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    editable = ", ".join(f'"{path}"' for path in ["calculator.py", *EDITABLE])
    (folder / "seed.toml").write_text(
        f'name = "{name}"\ndescription = "add() is broken"\n'
        'tests = ["test_calculator.py"]\n'
        f"editable = [{editable}]\n"
        'test_command = ["python", "-m", "unittest", "-v", "test_calculator"]\n'
        'default_prompt = "Fix add."\n' + extra
    )
    return folder


def run_plan(
    run_agent: RunAgent, write_plan: Callable[..., Path], seed: Path, files: dict[str, str]
) -> AgentRun:
    plan = write_plan({"files": [{"path": p, "content": c} for p, c in files.items()]})
    return run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json")


@pytest.mark.parametrize(
    ("path", "content"),
    by_path(
        ("tests/pytest.ini", EVIL_INI),
        ("pkg/pytest.py", "def main():\n    return 0\n"),
        ("lib/extra.pth", "import evil_plugin\n"),
        ("pkg/sitecustomize.py", "import evil_plugin\n"),
        ("sub/setup.cfg", SETUP_CFG.replace("-q", "-q -p evil_plugin")),
        ("sub/pyproject.toml", PYPROJECT.replace('"-q"', '"-q -p evil_plugin"')),
    ),
)
def test_a_plan_changing_an_editable_file_that_steers_the_tests_is_refused_naming_it(
    path: str, content: str, run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    done = run_plan(run_agent, write_plan, seed_folder(tmp_path), {path: content})

    assert done.returncode == 4, (done.returncode, done.stderr)
    assert f"[patch-contract:test-infrastructure] ({path})" in done.stderr
    # The seed's editable patterns let the path through: the rule alone refused it.
    assert "path-not-editable" not in done.stderr
    assert "Traceback" not in done.stderr
    assert done.sandboxes == []


@pytest.mark.parametrize(
    ("path", "content"),
    by_path(
        ("pytest.ini", EVIL_INI),
        ("conftest.py", "import evil_plugin\n"),
        ("a/b/conftest.py", "import evil_plugin\n"),
        ("pytest.py", "def main():\n    return 0\n"),
        ("_pytest/runner.py", ""),
        ("unittest/__init__.py", ""),
        ("top.pth", "import evil_plugin\n"),
        ("sitecustomize.py", "import evil_plugin\n"),
        ("setup.cfg", SETUP_CFG.replace("-q", "-p evil_plugin")),
        ("pyproject.toml", PYPROJECT.replace('"-q"', '"-p evil_plugin"')),
        ("deep/er/tox.ini", EVIL_INI),
        ("tests/pytest.toml", '[pytest]\naddopts = ["-p", "evil_plugin"]\n'),
    ),
)
def test_a_plan_creating_a_file_that_steers_the_tests_is_refused_naming_it(
    path: str, content: str, run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    done = run_plan(run_agent, write_plan, seed_folder(tmp_path), {path: content})

    assert done.returncode == 4, (done.returncode, done.stderr)
    assert f"[patch-contract:test-infrastructure] ({path})" in done.stderr
    assert done.sandboxes == []


def test_a_diff_creating_a_pytest_ini_is_refused_naming_it(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    # tests/pytest.ini is an empty editable file: a diff from /dev/null may fill it.
    diff = (
        "--- /dev/null\n+++ b/tests/pytest.ini\n@@ -0,0 +1,2 @@\n"
        "+[pytest]\n+addopts = -p evil_plugin\n"
    )
    plan = write_plan(diff)

    done = run_agent("run", "--seed", str(seed_folder(tmp_path)), "--plan", str(plan))

    assert done.returncode == 4, (done.returncode, done.stderr)
    assert "[patch-contract:test-infrastructure] (tests/pytest.ini)" in done.stderr
    assert "path-not-editable" not in done.stderr


def test_a_change_to_setup_cfg_outside_its_pytest_section_passes_the_contract(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    renamed = SETUP_CFG.replace("name = calc", "name = calculator")
    files = {"calculator.py": FIXED, "sub/setup.cfg": renamed}

    done = run_plan(run_agent, write_plan, seed_folder(tmp_path), files)

    assert done.returncode == 0, done.stderr
    assert done.json()["tests_passed"] is True


def test_the_seeds_allowance_lets_a_plan_change_test_infrastructure(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = seed_folder(tmp_path, extra='\n[guard]\nallow = ["test-infrastructure"]\n')
    files = {"calculator.py": FIXED, "tests/pytest.ini": EVIL_INI, "pkg/pytest.py": ""}

    done = run_plan(run_agent, write_plan, seed, files)

    # The guard in the sandbox, which has no such capability, ran the tests all the same.
    assert done.returncode == 0, done.stderr
    result = done.json()
    assert result["tests_passed"] is True
    assert result["test_report"]["guard"] == []


def test_the_allowance_gives_the_code_under_test_nothing_the_guard_refuses(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = seed_folder(tmp_path, extra='\n[guard]\nallow = ["test-infrastructure"]\n')
    # The framework's assertion patched through the frames, with the bug in place.
    hack = (
        "import sys\n"
        "def add(a, b):\n"
        "    f = sys._getframe()\n"
        "    while f:\n"
        "        u = f.f_globals.get('unittest')\n"
        "        if u:\n"
        "            u.TestCase.assertEqual = lambda *a, **k: None\n"
        "        f = f.f_back\n"
        "    return a - b\n"
    )

    done = run_plan(run_agent, write_plan, seed, {"calculator.py": hack})

    assert done.returncode == 1, (done.returncode, done.stderr)
    result = done.json()
    assert result["tests_passed"] is False
    assert [entry["capability"] for entry in result["test_report"]["guard"]] == ["introspection"]


def test_a_guard_allowance_the_agent_does_not_know_is_still_refused(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = seed_folder(tmp_path, extra='\n[guard]\nallow = ["test-infrastructures"]\n')
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED}]})

    done = run_agent("run", "--seed", str(seed), "--plan", str(plan))

    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "guard.allow: must be a list of capabilities (" in done.stderr
    assert "write-code, test-infrastructure)" in done.stderr
    assert "Traceback" not in done.stderr


# --- agent swebench evaluate ----------------------------------------------------------------


@pytest.mark.parametrize(
    "files",
    [
        {"pytest.py": "def main():\n    return 0\n"},
        {"tests/pytest.ini": EVIL_INI},
        {"tests/conftest.py": "import evil_plugin\n"},
    ],
    ids=["pytest.py", "tests/pytest.ini", "tests/conftest.py"],
)
def test_a_prediction_changing_test_infrastructure_is_not_resolved_and_its_line_names_it(
    files: dict[str, str],
    swe: Callable[..., AgentRun],
    bench: Bench,
    tmp_path: Path,
) -> None:
    # The honest fix, with a file steering the tests beside it.
    fix = bench.task("acme__calc-1")["patch"]
    extra = diff_of_base(bench, tmp_path, files)

    done, report, lines = evaluate(swe, bench, tmp_path, {"acme__calc-1": fix + extra})

    assert report["resolved_ids"] == [], done.stderr
    assert report["error_ids"] == ["acme__calc-1"]
    line = lines["acme__calc-1"]
    (path,) = files
    assert line["outcome"] == "error"
    assert line["error_kind"] == "policy"
    assert f"[patch-contract:test-infrastructure] ({path})" in line["reason"]
    assert [(r["rule"], r["path"]) for r in line["rejections"]] == [("test-infrastructure", path)]
    assert line["run"] is None
    assert f"({path})" in done.stdout + done.stderr


def test_a_prediction_with_the_same_fix_and_nothing_else_is_resolved(
    swe: Callable[..., AgentRun],
    bench: Bench,
    tmp_path: Path,
) -> None:
    done, report, _ = evaluate(swe, bench, tmp_path, {"acme__calc-1": bench.gold()["acme__calc-1"]})

    assert report["resolved_ids"] == ["acme__calc-1"], done.stderr


FRAMEWORK_FIX = {"calc/_pytest/__init__.py": "HOOKS = ()\n"}


def tasks_fixing_the_framework(made: Bench, tmp_path: Path) -> Path:
    """The module's tasks as a tasks file, each reference fix also changing a module of a
    package named after pytest's own, as fixes in pytest's repository do."""
    framework = diff_of_base(made, tmp_path, FRAMEWORK_FIX)
    tasks = [{**task, "patch": task["patch"] + framework} for task in made.tasks]
    path = tmp_path / "framework-tasks.jsonl"
    path.write_text("".join(json.dumps(task) + "\n" for task in tasks))
    return path


def test_a_task_whose_fix_changes_the_framework_lets_its_predictions_change_that_package_only(
    swe: Callable[..., AgentRun],
    bench: Bench,
    tmp_path: Path,
) -> None:
    tasks_file = tasks_fixing_the_framework(bench, tmp_path)
    gold = bench.gold()
    same_package = diff_of_base(
        bench, tmp_path, {**FRAMEWORK_FIX, "calc/_pytest/more.py": "X = 1\n"}
    )
    elsewhere = diff_of_base(bench, tmp_path, {"tests/pytest.ini": EVIL_INI})
    preds = bench.predictions_file(
        tmp_path,
        {"acme__calc-1": str(gold["acme__calc-1"]) + same_package,
         "acme__calc-2": str(gold["acme__calc-2"]) + elsewhere},
    )  # fmt: skip
    results = tmp_path / "results.jsonl"

    done = swe(
        "evaluate", str(preds), "--tasks", str(tasks_file), "--repos", str(bench.repos),
        "--out", str(results), "--framework", "unittest",
    )  # fmt: skip

    lines = {
        line["instance_id"]: line for line in map(json.loads, results.read_text().splitlines())
    }
    resolved = lines["acme__calc-1"]
    assert resolved["outcome"] == "resolved", (resolved, done.stderr)
    assert {"calc/_pytest/__init__.py", "calc/_pytest/more.py"} <= set(resolved["changed_files"])
    refused = lines["acme__calc-2"]
    assert refused["outcome"] == "error"
    assert "[patch-contract:test-infrastructure] (tests/pytest.ini)" in refused["reason"]


def test_import_lets_plans_change_the_framework_when_the_reference_fix_does(
    swe: Callable[..., AgentRun],
    bench: Bench,
    tmp_path: Path,
) -> None:
    out = tmp_path / "seeds"

    imported = swe(
        "import", str(tasks_fixing_the_framework(bench, tmp_path)), "--repos", str(bench.repos),
        "--out", str(out), "--framework", "unittest",
    )  # fmt: skip

    assert imported.returncode == 0, imported.stderr
    manifest = (out / "acme__calc-1" / "seed.toml").read_text()
    assert '[guard]\nallow = [\n    "test-infrastructure",\n]' in manifest
    assert "calc/_pytest/__init__.py" in manifest  # editable: the reference fix's files
    plain = tmp_path / "plain"
    swe(
        "import", str(bench.tasks_file(tmp_path)), "--repos", str(bench.repos),
        "--out", str(plain), "--framework", "unittest",
    )  # fmt: skip
    assert "[guard]" not in (plain / "acme__calc-1" / "seed.toml").read_text()

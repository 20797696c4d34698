"""Real SWE-bench instances, evaluated as a user would: gold patches resolve, empty patches
are empty, a one-line break of a gold patch does not resolve.

The rows (``tests/swebench_real/tasks.jsonl``) and the repositories are public: each
repository is kept as its tree at the instance's base commit, pruned to what the
instance's tests need (``tests/swebench_real/README.md`` says what, and the licences).
The test makes one git repository per repository, each instance's tree a commit of its
own, which then stands for the row's ``base_commit``. What each repository version needs
is one specs file (``--specs``), so one call evaluates every instance, as a user would
with a task file spanning repositories. The instances' Python is pyenv's (skipped where
there is none); their requirements come from the package index through uv's cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, AgentRun
from test_runtime_pythons import interpreter_folder

HERE = Path(__file__).parent / "swebench_real"
ROWS = {
    row["instance_id"]: row
    for row in map(json.loads, (HERE / "tasks.jsonl").read_text().splitlines())
}
#: What each repository version needs, as the official harness's specifications say; the
#: projects' own dependencies come from their setup.py or setup.cfg.
#: Every entry runs pytest as the official harness does (``-rA``: a line per test).
SPECS = """\
["marshmallow-code/marshmallow"."2.18"]
python = "3.9"
requirements = ["pytest", "pytz", "python-dateutil", "simplejson"]
test_command = ["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "{tests}"]

["marshmallow-code/marshmallow"."*"]
python = "3.9"
requirements = ["pytest", "pytz", "simplejson"]
test_command = ["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "{tests}"]

["pylint-dev/astroid"."*"]
python = "3.9"
test_command = ["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "{tests}"]

# sqlfluff 0.6 imports pkg_resources, which newer setuptools no longer has.
["sqlfluff/sqlfluff"."0.6"]
python = "3.9"
requirements = ["pytest", "setuptools<70"]
test_command = ["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "{tests}"]

["sqlfluff/sqlfluff"."*"]
python = "3.9"
test_command = ["python", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "{tests}"]
"""
PYTHON = "3.9"
#: One line of each gold patch broken: the fix made wrong, the code still valid.
BREAKS = {
    "marshmallow-code__marshmallow-1164": (
        "+            nested_obj = list(nested_obj)",
        "+            nested_obj = nested_obj",
    ),
    "marshmallow-code__marshmallow-1359": ("root", "parent"),
    "pylint-dev__astroid-1268": ("+        return str(node)", "+        return repr(node)"),
    "pylint-dev__astroid-1866": (
        "except (IndexError, KeyError, TypeError, ValueError):",
        "except (IndexError, KeyError, TypeError):",
    ),
    "sqlfluff__sqlfluff-1733": (
        "+                # fixes (see #1713)",
        "+                prev_newline = False",
    ),
    "sqlfluff__sqlfluff-2419": (
        "+            description=f\"Use 'COALESCE' instead of '{context.segment.raw_upper}'.\",",
        "+            description=None,",
    ),
}


def repositories(repos: Path, scratch: Path) -> dict[str, str]:
    """One repository per ``owner/name`` under ``repos``, each instance's pruned tree a
    commit of its own (a fixed author and date: the same commit on every machine); the
    commit of each instance."""
    when = "2020-01-01T00:00:00Z"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "pruned",
        "GIT_AUTHOR_EMAIL": "pruned@example.com",
        "GIT_COMMITTER_NAME": "pruned",
        "GIT_COMMITTER_EMAIL": "pruned@example.com",
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
    }
    commits: dict[str, str] = {}
    for instance_id, row in sorted(ROWS.items()):
        clone = repos / row["repo"]
        if not clone.exists():
            clone.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", "-b", "main"], cwd=clone, check=True)
        tree = scratch / instance_id
        tree.mkdir()
        with tarfile.open(HERE / f"{instance_id}.tar.gz") as archive:
            archive.extractall(tree, filter="data")
        index = {**env, "GIT_INDEX_FILE": str(scratch / f"{instance_id}.index")}
        git = ["git", f"--git-dir={clone / '.git'}", f"--work-tree={tree}"]
        subprocess.run([*git, "add", "-A"], env=index, check=True)
        written = _output([*git, "write-tree"], index)
        commit = _output([*git, "commit-tree", written, "-m", instance_id], index)
        subprocess.run([*git, "update-ref", f"refs/heads/{instance_id}", commit], check=True)
        commits[instance_id] = commit
    return commits


def _output(command: list[str], env: dict[str, str]) -> str:
    return subprocess.run(
        command, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """The repositories folder, the tasks file (each row at its pruned commit), and the
    environment the agent runs in (pyenv's Python on ``PATH`` for uv, a runtime cache
    shared by the module, uv's own package cache)."""
    folder = interpreter_folder(PYTHON)
    if folder is None:
        pytest.skip(f"no Python {PYTHON} from pyenv that this user can run")
    repos = tmp_path_factory.mktemp("repos")
    commits = repositories(repos, tmp_path_factory.mktemp("trees"))
    tasks = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    rows = [{**row, "base_commit": commits[i]} for i, row in sorted(ROWS.items())]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    uv_cache = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {
        "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg-cache")),
        "UV_CACHE_DIR": uv_cache,
    }
    return repos, tasks, env


def evaluate(
    run_agent: Callable[..., AgentRun],
    real: tuple[Path, Path, dict[str, str]],
    folder: Path,
    patches: dict[str, str],
) -> tuple[AgentRun, dict[str, dict[str, Any]]]:
    """``agent swebench evaluate`` of ``patches`` (by instance), every repository's settings
    from one specs file: the run and its result lines, by instance."""
    repos, tasks, env = real
    folder.mkdir()
    specs, preds, out = folder / "specs.toml", folder / "preds.jsonl", folder / "out.jsonl"
    specs.write_text(SPECS)
    preds.write_text(
        "".join(
            json.dumps({"instance_id": i, "model_name_or_path": "m", "model_patch": p}) + "\n"
            for i, p in patches.items()
        )
    )
    done = run_agent(
        "swebench", "evaluate", str(preds), "--tasks", str(tasks), "--repos", str(repos),
        "--out", str(out), "--specs", str(specs), "--jobs", "2",
        env=env, timeout=900,
    )  # fmt: skip
    assert out.exists(), done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    return done, {line["instance_id"]: line for line in lines}


@pytest.fixture(scope="module")
def gold(
    real: tuple[Path, Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[AgentRun, dict[str, dict[str, Any]]]:
    """Every instance's reference fix, evaluated in one call (shared by this module's tests,
    so the agent runs here with the caller's environment and a private state folder)."""
    state = tmp_path_factory.mktemp("state")

    def run(*args: str, env: dict[str, str], timeout: float) -> AgentRun:
        done = subprocess.run(
            [str(AGENT), *args],
            env={**os.environ, "XDG_STATE_HOME": str(state), **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return AgentRun(done.returncode, done.stdout, done.stderr, state)

    patches = {i: row["patch"] for i, row in ROWS.items()}
    return evaluate(run, real, tmp_path_factory.mktemp("gold") / "run", patches)


def test_gold_patches_of_real_instances_resolve_broken_ones_do_not_and_empty_ones_are_empty(
    run_agent: Callable[..., AgentRun],
    real: tuple[Path, Path, dict[str, str]],
    gold: tuple[AgentRun, dict[str, dict[str, Any]]],
    tmp_path: Path,
) -> None:
    broken = {i: row["patch"].replace(*BREAKS[i], 1) for i, row in ROWS.items()}
    assert all(broken[i] != row["patch"] for i, row in ROWS.items())

    resolved, gold_lines = gold
    unresolved, broken_lines = evaluate(run_agent, real, tmp_path / "broken", broken)
    _, empty_lines = evaluate(run_agent, real, tmp_path / "empty", dict.fromkeys(ROWS, ""))

    assert resolved.returncode == 0, resolved.stderr[-3000:]
    for instance_id, row in ROWS.items():
        line = gold_lines[instance_id]
        assert line["outcome"] == "resolved", (instance_id, line.get("reason"))
        assert line["grade"]["pass_to_pass"]["passed"] == json.loads(row["PASS_TO_PASS"])
        wrong = broken_lines[instance_id]
        assert wrong["outcome"] == "unresolved", (instance_id, wrong.get("reason"))
        assert wrong["grade"]["fail_to_pass"]["failed"] == json.loads(row["FAIL_TO_PASS"])
        assert empty_lines[instance_id]["outcome"] == "empty_patch"
    assert unresolved.returncode == 1


#: How the official log parser names each outcome of the harness's report.
OFFICIAL_STATUS = {
    "passed": "PASSED",
    "failed": "FAILED",
    "error": "ERROR",
    "skipped": "SKIPPED",
    "xfailed": "XFAIL",
}


def test_every_tests_status_is_what_the_official_log_parser_reads_from_the_same_output(
    gold: tuple[AgentRun, dict[str, dict[str, Any]]],
) -> None:
    """Where the official ``swebench`` package is installed, its pytest log parser reads
    each run's output (pytest's ``-rA`` lines, as its harness runs pytest): each test it
    names has the status the harness's report gives, cut where the parser cuts names."""
    parsers = pytest.importorskip("swebench.harness.log_parsers.python")
    _, lines = gold
    for instance_id, line in lines.items():
        official = parsers.parse_log_pytest(line["run"]["test_output"], None)
        ours: dict[str, str] = {}
        for test in line["run"]["test_report"]["tests"]:
            ours[test["id"].split()[0]] = OFFICIAL_STATUS[test["outcome"]]
        assert official, instance_id
        assert {name: ours.get(name) for name in official} == official, instance_id

"""Real SWE-bench instances, evaluated as a user would: gold patches resolve, empty patches
are empty, a one-line break of a gold patch does not resolve.

The rows (``tests/swebench_real/tasks.jsonl``) and the repositories are public: each
repository is kept as its tree at the instance's base commit, pruned to what the
instance's tests need (``tests/swebench_real/README.md`` says what, and the licences).
A test makes a git repository of that tree, whose commit then stands for the row's
``base_commit``. The instances' Python is pyenv's (skipped where there is none); their
requirements come from the package index through uv's cache.
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
from conftest import AgentRun
from test_older_pythons import interpreter_folder

HERE = Path(__file__).parent / "swebench_real"
ROWS = {
    row["instance_id"]: row
    for row in map(json.loads, (HERE / "tasks.jsonl").read_text().splitlines())
}
#: What each repository's instances need, by version, as the official harness's
#: specifications say; the projects' own dependencies come from their setup.py or setup.cfg.
SPECS: dict[tuple[str, str], dict[str, Any]] = {
    ("marshmallow-code/marshmallow", "2.18"): {
        "python": "3.9",
        "requirements": ["pytest", "pytz", "python-dateutil", "simplejson"],
    },
    ("marshmallow-code/marshmallow", "3.0"): {
        "python": "3.9",
        "requirements": ["pytest", "pytz", "simplejson"],
    },
    ("pylint-dev/astroid", "2.9"): {"python": "3.9", "requirements": ["pytest"]},
    ("pylint-dev/astroid", "2.13"): {"python": "3.9", "requirements": ["pytest"]},
    # sqlfluff 0.6 imports pkg_resources, which newer setuptools no longer has.
    ("sqlfluff/sqlfluff", "0.6"): {"python": "3.9", "requirements": ["pytest", "setuptools<70"]},
    ("sqlfluff/sqlfluff", "0.9"): {"python": "3.9", "requirements": ["pytest"]},
}


#: One line of each gold patch broken: the fix made wrong, the code still valid.
BREAKS = {
    "marshmallow-code__marshmallow-1164": (
        "+            nested_obj = list(nested_obj)",
        "+            nested_obj = nested_obj",
    ),
    "pylint-dev__astroid-1268": ("+        return str(node)", "+        return repr(node)"),
    "marshmallow-code__marshmallow-1359": ("root", "parent"),
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


def repository(instance_id: str, repos: Path) -> str:
    """The instance's pruned tree as a git repository under ``repos``; its commit."""
    row = ROWS[instance_id]
    folder = repos / instance_id / row["repo"]
    if not folder.exists():
        folder.mkdir(parents=True)
        with tarfile.open(HERE / f"{instance_id}.tar.gz") as archive:
            archive.extractall(folder, filter="data")
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
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
            subprocess.run(["git", *args], cwd=folder, env=env, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The repositories folder, and the environment the agent runs in (pyenv's Python on
    ``PATH`` for uv, a runtime cache shared by the module, uv's own package cache)."""
    wanted = {spec["python"] for spec in SPECS.values()}
    folders = [interpreter_folder(version) for version in sorted(wanted)]
    if not all(folders):
        pytest.skip(f"no Python {', '.join(sorted(wanted))} from pyenv that this user can run")
    uv_cache = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = os.pathsep.join([*map(str, folders), os.environ["PATH"]])
    env = {
        "PATH": path,
        "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("xdg-cache")),
        "UV_CACHE_DIR": uv_cache,
    }
    return tmp_path_factory.mktemp("repos"), env


def evaluate(
    run_agent: Callable[..., AgentRun],
    real: tuple[Path, dict[str, str]],
    tmp_path: Path,
    instance_id: str,
    patch: str,
) -> dict[str, Any]:
    repos, env = real
    tmp_path.mkdir()
    row = {**ROWS[instance_id], "base_commit": repository(instance_id, repos)}
    tasks, preds, out = tmp_path / "tasks.jsonl", tmp_path / "preds.jsonl", tmp_path / "out.jsonl"
    tasks.write_text(json.dumps(row) + "\n")
    prediction = {"instance_id": instance_id, "model_name_or_path": "m", "model_patch": patch}
    preds.write_text(json.dumps(prediction) + "\n")
    spec = SPECS[row["repo"], row["version"]]
    requirements = [option for r in spec["requirements"] for option in ("--requirement", r)]
    done = run_agent(
        "swebench", "evaluate", str(preds), "--tasks", str(tasks),
        "--repos", str(repos / instance_id), "--out", str(out),
        "--framework", "pytest", "--python", spec["python"], *requirements,
        env=env, timeout=600,
    )  # fmt: skip
    assert out.exists(), done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.mark.parametrize("instance_id", sorted(ROWS))
def test_the_gold_patch_of_a_real_instance_resolves_and_a_broken_one_does_not(
    instance_id: str,
    run_agent: Callable[..., AgentRun],
    real: tuple[Path, dict[str, str]],
    tmp_path: Path,
) -> None:
    gold = ROWS[instance_id]["patch"]
    old, new = BREAKS[instance_id]
    broken = gold.replace(old, new, 1)
    assert broken != gold

    resolved = evaluate(run_agent, real, tmp_path / "gold", instance_id, gold)
    unresolved = evaluate(run_agent, real, tmp_path / "broken", instance_id, broken)
    empty = evaluate(run_agent, real, tmp_path / "empty", instance_id, "")

    assert resolved["outcome"] == "resolved", resolved.get("reason")
    grade = resolved["grade"]
    assert len(grade["pass_to_pass"]["passed"]) == len(
        json.loads(ROWS[instance_id]["PASS_TO_PASS"])
    )
    assert unresolved["outcome"] == "unresolved", unresolved.get("reason")
    assert unresolved["grade"]["fail_to_pass"]["failed"] == json.loads(
        ROWS[instance_id]["FAIL_TO_PASS"]
    )
    assert empty["outcome"] == "empty_patch"

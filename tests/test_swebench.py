"""SWE-bench round trip: task instances in as git seeds, predictions out, predictions evaluated.

One real repository is built per module (a small package with three bugs, its
history, a later commit on top of the base), with SWE-bench task instances for
it: each a reference fix (``patch``), a ``test_patch`` adding the test that fails
before the fix and passes after it (FAIL_TO_PASS), and tests that pass before
and must still pass (PASS_TO_PASS). Most tests run the task's tests with
``unittest`` on the agent's own Python; one proves the pytest runtime.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import AGENT, AgentRun, FakeProvider

from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.core.swebench import predictions, seeds

OPS_BASE = (
    "def add(a, b):\n    return a + b\n\n\n"
    "def clamp(value, low, high):\n    return max(low, value)\n"
)
OPS_FIXED = OPS_BASE.replace("max(low, value)", "max(low, min(value, high))")
# Passes the new test and breaks the old one: a PASS_TO_PASS test fails.
OPS_BREAKING = OPS_BASE.replace("max(low, value)", "min(value, high)")
# No newline at the end, as some files are: the patch must say so for git to apply it.
TEXT_BASE = "def shout(text):\n    return text.upper()"
TEXT_FIXED = 'def shout(text):\n    return text.upper() + "!"'
STATS_FIXED = "def mean(values):\n    return sum(values) / len(values)\n"
TEST_OPS_BASE = (
    "import unittest\n\nfrom calc.ops import add, clamp\n\n\n"
    "class OpsTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_clamp_low(self):\n        self.assertEqual(clamp(-5, 0, 10), 0)\n"
)
TEST_OPS_AFTER = (
    TEST_OPS_BASE
    + "\n    def test_clamp_high(self):\n        self.assertEqual(clamp(50, 0, 10), 10)\n"
)
TEST_TEXT = (
    "import unittest\n\nfrom calc.text import shout\n\n\n"
    "class ShoutTest(unittest.TestCase):\n"
    "    def test_shout(self):\n        self.assertEqual(shout('hi'), 'HI!')\n"
)
TEST_STATS = (
    "import unittest\n\nfrom calc.stats import mean\n\n\n"
    "class MeanTest(unittest.TestCase):\n"
    "    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n"
)
IDS = ("acme__calc-1", "acme__calc-2", "acme__calc-3")


def git(folder: Path, *args: str, data: str | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=folder,
        input=data,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def write(folder: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)


def diff_of(clone: Path, files: dict[str, str]) -> str:
    """The patch (as git writes it) that makes ``files`` of the clone's HEAD what is given."""
    write(clone, files)
    git(clone, "add", "--intent-to-add", ".")
    patch = git(clone, "diff")
    git(clone, "reset", "-q")
    git(clone, "checkout", "-q", "--", ".")
    git(clone, "clean", "-qfd")
    return patch


@attrs.frozen
class Bench:
    root: Path
    repos: Path
    clone: Path
    base: str
    head: str
    tasks: list[dict[str, Any]]
    cache: Path

    def tasks_file(self, folder: Path, tasks: list[dict[str, Any]] | None = None) -> Path:
        path = folder / "tasks.jsonl"
        path.write_text("".join(json.dumps(t) + "\n" for t in tasks or self.tasks))
        return path

    def predictions_file(self, folder: Path, patches: dict[str, str | None]) -> Path:
        path = folder / "preds.jsonl"
        lines = [
            {"instance_id": i, "model_name_or_path": "m", "model_patch": p}
            for i, p in patches.items()
        ]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path

    def gold(self) -> dict[str, str | None]:
        return {t["instance_id"]: t["patch"] for t in self.tasks}

    def task(self, instance_id: str) -> dict[str, Any]:
        return next(t for t in self.tasks if t["instance_id"] == instance_id)


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    root = tmp_path_factory.mktemp("swebench")
    repos = root / "repos"
    clone = repos / "acme__calc"
    clone.mkdir(parents=True)
    git(clone, "init", "-q", "-b", "main")
    write(
        clone,
        {
            "calc/__init__.py": "",
            "calc/ops.py": "def add(a, b):\n    return a + b\n",
            "tests/__init__.py": "",
            "tests/test_ops.py": TEST_OPS_BASE.split("\n    def test_clamp_low")[0].replace(
                "add, clamp", "add"
            ),
            "README": "calc\n",
        },
    )
    git(clone, "add", ".")
    git(clone, "commit", "-qm", "first")
    write(
        clone,
        {"calc/ops.py": OPS_BASE, "calc/text.py": TEXT_BASE, "tests/test_ops.py": TEST_OPS_BASE},
    )
    git(clone, "add", ".")
    git(clone, "commit", "-qm", "clamp and shout")
    base = git(clone, "rev-parse", "HEAD").strip()
    gold = [
        diff_of(clone, {"calc/ops.py": OPS_FIXED}),
        diff_of(clone, {"calc/text.py": TEXT_FIXED}),
        diff_of(clone, {"calc/stats.py": STATS_FIXED}),  # the fix adds a module
    ]
    test_patches = [
        diff_of(clone, {"tests/test_ops.py": TEST_OPS_AFTER}),
        diff_of(clone, {"tests/test_text.py": TEST_TEXT}),
        diff_of(clone, {"tests/test_stats.py": TEST_STATS}),
    ]
    fail_to_pass = [
        ["tests.test_ops.OpsTest.test_clamp_high"],
        ["tests.test_text.ShoutTest.test_shout"],
        ["tests.test_stats.MeanTest.test_mean"],
    ]
    pass_to_pass = [
        ["tests.test_ops.OpsTest.test_add", "tests.test_ops.OpsTest.test_clamp_low"],
        [],
        [],
    ]
    write(clone, {"README": "calc, later\n"})  # the base is not the clone's HEAD
    git(clone, "commit", "-qam", "later")
    tasks = [
        {
            "instance_id": instance_id,
            "repo": "acme/calc",
            "base_commit": base,
            "patch": gold[n],
            "test_patch": test_patches[n],
            # As the published datasets store them: JSON text (the second as real lists).
            "FAIL_TO_PASS": json.dumps(fail_to_pass[n]) if n != 1 else fail_to_pass[n],
            "PASS_TO_PASS": json.dumps(pass_to_pass[n]) if n != 1 else pass_to_pass[n],
            "problem_statement": f"Problem {n + 1}: the calculator is wrong.\nPlease fix it.",
            "version": "1.0",
            "created_at": "2024-01-01T00:00:00Z",
        }
        for n, instance_id in enumerate(IDS)
    ]
    head = git(clone, "rev-parse", "HEAD").strip()
    return Bench(root, repos, clone, base, head, tasks, root / "cache")


@pytest.fixture
def swe(
    run_agent: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> Callable[..., AgentRun]:
    """``agent swebench ...`` with the module's cache, run in ``tmp_path``."""

    def run(*args: str, env: dict[str, str] | None = None) -> AgentRun:
        return run_agent("swebench", *args, env={"XDG_CACHE_HOME": str(bench.cache), **(env or {})})

    return run


@pytest.fixture
def clone_untouched(bench: Bench) -> Iterator[None]:
    """The user's clone is the same after the test: no file, ref or index changed."""

    def state() -> tuple[str, str, str, bytes]:
        return (
            git(bench.clone, "status", "--porcelain", "--ignored"),
            git(bench.clone, "for-each-ref"),
            git(bench.clone, "rev-parse", "HEAD"),
            (bench.clone / ".git" / "index").read_bytes(),
        )

    before = state()
    yield
    assert state() == before
    assert git(bench.clone, "rev-parse", "HEAD").strip() == bench.head


def import_seeds(swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path, *more: str) -> Path:
    out = tmp_path / "seeds"
    done = swe(
        "import", str(bench.tasks_file(tmp_path)), "--repos", str(bench.repos),
        "--out", str(out), "--framework", "unittest", *more,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def evaluate(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path, patches: dict[str, str | None],
    *more: str, tasks: list[dict[str, Any]] | None = None,
) -> tuple[AgentRun, dict[str, Any], dict[str, dict[str, Any]]]:  # fmt: skip
    folder = tmp_path / f"evaluation-{len(list(tmp_path.glob('evaluation-*')))}"
    folder.mkdir()
    preds = bench.predictions_file(folder, patches)
    results, report = folder / "results.jsonl", folder / "report.json"
    done = swe(
        "evaluate", str(preds), "--tasks", str(bench.tasks_file(folder, tasks)),
        "--repos", str(bench.repos), "--out", str(results), "--report", str(report),
        "--framework", "unittest", "--jobs", "3", *more,
    )  # fmt: skip
    lines = (
        [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    )
    found = json.loads(report.read_text()) if report.exists() else {}
    return done, found, {line["instance_id"]: line for line in lines}


# --- import -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("clone_untouched")
def test_import_writes_a_git_seed_per_task_at_its_base_commit_with_its_tests_and_lists(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    out = import_seeds(swe, bench, tmp_path)

    first = load_seed(out / "acme__calc-1")
    assert first.name == "acme__calc-1"
    assert first.source is not None
    assert first.source.commit == bench.base
    assert first.source.repository == str(bench.clone.resolve())
    assert first.fail_to_pass == ("tests.test_ops.OpsTest.test_clamp_high",)
    assert first.pass_to_pass == (
        "tests.test_ops.OpsTest.test_add",
        "tests.test_ops.OpsTest.test_clamp_low",
    )
    assert first.test_command == ("python", "-m", "unittest", "tests.test_ops")
    # The test file is the one test_patch leaves, laid over the tree's older copy.
    assert first.read_tree_files(["tests/test_ops.py"])["tests/test_ops.py"].decode() == (
        TEST_OPS_AFTER
    )
    assert first.hidden_files == ("tests/test_ops.py",)  # SWE-bench's setting: the default
    assert first.editable_files == ("calc/ops.py",)  # oracle: the file the fix changes
    assert "oracle" in first.description
    assert first.default_prompt == bench.task("acme__calc-1")["problem_statement"]
    assert first.runtime is None  # unittest on the agent's Python; no pyproject in the clone

    second = load_seed(out / "acme__calc-2")  # lists given as real lists, not JSON text
    assert second.fail_to_pass == ("tests.test_text.ShoutTest.test_shout",)
    assert second.pass_to_pass == ()
    assert "tests/test_text.py" in second.files

    # The fix adds calc/stats.py: the seed has it, empty, for a plan to replace.
    third = load_seed(out / "acme__calc-3")
    assert third.editable_files == ("calc/stats.py",)
    assert (out / "acme__calc-3" / "calc" / "stats.py").read_bytes() == b""

    # The reference fix is nowhere in the seeds.
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert "min(value, high)" not in text, path
            assert '"!"' not in text, path
    batch = [json.loads(line) for line in (out / "batch.jsonl").read_text().splitlines()]
    assert batch == [{"id": i, "seed": str(out.resolve() / i)} for i in IDS]


def test_import_with_patterns_and_visible_tests_shows_the_tests_and_says_no_oracle(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    out = import_seeds(swe, bench, tmp_path, "--editable", "calc/*.py", "--visible-tests", "--json")
    seed = load_seed(out / "acme__calc-1")
    assert seed.hidden_files == ()
    assert seed.test_files == ("tests/test_ops.py",)
    assert seed.editable_files == ("calc/__init__.py", "calc/ops.py", "calc/text.py")
    assert "oracle" not in seed.description


def test_import_prints_that_oracle_editable_files_come_from_the_fix(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    out = tmp_path / "seeds"
    done = swe(
        "import", str(bench.tasks_file(tmp_path)), "--repos", str(bench.repos),
        "--out", str(out), "--framework", "unittest", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {row["instance_id"]: row for row in json.loads(done.stdout)["seeds"]}
    assert rows["acme__calc-1"]["editable_from"] == "oracle"
    assert rows["acme__calc-1"]["editable"] == ["calc/ops.py"]
    shown = swe(
        "import",
        str(bench.tasks_file(tmp_path)),
        "--repos",
        str(bench.repos),
        "--out",
        str(out),
        "--framework",
        "unittest",
    )  # fmt: skip  (a second import replaces the first)
    assert shown.returncode == 0, shown.stderr
    assert "editable: oracle (the files the reference fix changes): calc/ops.py" in shown.stdout


def test_a_pytest_seed_runs_the_test_files_with_pytest_and_installs_it(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    out = tmp_path / "seeds"
    done = swe(
        "import", str(bench.tasks_file(tmp_path)), "--repos", str(bench.repos), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    seed = load_seed(out / "acme__calc-1")
    assert seed.test_command == (
        "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_ops.py",
    )  # fmt: skip
    assert seed.runtime is not None
    assert seed.runtime.requirements == ("pytest",)
    assert not seed.runtime.project


@pytest.mark.usefixtures("clone_untouched")
def test_each_bad_task_line_gets_one_clear_error_and_the_good_ones_still_become_seeds(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    good = bench.task("acme__calc-1")

    made = iter(range(100))

    def variant(**changes: Any) -> str:
        return json.dumps({**good, "instance_id": f"acme__calc-x{next(made)}", **changes})

    stale_tests = good["test_patch"].replace("clamp(-5, 0, 10), 0", "clamp(-6, 0, 10), 0")
    cases: list[tuple[str, str | None]] = [
        ("{not json", "not JSON"),
        (json.dumps([good]), "expected a JSON object, got list"),
        (variant(base_commit=None), "base_commit: must be a string, got NoneType"),
        (variant(base_commit="abc123"), "base_commit: 'abc123' is not a full commit ID"),
        (variant(repo="../calc"), "repo: '../calc' is not a GitHub repository"),
        (variant(FAIL_TO_PASS="[oops"), "FAIL_TO_PASS: is a string that is not a JSON list"),
        (variant(PASS_TO_PASS=[1]), "PASS_TO_PASS: 1 is not a test ID"),
        (variant(FAIL_TO_PASS=[]), "FAIL_TO_PASS: is empty"),
        (variant(repo="acme/nothere"), "repo: no clone of acme/nothere under"),
        (variant(base_commit="0" * 40), f"base_commit: commit {'0' * 40} is not in"),
        (variant(test_patch=stale_tests), "test_patch: test_patch does not apply"),
        (variant(patch="not a patch\n"), "patch: the reference fix does not apply"),
        (variant(instance_id="x\u0007y"), "instance_id: must be 1 to 256 characters"),
        (variant(problem_statement=7), "problem_statement: must be a string, got int"),
        ('{"instance_id": "a\\udcff"}', "instance_id: holds a lone surrogate"),
        (json.dumps(good), None),
        (json.dumps(good), "instance_id: 'acme__calc-1' was already given on line 16"),
        ("", None),
        ("# a comment", None),
    ]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(text + "\n" for text, _ in cases))
    out = tmp_path / "seeds"
    done = swe(
        "import", str(tasks), "--repos", str(bench.repos), "--out", str(out),
        "--framework", "unittest",
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    refused = [line for line in done.stderr.splitlines() if "no seed was written" in line]
    expected = [(n, message) for n, (_, message) in enumerate(cases, 1) if message is not None]
    assert len(refused) == len(expected), done.stderr
    for line, (number, message) in zip(refused, expected, strict=True):
        assert f"tasks.jsonl line {number}: {message}" in line, line
    assert sorted(path.name for path in out.iterdir()) == ["acme__calc-1", "batch.jsonl"]


def test_an_unreadable_tasks_file_is_a_usage_error(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "fifo")
    for given in (tmp_path / "missing.jsonl", tmp_path / "fifo"):
        done = swe("import", str(given), "--repos", str(bench.repos), "--out", str(tmp_path / "s"))
        assert done.returncode == 2
        assert "usage error" in done.stderr
        assert "Traceback" not in done.stderr


def test_instance_ids_become_safe_distinct_seed_names() -> None:
    assert seeds.seed_name("django__django-11099") == "django__django-11099"
    names = {
        seeds.seed_name(given)
        for given in ("Acme__Calc-1", "acme__calc-1", "../../etc/passwd", "a b", "a/b", "x" * 300)
    }
    assert len(names) == 6
    for name in names:
        assert load_name_ok(name), name
    assert seeds.seed_name("../../etc/passwd").startswith("etc-passwd-")


def load_name_ok(name: str) -> bool:
    import re

    return re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", name) is not None


# --- predictions ------------------------------------------------------------------------------


@pytest.mark.usefixtures("clone_untouched")
def test_batch_results_become_predictions_that_git_apply_takes_on_the_base_commit_and_resolve(
    swe: Callable[..., AgentRun],
    run_agent: Callable[..., AgentRun],
    provider: FakeProvider,
    bench: Bench,
    tmp_path: Path,
) -> None:
    out = import_seeds(swe, bench, tmp_path)
    provider.reply_plan(("calc/ops.py", OPS_FIXED))
    wrong = TEXT_FIXED.replace('"!"', '"?"')  # its last line has no newline either
    provider.reply_plan(("calc/text.py", wrong))
    provider.reply_plan(("calc/stats.py", STATS_FIXED))  # fills the file the seed adds empty
    results = tmp_path / "results.jsonl"
    batch = run_agent(
        "batch", str(out / "batch.jsonl"), "--out", str(results), "--jobs", "1",
        env={"XDG_CACHE_HOME": str(bench.cache)},
    )  # fmt: skip
    statuses = [json.loads(line)["status"] for line in results.read_text().splitlines()]
    assert statuses == ["passed", "failed", "passed"], batch.stderr
    # The planner never saw the hidden tests.
    for request in provider.requests:
        assert "test_clamp_high" not in request.body.decode()

    preds = tmp_path / "preds.jsonl"
    done = swe(
        "predictions", str(results), "--model-name", "acme/model-1", "--out", str(preds),
        "--only-passed",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    assert [line["instance_id"] for line in lines] == list(IDS)
    assert {line["model_name_or_path"] for line in lines} == {"acme/model-1"}
    assert lines[1]["model_patch"] == ""  # its run did not pass
    assert lines[0]["model_patch"].startswith("diff --git a/calc/ops.py b/calc/ops.py\n")
    assert "new file mode 100644\n--- /dev/null\n+++ b/calc/stats.py" in lines[2]["model_patch"]
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(bench.clone), str(checkout))
    git(checkout, "checkout", "-q", bench.base)
    for line in lines[0], lines[2]:
        git(checkout, "apply", "--check", data=line["model_patch"])
    # ... and applied, they are the fixes.
    git(checkout, "apply", data=lines[0]["model_patch"] + lines[2]["model_patch"])
    assert (checkout / "calc/ops.py").read_text() == OPS_FIXED
    assert (checkout / "calc/stats.py").read_text() == STATS_FIXED

    # By default (or with --include-failed) the failing run's patch is given too, and applies.
    every = tmp_path / "every.jsonl"
    done = swe("predictions", str(results), "--model-name", "m", "--out", str(every))
    assert done.returncode == 0, done.stderr
    again = tmp_path / "again.jsonl"
    swe("predictions", str(results), "--model-name", "m", "--out", str(again), "--include-failed")
    assert again.read_text() == every.read_text()
    second = json.loads(every.read_text().splitlines()[1])["model_patch"]
    git(checkout, "apply", data=second)
    assert (checkout / "calc/text.py").read_text() == wrong

    # The predictions evaluate: two resolved, one empty.
    evaluated, report, _ = evaluate(
        swe, bench, tmp_path, {line["instance_id"]: line["model_patch"] for line in lines}
    )
    assert report["resolved_ids"] == ["acme__calc-1", "acme__calc-3"], evaluated.stderr
    assert report["empty_patch_ids"] == ["acme__calc-2"]
    assert evaluated.returncode == 1


def test_a_result_is_mapped_to_its_instance_by_its_seed_folder_even_under_another_task_id(
    tmp_path: Path,
) -> None:
    from sandboxed_coding_agent.core.batches.batch import TaskResult

    folder = tmp_path / "some-seed"
    folder.mkdir()
    (folder / seeds.INSTANCE_FILE).write_text(json.dumps({"instance_id": "Owner__Repo-7"}))
    mapped = TaskResult(id="line-3", line=3, seed=str(folder), status="failed", seconds=1.0)
    plain = TaskResult(
        id="owner__repo-8", line=4, seed="not-a-folder", status="failed", seconds=1.0
    )
    assert predictions.instance_of(mapped) == "Owner__Repo-7"
    assert predictions.instance_of(plain) == "owner__repo-8"


def test_git_headers_are_added_by_hunk_counts_never_to_a_line_that_looks_like_a_header() -> None:
    diff = (
        "--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n"
        "--- a/y.txt\n"  # a removed line whose text is "-- a/y.txt"
        "+++ b/y.txt\n"  # an added line whose text is "++ b/y.txt"
        "--- a/z.txt\n+++ b/z.txt\n@@ -1 +1 @@\n-1\n\\ No newline at end of file\n+2\n"
    )
    headed = predictions.with_git_headers(diff)
    assert headed.count("diff --git") == 2
    assert headed.startswith("diff --git a/x.txt b/x.txt\n")
    assert "diff --git a/z.txt b/z.txt\n--- a/z.txt" in headed
    assert "diff --git a/y.txt" not in headed


def test_damaged_results_lines_are_named_and_the_rest_become_predictions(
    swe: Callable[..., AgentRun], tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    good = {"id": "acme__calc-1", "line": 1, "seed": "x", "status": "failed", "seconds": 1.0}
    results.write_text("{broken\n" + json.dumps(good) + "\n")
    preds = tmp_path / "preds.jsonl"
    done = swe("predictions", str(results), "--model-name", "m", "--out", str(preds))
    assert done.returncode == 2
    assert "line 1 is not a result" in done.stderr
    assert json.loads(preds.read_text()) == {
        "instance_id": "acme__calc-1",
        "model_name_or_path": "m",
        "model_patch": "",
    }
    refused = swe("predictions", str(results), "--model-name", "m", "--out", str(results))
    assert refused.returncode == 2
    assert "name another file" in refused.stderr


# --- evaluate ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("clone_untouched")
def test_gold_patches_resolve_every_task_and_the_report_has_swebench_shape(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    done, report, lines = evaluate(
        swe, bench, tmp_path, bench.gold(), "--html", str(tmp_path / "r.html")
    )
    assert done.returncode == 0, done.stderr
    assert report == {
        "total_instances": 3,
        "submitted_instances": 3,
        "completed_instances": 3,
        "resolved_instances": 3,
        "unresolved_instances": 0,
        "infra_failure_instances": 0,
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": 0,
        "error_instances": 0,
        "completed_ids": list(IDS),
        "incomplete_ids": [],
        "empty_patch_ids": [],
        "submitted_ids": list(IDS),
        "resolved_ids": list(IDS),
        "unresolved_ids": [],
        "infra_failure_ids": [],
        "ambiguous_failure_ids": [],
        "failure_reasons": {},
        "error_ids": [],
        "schema_version": 2,
    }
    for instance_id in IDS:
        line = lines[instance_id]
        assert line["outcome"] == "resolved"
        assert line["resolution"] == "FULL"
        assert line["grade"]["fail_to_pass"]["failed"] == []
        assert len(line["grade"]["fail_to_pass"]["passed"]) == 1
    assert lines["acme__calc-1"]["grade"]["pass_to_pass"]["passed"] == [
        "tests.test_ops.OpsTest.test_add",
        "tests.test_ops.OpsTest.test_clamp_low",
    ]
    assert lines["acme__calc-3"]["changed_files"] == ["calc/stats.py"]  # a new file
    assert "resolved FULL" in (tmp_path / "r.html").read_text()


@pytest.mark.usefixtures("clone_untouched")
def test_empty_non_applying_and_breaking_patches_are_told_apart(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    breaking = diff_of_base(bench, tmp_path, {"calc/ops.py": OPS_BREAKING})
    stale = bench.task("acme__calc-2")["patch"].replace("text.upper()\n", "text.lower()\n", 1)
    done, report, lines = evaluate(
        swe, bench, tmp_path,
        {"acme__calc-1": breaking, "acme__calc-2": stale, "acme__calc-3": ""},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr

    assert report["unresolved_ids"] == ["acme__calc-1"]
    assert report["error_ids"] == ["acme__calc-2"]
    assert report["empty_patch_ids"] == ["acme__calc-3"]
    assert report["completed_ids"] == ["acme__calc-1"]
    assert report["resolved_ids"] == []

    broken = lines["acme__calc-1"]
    assert broken["outcome"] == "unresolved"
    assert broken["resolution"] == "NO"  # its FAIL_TO_PASS test passes, a PASS_TO_PASS one fails
    assert broken["grade"]["fail_to_pass"]["passed"] == ["tests.test_ops.OpsTest.test_clamp_high"]
    assert broken["grade"]["pass_to_pass"]["failed"] == ["tests.test_ops.OpsTest.test_clamp_low"]
    assert "test_clamp_low" in broken["reason"]

    refused = lines["acme__calc-2"]
    assert refused["outcome"] == "error"
    assert refused["error_kind"] == "patch"
    assert refused["reason"].startswith("patch does not apply")
    assert refused["run"] is None
    assert lines["acme__calc-3"]["outcome"] == "empty_patch"


@pytest.mark.usefixtures("clone_untouched")
def test_a_patch_that_changes_nothing_is_unresolved_and_tests_that_never_run_are_the_machines(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    # A hunk that puts back the line it takes out: it applies, and the tree stays the base's.
    unchanged = (
        "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n-calc\n+calc\n"
    )
    # A task whose test module needs a package the runtime lacks: no test runs, ever.
    needs = (
        "import not_installed_anywhere\nimport unittest\n\n\nclass NeedsTest(unittest.TestCase):\n"
    )
    needs += "    def test_it(self):\n        pass\n"
    cannot_run = {
        **bench.task("acme__calc-2"),
        "instance_id": "acme__calc-4",
        "test_patch": diff_of_base(bench, tmp_path, {"tests/test_needs.py": needs}),
        "FAIL_TO_PASS": ["tests.test_needs.NeedsTest.test_it"],
    }
    # A patch that breaks the import the task's tests need: the patch's failure, perhaps.
    breaks_import = diff_of_base(
        bench, tmp_path, {"calc/text.py": "import not_installed_anywhere\n" + TEXT_BASE}
    )
    done, report, lines = evaluate(
        swe, bench, tmp_path,
        {
            "acme__calc-1": unchanged,
            "acme__calc-2": breaks_import,
            "acme__calc-4": cannot_run["patch"],
        },
        tasks=[bench.task("acme__calc-1"), bench.task("acme__calc-2"), cannot_run],
    )  # fmt: skip

    assert done.returncode == 1, done.stderr
    nothing = lines["acme__calc-1"]
    assert (nothing["outcome"], nothing["resolution"]) == ("unresolved", "NO")
    assert "changes nothing" in nothing["reason"]
    machine = lines["acme__calc-4"]
    assert (machine["outcome"], machine["error_kind"]) == ("error", "environment")
    assert machine["reason"].startswith("no test ran, before the patch or after it")
    assert "not_installed_anywhere" in machine["run"]["test_output"]
    assert (machine["failure_reason"], machine["failure_tier"]) == (
        "tests_cannot_run",
        "environment",
    )
    broken = lines["acme__calc-2"]
    assert (broken["outcome"], broken["failure_tier"]) == ("unresolved", "ambiguous")
    assert report["unresolved_ids"] == ["acme__calc-1", "acme__calc-2"]
    assert report["error_ids"] == ["acme__calc-4"]
    assert report["infra_failure_ids"] == ["acme__calc-4"]
    assert report["ambiguous_failure_ids"] == ["acme__calc-2"]
    assert report["failure_reasons"] == {
        "acme__calc-2": "missing_module",
        "acme__calc-4": "tests_cannot_run",
    }


@pytest.mark.parametrize("shadow", ["calc/ops/__init__.py", "tests/test_ops/__init__.py"])
def test_a_patch_that_breaks_its_own_tests_is_never_taken_for_the_machine(
    shadow: str, swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    # A package the patch adds shadows the module the tests import (or the test module):
    # no test runs with the patch, and the run without it must not have that file at all.
    patch = diff_of_base(bench, tmp_path, {shadow: "VERSION = 2\n"})

    done, report, lines = evaluate(swe, bench, tmp_path, {"acme__calc-1": patch})
    assert done.returncode == 1, done.stderr

    line = lines["acme__calc-1"]
    assert line["outcome"] == "unresolved", line.get("reason")
    assert line["failure_tier"] != "environment"
    assert report["infra_failure_ids"] == []
    assert report["unresolved_ids"] == ["acme__calc-1"]


def diff_of_base(bench: Bench, tmp_path: Path, files: dict[str, str]) -> str:
    """The patch, as git writes it, that makes ``files`` of the base commit what is given."""
    checkout = tmp_path / f"work-{len(list(tmp_path.glob('work-*')))}"
    git(tmp_path, "clone", "-q", str(bench.clone), str(checkout))
    git(checkout, "checkout", "-q", bench.base)
    return diff_of(checkout, files)


def test_a_patch_to_the_tasks_test_files_is_overridden_by_the_tasks_own(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    # The model "fixes" the new test instead of the code: the task's test file wins.
    cheat = TEST_OPS_AFTER.replace("clamp(50, 0, 10), 10", "10, 10")
    patch = diff_of_base(
        bench, tmp_path, {"tests/test_ops.py": cheat, "calc/text.py": TEXT_BASE + "\n"}
    )
    done, report, lines = evaluate(swe, bench, tmp_path, {"acme__calc-1": patch})
    assert done.returncode == 1, done.stderr
    assert report["unresolved_ids"] == ["acme__calc-1"], done.stderr
    line = lines["acme__calc-1"]
    assert line["ignored_files"] == ["tests/test_ops.py"]
    assert line["changed_files"] == ["calc/text.py"]
    assert line["grade"]["fail_to_pass"]["failed"] == ["tests.test_ops.OpsTest.test_clamp_high"]
    assert report["incomplete_ids"] == ["acme__calc-2", "acme__calc-3"]


def test_bad_prediction_lines_are_named_and_the_rest_are_evaluated(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "not json\n"
        + json.dumps({"instance_id": "nobody__nothing-1", "model_patch": "x"}) + "\n"
        + json.dumps({"instance_id": "acme__calc-2", "model_patch": 5}) + "\n"
        + json.dumps({"instance_id": "acme__calc-1", "model_name_or_path": "m",
                      "model_patch": bench.task("acme__calc-1")["patch"]}) + "\n"
        + json.dumps({"instance_id": "acme__calc-1", "model_patch": ""}) + "\n"
    )  # fmt: skip
    results = tmp_path / "results.jsonl"
    done = swe(
        "evaluate", str(preds), "--tasks", str(bench.tasks_file(tmp_path)),
        "--repos", str(bench.repos), "--out", str(results), "--framework", "unittest", "--json",
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "line 1: not JSON" in done.stderr
    assert "line 2: instance_id: 'nobody__nothing-1' is no task of" in done.stderr
    assert "line 3: model_patch: must be a string, got int" in done.stderr
    assert "line 5: instance_id: 'acme__calc-1' already has a prediction on line 4" in done.stderr
    assert json.loads(done.stdout)["resolved_ids"] == ["acme__calc-1"]
    # The results file is never overwritten.
    again = swe(
        "evaluate", str(preds), "--tasks", str(bench.tasks_file(tmp_path)),
        "--repos", str(bench.repos), "--out", str(results), "--framework", "unittest",
    )  # fmt: skip
    assert again.returncode == 2
    assert "is not empty" in again.stderr


@pytest.mark.usefixtures("clone_untouched")
def test_a_pytest_task_resolves_in_the_pytest_runtime(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    uv_cache = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    task = {
        **bench.task("acme__calc-1"),
        "FAIL_TO_PASS": ["tests/test_ops.py::OpsTest::test_clamp_high"],
        "PASS_TO_PASS": [
            "tests/test_ops.py::OpsTest::test_add",
            "tests/test_ops.py::OpsTest::test_clamp_low",
        ],
    }
    tasks = bench.tasks_file(tmp_path, [task])
    preds = bench.predictions_file(
        tmp_path, {"acme__calc-1": diff_of_base(bench, tmp_path, {"calc/ops.py": OPS_BREAKING})}
    )
    done = swe(
        "evaluate", str(preds), "--tasks", str(tasks), "--repos", str(bench.repos),
        "--out", str(tmp_path / "results.jsonl"), "--json",
        env={"UV_CACHE_DIR": uv_cache},
    )  # fmt: skip
    assert json.loads(done.stdout)["unresolved_ids"] == ["acme__calc-1"], done.stderr
    line = json.loads((tmp_path / "results.jsonl").read_text())
    assert line["run"]["test_report"]["framework"] == "pytest"
    assert line["grade"]["pass_to_pass"]["failed"] == ["tests/test_ops.py::OpsTest::test_clamp_low"]

    gold = bench.predictions_file(tmp_path, {"acme__calc-1": task["patch"]})
    done = swe(
        "evaluate", str(gold), "--tasks", str(tasks), "--repos", str(bench.repos),
        "--out", str(tmp_path / "gold-results.jsonl"), "--json",
        env={"UV_CACHE_DIR": uv_cache},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resolved_ids"] == ["acme__calc-1"]


# --- the documentation's example --------------------------------------------------------------


def documented_round_trip() -> list[list[str]]:
    """The command lines of the console example in the docs' "SWE-bench round trip"."""
    text = (Path(__file__).parents[1] / "docs" / "real-repositories.md").read_text()
    section = text.split("## SWE-bench round trip", 1)[1]
    block = section.split("```console\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line.removeprefix("$ ")) for line in block.splitlines() if line]


@pytest.mark.usefixtures("clone_untouched")
def test_the_documented_round_trip_resolves_every_task_with_the_reference_fixes(
    agent_env: dict[str, str], provider: FakeProvider, bench: Bench, tmp_path: Path
) -> None:
    commands = documented_round_trip()
    assert [command[:3] for command in commands] == [
        ["agent", "swebench", "import"],
        ["agent", "batch", "seeds/batch.jsonl"],
        ["agent", "swebench", "predictions"],
        ["agent", "swebench", "evaluate"],
    ]
    bench.tasks_file(tmp_path)
    (tmp_path / "repos").symlink_to(bench.repos)
    provider.reply_plan(("calc/ops.py", OPS_FIXED))
    provider.reply_plan(("calc/text.py", TEXT_FIXED))
    provider.reply_plan(("calc/stats.py", STATS_FIXED))
    env = {**agent_env, "XDG_CACHE_HOME": str(bench.cache)}
    for command in commands:
        done = subprocess.run(
            [str(AGENT), *command[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["resolved_ids"] == list(IDS)


def test_patches_no_whole_file_plan_can_hold_are_errors_of_the_patch(
    swe: Callable[..., AgentRun], bench: Bench, tmp_path: Path
) -> None:
    deleting = (
        "diff --git a/calc/text.py b/calc/text.py\ndeleted file mode 100644\n"
        "--- a/calc/text.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n"
        "-def shout(text):\n-    return text.upper()\n\\ No newline at end of file\n"
    )
    linking = (
        "diff --git a/calc/passwd.py b/calc/passwd.py\nnew file mode 120000\n"
        "--- /dev/null\n+++ b/calc/passwd.py\n@@ -0,0 +1 @@\n+/etc/passwd\n"
        "\\ No newline at end of file\n"
    )
    escaping = (
        "diff --git a/.git/config b/.git/config\nnew file mode 100644\n"
        "--- /dev/null\n+++ b/.git/config\n@@ -0,0 +1 @@\n+[core]\n"
    )
    done, report, lines = evaluate(
        swe, bench, tmp_path,
        {"acme__calc-1": deleting, "acme__calc-2": linking, "acme__calc-3": escaping},
    )  # fmt: skip
    assert report["error_ids"] == list(IDS), done.stderr
    assert {line["error_kind"] for line in lines.values()} == {"patch"}
    assert "deletes calc/text.py" in lines["acme__calc-1"]["reason"]
    assert "calc/passwd.py a link" in lines["acme__calc-2"]["reason"]
    assert lines["acme__calc-3"]["reason"].startswith("patch does not apply")
    assert "invalid path '.git/config'" in lines["acme__calc-3"]["reason"]


def test_the_runtime_installs_the_project_when_its_pyproject_has_a_project_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandboxed_coding_agent.core.swebench import patches

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    commits = {}
    for name, pyproject in (
        ("with-project", '[project]\nname = "x"\ndependencies = ["attrs"]\n'),
        ("tool-only", "[tool.black]\nline-length = 100\n"),
        ("none", None),
    ):
        clone = tmp_path / name
        clone.mkdir()
        git(clone, "init", "-q")
        write(clone, {"x.py": "", **({"pyproject.toml": pyproject} if pyproject else {})})
        git(clone, "add", ".")
        git(clone, "commit", "-qm", "one")
        commit = git(clone, "rev-parse", "HEAD").strip()
        commits[name] = (patches.repository(clone, commit), commit)

    def runtime(name: str, **options: Any) -> dict[str, Any] | None:
        folder, commit = commits[name]
        return seeds.runtime_of(seeds.ImportOptions(**options), folder, commit)

    assert runtime("with-project") == {"requirements": ["pytest"], "project": True}
    assert runtime("with-project", project=False) == {"requirements": ["pytest"]}
    assert runtime("tool-only") == {"requirements": ["pytest"]}
    assert runtime("none", framework="unittest") is None
    assert runtime("none", framework="unittest", project=True, python="3.12") == {
        "python": "3.12",
        "project": True,
    }
    assert runtime("none", requirements=("pytest>=8", "hypothesis")) == {
        "requirements": ["pytest>=8", "hypothesis"]
    }


@pytest.mark.usefixtures("clone_untouched")
def test_an_exploring_batchs_results_become_predictions_as_any_batchs(
    swe: Callable[..., AgentRun],
    run_agent: Callable[..., AgentRun],
    provider: FakeProvider,
    bench: Bench,
    tmp_path: Path,
) -> None:
    out = import_seeds(swe, bench, tmp_path)
    first = json.loads((out / "batch.jsonl").read_text().splitlines()[0])
    tasks = tmp_path / "explore.jsonl"
    tasks.write_text(json.dumps({**first, "planner": "explore"}) + "\n")
    provider.reply_bash(f"cat > calc/ops.py <<'END'\n{OPS_FIXED}END")
    provider.reply_calls(("submit", {}))
    results = tmp_path / "results.jsonl"
    batch = run_agent(
        "batch", str(tasks), "--out", str(results), "--jobs", "1",
        env={"XDG_CACHE_HOME": str(bench.cache)},
    )  # fmt: skip
    assert json.loads(results.read_text())["status"] == "passed", batch.stderr

    preds = tmp_path / "preds.jsonl"
    done = swe("predictions", str(results), "--model-name", "m", "--out", str(preds))

    assert done.returncode == 0, done.stderr
    line = json.loads(preds.read_text())
    assert line["instance_id"] == IDS[0]
    assert line["model_patch"].startswith("diff --git a/calc/ops.py b/calc/ops.py\n")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(bench.clone), str(checkout))
    git(checkout, "checkout", "-q", bench.base)
    git(checkout, "apply", data=line["model_patch"])
    assert (checkout / "calc/ops.py").read_text() == OPS_FIXED

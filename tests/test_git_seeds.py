"""Git seeds: a repository at a commit, fetched once, checked out once, bound read-only."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun

from sandboxed_coding_agent.core.seeds import git_source
from sandboxed_coding_agent.core.seeds.manifest import ManifestError, load_seed
from sandboxed_coding_agent.plugins.local_sandbox.tree import tree_mounts

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = (
    "import unittest\n\nfrom pkg.calc import add\n\n\n"
    "class Add(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def make_repository(folder: Path, *, extra: dict[str, str] | None = None) -> str:
    """A repository with a broken ``pkg/calc.py`` at its second commit; returns that commit."""
    (folder / "pkg").mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "calc.py").write_text(FIXED)
    (folder / "README").write_text("calc\n")
    git(folder, "add", ".")
    git(folder, "commit", "-qm", "first")
    (folder / "pkg" / "calc.py").write_text(BROKEN)
    for path, text in (extra or {}).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    git(folder, "add", ".")
    git(folder, "commit", "-qm", "a bug")
    return git(folder, "rev-parse", "HEAD")


def seed_folder(folder: Path, repository: str, commit: str, *, tests: str = TEST) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "__init__.py").write_text("")
    (folder / "tests" / "test_calc.py").write_text(tests)
    (folder / "seed.toml").write_text(
        'name = "git-calc"\ndescription = "add() from a repository"\n'
        'editable = ["pkg/calc.py"]\ntests = ["tests/*.py"]\n'
        'test_command = ["python", "-m", "unittest", "discover", "-s", "tests", "-t", "."]\n'
        'default_prompt = "Fix add."\n'
        f"[source]\ngit = {json.dumps(repository)}\ncommit = {json.dumps(commit)}\n"
    )
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


@pytest.fixture
def repository(tmp_path: Path) -> tuple[Path, str]:
    folder = tmp_path / "repo"
    return folder, make_repository(folder)


def run_with(
    run_agent: Callable[..., AgentRun], seed: Path, plan: Path, cache: Path, *more: str
) -> AgentRun:
    return run_agent(
        "run", "--seed", str(seed), "--plan", str(plan), *more, env={"XDG_CACHE_HOME": str(cache)}
    )


def fixed_plan(write_plan: Callable[..., Path]) -> Path:
    return write_plan({"files": [{"path": "pkg/calc.py", "content": FIXED}]})


def passed_tests(done: AgentRun) -> list[str]:
    report = json.loads(done.stdout)["test_report"]
    return [test["id"] for test in report["tests"] if test["outcome"] == "passed"]


def git_commands(done: AgentRun) -> list[str]:
    """The git subcommands the agent started, in order."""
    found = []
    for argv in done.processes:
        if argv and os.path.basename(argv[0]) == "git":
            words = [a for a in argv[1:] if not a.startswith("-") and "=" not in a]
            found.append(words[0] if words else "")
    return found


def test_a_git_seed_from_a_path_is_proved_in_the_sandbox(
    tmp_path: Path, repository: tuple[Path, str], cache: Path, run_agent, write_plan
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    passed = run_with(run_agent, seed, fixed_plan(write_plan), cache, "--json")
    assert passed.returncode == 0, passed.stderr
    assert passed_tests(passed) == ["tests.test_calc.Add.test_add"]
    unchanged = run_with(
        run_agent,
        seed,
        write_plan({"files": [{"path": "pkg/calc.py", "content": BROKEN + "\n"}]}),
        cache,
    )
    assert unchanged.returncode == 1
    # The repository and its working tree are never written.
    assert (repo / "pkg" / "calc.py").read_text() == BROKEN
    assert git(repo, "status", "--porcelain") == ""


def test_a_git_seed_has_room_for_real_files_unless_its_limits_say_otherwise(
    tmp_path: Path, repository: tuple[Path, str], cache: Path, run_agent, write_plan
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    # A file of a real project, and a whole-file plan for it, as an edit format makes one.
    large = FIXED + "".join(f"# line {n:05} of a long module\n" for n in range(1000))
    assert 12_000 < len(large) < 256 * 1024

    assert load_seed(str(seed)).limits.max_total_bytes == 256 * 1024
    plan = write_plan({"files": [{"path": "pkg/calc.py", "content": large}]})
    assert run_with(run_agent, seed, plan, cache).returncode == 0

    with (seed / "seed.toml").open("a") as manifest:
        manifest.write("[limits]\nmax_total_bytes = 12000\n")
    assert load_seed(str(seed)).limits.max_total_bytes == 12_000
    refused = run_with(run_agent, seed, plan, cache)
    assert refused.returncode == 4
    assert (
        "the limit is 12000 (the seed's [limits] max_total_bytes in its seed.toml; "
        "it may be set up to 1048576)"
    ) in refused.stderr


def test_a_git_seed_from_a_file_url_works_offline(
    tmp_path: Path, repository: tuple[Path, str], cache: Path, run_agent, write_plan
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", f"file://{repo}", commit)
    done = run_with(run_agent, seed, fixed_plan(write_plan), cache)
    assert done.returncode == 0, done.stderr


def test_a_relative_path_is_relative_to_the_seed_folder(
    tmp_path: Path, repository: tuple[Path, str], cache: Path
) -> None:
    _, commit = repository
    seed = seed_folder(tmp_path / "seed", "../repo", commit)
    assert load_seed(seed).source == git_source.SourceTree(str(tmp_path / "repo"), commit)


def test_a_second_run_neither_fetches_nor_checks_out_again(
    tmp_path: Path, repository: tuple[Path, str], cache: Path, run_agent, write_plan
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    plan = fixed_plan(write_plan)
    first = run_with(run_agent, seed, plan, cache)
    assert first.returncode == 0, first.stderr
    assert {"fetch", "checkout-index"} <= set(git_commands(first))
    tree = cache / "sandboxed-coding-agent" / "git" / "trees" / commit
    before = tree.stat().st_ino
    second = run_with(run_agent, seed, plan, cache)
    assert second.returncode == 0, second.stderr
    assert not {"fetch", "checkout-index", "read-tree", "init"} & set(git_commands(second))
    assert tree.stat().st_ino == before


def test_a_commit_that_is_not_there_is_one_clear_error(
    tmp_path: Path, repository: tuple[Path, str], cache: Path, run_agent, write_plan
) -> None:
    repo, _ = repository
    seed = seed_folder(tmp_path / "seed", str(repo), "0" * 40)
    done = run_with(run_agent, seed, fixed_plan(write_plan), cache)
    assert done.returncode == 2
    assert f"commit {'0' * 40} is not in {repo}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_branch_is_refused_with_the_commit_it_names(
    tmp_path: Path, repository: tuple[Path, str], cache: Path
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", str(repo), "main")
    with pytest.raises(ManifestError, match=f"name the full commit: commit = '{commit}'"):
        load_seed(seed)
    short = seed_folder(tmp_path / "short", str(repo), commit[:10])
    with pytest.raises(ManifestError, match="a branch, a tag or a short ID"):
        load_seed(short)


@pytest.mark.parametrize(
    "location",
    ["ext::sh -c touch% /tmp/pwned", "--upload-pack=touch /tmp/pwned", "ftp://example.com/r"],
)
def test_transports_that_run_commands_are_refused(
    tmp_path: Path, cache: Path, location: str
) -> None:
    seed = seed_folder(tmp_path / "seed", location, "1" * 40)
    with pytest.raises(ManifestError, match="source"):
        load_seed(seed)
    assert not Path("/tmp/pwned").exists()


def test_a_symbolic_link_out_of_the_tree_is_refused(tmp_path: Path, cache: Path) -> None:
    repo = tmp_path / "repo"
    commit = make_repository(repo)
    (repo / "pkg" / "secrets").symlink_to("../../../etc/passwd")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a link out")
    out = git(repo, "rev-parse", "HEAD")
    with pytest.raises(
        ManifestError, match=r"a symbolic link to '\.\./\.\./\.\./etc/passwd', outside"
    ):
        load_seed(seed_folder(tmp_path / "seed", str(repo), out))
    assert load_seed(seed_folder(tmp_path / "before", str(repo), commit)).source is not None


def test_a_symbolic_link_inside_the_tree_stays_a_link_in_the_sandbox(
    tmp_path: Path, cache: Path, run_agent, write_plan
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo, extra={"data/value.txt": "5\n"})
    (repo / "pkg" / "value.txt").symlink_to("../data/value.txt")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a link in")
    commit = git(repo, "rev-parse", "HEAD")
    test = TEST.replace(
        "self.assertEqual(add(2, 3), 5)",
        "import os\n        self.assertTrue(os.path.islink('pkg/value.txt'))\n"
        "        self.assertEqual(add(2, 3), int(open('pkg/value.txt').read()))",
    )
    seed = seed_folder(tmp_path / "seed", str(repo), commit, tests=test)
    done = run_with(run_agent, seed, fixed_plan(write_plan), cache)
    assert done.returncode == 0, done.stdout + done.stderr


PROBE = """import os
import unittest


class Tree(unittest.TestCase):
    def test_tree_is_read_only(self):
        for path in ("README", "pkg/__init__.py"):
            with self.assertRaises(OSError):
                os.chmod(path, 0o666)
            with self.assertRaises(OSError):
                open(path, "a").close()
            with self.assertRaises(OSError):
                os.rename(path, path + ".moved")
        with self.assertRaises(OSError):
            open("data/new.txt", "w").close()

    def test_editable_files_and_their_folders_are_writable(self):
        with open("pkg/calc.py", "a") as handle:
            handle.write("# touched\\n")
        open("pkg/new.txt", "w").close()
        open("top.txt", "w").close()
"""


def test_the_tree_is_read_only_and_the_carried_files_writable_in_the_sandbox(
    tmp_path: Path, cache: Path, run_agent, write_plan
) -> None:
    repo = tmp_path / "repo"
    commit = make_repository(repo, extra={"data/value.txt": "5\n"})
    seed = seed_folder(tmp_path / "seed", str(repo), commit, tests=PROBE)
    done = run_with(run_agent, seed, fixed_plan(write_plan), cache, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(passed_tests(done)) == 2


def test_the_mounts_follow_the_folders_of_carried_files_not_the_tree_size(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for group in range(20):
        for number in range(100):
            path = tree / f"lib{group}" / f"m{number}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    (tree / "top.txt").write_text("")
    mounts = tree_mounts(tree, ["lib3/m7.py", "tests/new_test.py"])
    binds = [mounts[i + 1] for i, a in enumerate(mounts) if a == "--ro-bind"]
    # 19 untouched folders and a file bound whole, plus lib3's 99 other files one by one.
    assert len(binds) == 19 + 1 + 99
    assert str(tree / "lib3" / "m7.py") not in binds
    assert mounts[mounts.index("--dir") : mounts.index("--dir") + 2] == ["--dir", "/workspace/lib3"]


def test_replay_refuses_a_record_of_another_commit(
    tmp_path: Path, repository: tuple[Path, str], cache: Path, run_agent, write_plan
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    done = run_with(run_agent, seed, fixed_plan(write_plan), cache)
    records = list((tmp_path / "state").rglob("run-*.json"))
    assert len(records) == 1, done.stderr
    record = json.loads(records[0].read_text())
    assert record["seed"]["source"] == {"repository": str(repo), "commit": commit}
    again = run_agent("replay", str(records[0]), env={"XDG_CACHE_HOME": str(cache)})
    assert again.returncode == 0, again.stderr
    record["seed"]["source"]["commit"] = "1" * 40
    other = tmp_path / "other.json"
    other.write_text(json.dumps(record))
    refused = run_agent("replay", str(other), env={"XDG_CACHE_HOME": str(cache)})
    assert refused.returncode == 2
    assert "was made at commit 1111111111111111111111111111111111111111" in refused.stderr


def test_seeds_show_names_the_commit_and_counts_the_tree(
    tmp_path: Path, repository: tuple[Path, str], cache: Path, run_agent
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    shown = run_agent("seeds", "show", str(seed), env={"XDG_CACHE_HOME": str(cache)})
    assert shown.returncode == 0, shown.stderr
    assert f"tree:           commit {commit} of {repo}" in shown.stdout
    assert "files:          5 (the tree's, and the seed's own: tests/__init__.py" in shown.stdout
    row = json.loads(
        run_agent("seeds", "show", str(seed), "--json", env={"XDG_CACHE_HOME": str(cache)}).stdout
    )
    assert row["tree"] == {"repository": str(repo), "commit": commit}


def test_a_graded_seed_needs_a_test_command_that_reports_each_test(
    tmp_path: Path, repository: tuple[Path, str], cache: Path
) -> None:
    repo, commit = repository
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    manifest = seed / "seed.toml"
    manifest.write_text(
        manifest.read_text()
        .replace('["python", "-m", "unittest", "discover", "-s", "tests", "-t", "."]', '["make"]')
        .replace("[source]", 'fail_to_pass = ["tests.test_calc.Add.test_add"]\n[source]')
    )
    with pytest.raises(ManifestError, match="fail_to_pass: grading test by test needs a test"):
        load_seed(seed)


def test_a_script_of_the_tree_is_run_under_its_framework(
    tmp_path: Path, cache: Path, run_agent, write_plan
) -> None:
    repo = tmp_path / "repo"
    script = TEST.replace("from pkg.calc", "import sys\nsys.path.insert(0, '.')\nfrom pkg.calc")
    commit = make_repository(repo, extra={"checks/run.py": script + "\nunittest.main()\n"})
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    manifest = seed / "seed.toml"
    manifest.write_text(
        manifest.read_text().replace(
            '["python", "-m", "unittest", "discover", "-s", "tests", "-t", "."]',
            '["python", "checks/run.py"]',
        )
    )
    done = run_with(run_agent, seed, fixed_plan(write_plan), cache, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["test_report"]["framework"] == "unittest-script"

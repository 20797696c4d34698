"""Git seeds from a hostile repository or seed folder: nothing reaches the host, nothing hangs."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_git_seeds import BROKEN, FIXED, git, make_repository, run_with, seed_folder

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.seeds import git_source
from sandboxed_coding_agent.core.seeds.manifest import ManifestError, load_seed
from sandboxed_coding_agent.plugins.local_sandbox.tree import tree_mounts


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder of the host any user may write, as a sandbox's host user could reach it."""
    folder = Path(tempfile.mkdtemp(prefix="git-seed-target-", dir="/tmp"))
    folder.chmod(0o777)  # the point: the sandbox's user could write here
    yield folder
    shutil.rmtree(folder)


def commit_all(repo: Path, message: str = "more") -> str:
    git(repo, "add", ".")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def commit_tree(repo: Path, entries: list[tuple[str, str, str]]) -> str:
    """A commit whose tree holds ``entries`` (mode, object ID, name) as given, even ones
    ``git add`` would never write (``..``, ``.git``, a name twice)."""
    kinds = {"040000": "tree", "160000": "commit"}
    listing = "".join(
        f"{mode} {kinds.get(mode, 'blob')} {oid}\t{name}\n" for mode, oid, name in entries
    )
    tree = subprocess.run(
        ["git", "mktree", "--missing"],
        cwd=repo,
        input=listing,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return git(repo, "commit-tree", "-m", "crafted", tree)


def blob(repo: Path, text: str) -> str:
    return subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=repo,
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def write_manifest(seed: Path, repo: Path, commit: str, *, editable: list[str]) -> None:
    text = (seed / "seed.toml").read_text()
    head, _, _ = text.partition("[source]")
    head = head.replace('editable = ["pkg/calc.py"]', f"editable = {json.dumps(editable)}")
    (seed / "seed.toml").write_text(
        f"{head}[source]\ngit = {json.dumps(str(repo))}\ncommit = {json.dumps(commit)}\n"
    )


def test_a_link_climbing_out_through_another_link_never_writes_on_the_host(
    tmp_path: Path, cache: Path, open_folder: Path, run_agent, write_plan
) -> None:
    # Each link alone stays inside by its text, but a/b/s leads to the top, so two '..'
    # after it leave the workspace: during the sandbox's set-up that is where bwrap keeps
    # the host's root (/oldroot), and the editable file under `out` would be written there.
    repo = tmp_path / "repo"
    make_repository(repo)
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "a" / "b" / "s").symlink_to("../..")
    (repo / "out").symlink_to(f"a/b/s/../../oldroot{open_folder}")
    commit = commit_all(repo)
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    (seed / "out").mkdir()
    (seed / "out" / "note.txt").write_text("seed\n")
    write_manifest(seed, repo, commit, editable=["pkg/calc.py", "out/note.txt"])
    plan = write_plan(
        {
            "files": [
                {"path": "pkg/calc.py", "content": FIXED},
                {"path": "out/note.txt", "content": "written by the model\n"},
            ]
        }
    )
    done = run_with(run_agent, seed, plan, cache)
    assert list(open_folder.iterdir()) == []
    assert done.returncode == 2, done.stdout + done.stderr
    assert "out: a symbolic link to 'a/b/s/../../oldroot" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("links", "refused"),
    [
        ({"a/b/s": "../..", "out": "a/b/s/../../etc"}, "out"),
        ({"s": ".", "out": "s/.."}, "out"),
        ({"d/up": "..", "out": "d/up/d/up/.."}, "out"),
        ({"loop": "loop/x"}, "loop"),
        ({"x": "y", "y": "x"}, "x"),
    ],
)
def test_links_are_followed_as_the_kernel_would_to_tell_whether_they_leave_the_tree(
    tmp_path: Path, cache: Path, links: dict[str, str], refused: str
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)
    for path, target in links.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).symlink_to(target)
    commit = commit_all(repo)
    with pytest.raises(ManifestError, match=rf"source: \w+: {refused}: a symbolic link"):
        load_seed(seed_folder(tmp_path / "seed", str(repo), commit))


def test_links_that_stay_inside_through_other_links_are_kept(tmp_path: Path, cache: Path) -> None:
    repo = tmp_path / "repo"
    make_repository(repo, extra={"data/deep/value.txt": "5\n"})
    for path, target in {
        "d": "data/deep",
        "v": "d/../deep/value.txt",
        "pkg/v": "../d/value.txt",
        "top": "pkg/..",
    }.items():
        (repo / path).symlink_to(target)
    commit = commit_all(repo)
    seed = load_seed(seed_folder(tmp_path / "seed", str(repo), commit))
    assert "data/deep/value.txt" in seed.files


@pytest.mark.parametrize("name", ["..", ".git", ".GIT", "."])
def test_a_tree_entry_git_would_never_check_out_is_refused_when_the_seed_is_read(
    tmp_path: Path, cache: Path, name: str
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)
    inner = commit_tree(repo, [("100644", blob(repo, "x\n"), "config")])
    inner_tree = git(repo, "rev-parse", f"{inner}^{{tree}}")
    top = git(repo, "rev-parse", "HEAD^{tree}")
    entries = [
        line.split(None, 3) for line in git(repo, "ls-tree", top).splitlines()
    ]  # mode, kind, oid, name
    crafted = commit_tree(
        repo,
        [(mode, oid, path) for mode, _, oid, path in entries] + [("040000", inner_tree, name)],
    )
    with pytest.raises(ManifestError, match=re.escape("a '.', '..' or '.git' part")):
        load_seed(seed_folder(tmp_path / "seed", str(repo), crafted))


def test_a_tree_with_a_file_and_a_folder_of_one_name_is_refused(
    tmp_path: Path, cache: Path
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)
    inner = git(repo, "rev-parse", "HEAD:pkg")
    crafted = commit_tree(repo, [("040000", inner, "pkg"), ("100644", blob(repo, "x\n"), "pkg")])
    with pytest.raises(ManifestError, match=re.escape("'pkg/__init__.py': under 'pkg', a file")):
        load_seed(seed_folder(tmp_path / "seed", str(repo), crafted))


@pytest.mark.parametrize(
    ("own", "problem"),
    [
        ("lib/x.py", "under 'lib', a symbolic link of the tree"),
        ("README/x.py", "under 'README', a file of the tree"),
        ("pkg", "a folder of the tree"),
    ],
)
def test_a_seed_file_where_the_tree_has_a_link_a_file_or_a_folder_is_refused(
    tmp_path: Path, cache: Path, own: str, problem: str
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)
    (repo / "lib").symlink_to("pkg")
    commit = commit_all(repo)
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    (seed / own).parent.mkdir(parents=True, exist_ok=True)
    (seed / own).write_text("x = 1\n")
    with pytest.raises(ManifestError, match=f"files: {own!r}: {problem}"):
        load_seed(seed)


def test_the_sandbox_refuses_a_carried_file_under_a_link_of_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "calc.py").write_text("")
    (tree / "lib").symlink_to("pkg")
    (tree / "README").write_text("")
    for carried in ("lib/x.py", "README/x.py"):
        with pytest.raises(SandboxError, match=f"{carried}: the tree has"):
            tree_mounts(tree, [carried])


def test_the_callers_git_filters_never_run_on_a_checkout_and_files_are_the_commits(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git-lfs installs a filter in the caller's ~/.gitconfig; a repository that names it
    # in its .gitattributes must not get it (or any program of that config) run here.
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "filter-ran"
    (home / ".gitconfig").write_text(
        f'[filter "lfs"]\n\tsmudge = "touch {marker}; cat"\n\trequired = true\n'
        "[core]\n\tautocrlf = true\n"
    )
    repo = tmp_path / "repo"
    commit = make_repository(
        repo, extra={".gitattributes": "* filter=lfs ident eol=crlf\n", "id.txt": "$Id$\n"}
    )
    monkeypatch.setenv("HOME", str(home))
    source = git_source.resolve(str(repo), commit)
    tree = git_source.materialize(source)
    assert not marker.exists()
    assert (tree / "pkg" / "calc.py").read_text() == BROKEN
    assert (tree / "id.txt").read_bytes() == b"$Id$\n"


@pytest.mark.parametrize("leaf", ["100644", "160000"])
def test_a_tree_of_billions_of_paths_is_refused_without_listing_them(
    tmp_path: Path, cache: Path, leaf: str
) -> None:
    # A few hundred bytes of objects: two entries per folder, 40 folders deep, every
    # folder the same tree object. Listing it whole would never end. Submodules (160000)
    # are left out of the seed, but not out of the count.
    repo = tmp_path / "repo"
    make_repository(repo)
    oid = blob(repo, "") if leaf == "100644" else "1" * 40  # a submodule's commit
    tree = git(repo, "rev-parse", f"{commit_tree(repo, [(leaf, oid, 'a')])}^{{tree}}")
    for _ in range(40):
        tree = git(
            repo,
            "rev-parse",
            f"{commit_tree(repo, [('040000', tree, 'a'), ('040000', tree, 'b')])}^{{tree}}",
        )
    bomb = git(repo, "commit-tree", "-m", "bomb", tree)
    with pytest.raises(ManifestError, match=f"more than {git_source.MAX_TREE_FILES} files"):
        load_seed(seed_folder(tmp_path / "seed", str(repo), bomb))


def test_a_tree_of_a_hundred_thousand_links_is_checked_in_seconds(
    tmp_path: Path, cache: Path
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)
    target = blob(repo, "../README")
    links = commit_tree(repo, [("120000", target, f"l{n}") for n in range(99_990)])
    top = [("040000", git(repo, "rev-parse", f"{links}^{{tree}}"), "links")]
    crafted = commit_tree(repo, [*top, ("100644", blob(repo, "calc\n"), "README")])
    source = git_source.resolve(str(repo), crafted)
    started = time.monotonic()
    assert len(git_source.list_tree(source)) == 99_991
    assert time.monotonic() - started < 15


def test_a_link_to_a_path_longer_than_any_is_refused_before_it_is_read(
    tmp_path: Path, cache: Path
) -> None:
    repo = tmp_path / "repo"
    make_repository(repo)
    long = blob(repo, "a/" * 100_000)
    crafted = commit_tree(repo, [("120000", long, "far")])
    with pytest.raises(ManifestError, match="far: a symbolic link to a path longer than 1024"):
        load_seed(seed_folder(tmp_path / "seed", str(repo), crafted))


def test_the_mounts_of_long_names_are_refused_before_they_outgrow_a_command_line(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for number in range(4500):
        (tree / (f"{number:04d}" + "x" * 240)).write_text("")
    with pytest.raises(SandboxError, match="bytes of mount arguments"):
        tree_mounts(tree, ["pkg/calc.py"])


def test_a_path_that_is_not_a_repository_is_named_in_one_clear_message(
    tmp_path: Path, cache: Path
) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ManifestError, match="does not appear to be a git repository"):
        load_seed(seed_folder(tmp_path / "seed", str(tmp_path / "empty"), "1" * 40))


def test_a_partial_checkout_left_by_a_killed_agent_is_removed(tmp_path: Path, cache: Path) -> None:
    repo = tmp_path / "repo"
    commit = make_repository(repo)
    source = git_source.resolve(str(repo), commit)
    stale = git_source.tree_folder(source).with_name(f".partial-{commit}-999999999")
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "f").write_text("")
    for path in (stale / "sub" / "f", stale / "sub", stale):
        path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    git_source.materialize(source)
    assert not stale.exists()


OWNER_PROBE = """import os
import unittest


class Tree(unittest.TestCase):
    def test_no_file_or_folder_of_the_tree_changes_even_for_its_owner(self):
        # As an ordinary user the cache's tree is the caller's own, and the sandbox's
        # user is the caller: only the read-only mounts keep the tree as it is.
        for path in ("data/deep/value.txt", "data/deep", "data", "pkg/__init__.py", "README"):
            for change in (
                lambda: os.chmod(path, 0o777),
                lambda: os.utime(path, (0, 0)),
                lambda: os.rename(path, "moved"),
                lambda: os.unlink(path) if os.path.isfile(path) else os.rmdir(path),
                lambda: os.symlink("x", path + "/new") if os.path.isdir(path) else
                    os.truncate(path, 0),
            ):
                with self.assertRaises(OSError, msg=path):
                    change()
        self.assertEqual(open("data/deep/value.txt").read(), "5\\n")
"""


def test_the_tree_stays_as_it_is_even_for_the_user_who_owns_the_cache(
    tmp_path: Path, cache: Path, run_agent, write_plan
) -> None:
    repo = tmp_path / "repo"
    commit = make_repository(repo, extra={"data/deep/value.txt": "5\n"})
    seed = seed_folder(tmp_path / "seed", str(repo), commit, tests=OWNER_PROBE)
    done = run_with(
        run_agent, seed, write_plan({"files": [{"path": "pkg/calc.py", "content": FIXED}]}), cache
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tree = git_source.tree_folder(git_source.SourceTree(str(repo), commit))
    assert (tree / "data" / "deep" / "value.txt").read_text() == "5\n"


def test_a_pyproject_with_too_many_dependencies_is_refused(tmp_path: Path, cache: Path) -> None:
    repo = tmp_path / "repo"
    many = ", ".join(f'"package-{n}"' for n in range(300))
    commit = make_repository(
        repo, extra={"pyproject.toml": f"[project]\ndependencies = [{many}]\n"}
    )
    seed = seed_folder(tmp_path / "seed", str(repo), commit)
    manifest = seed / "seed.toml"
    manifest.write_text(manifest.read_text() + "[runtime]\nproject = true\n")
    with pytest.raises(
        ManifestError, match="lists 300 dependencies; a runtime installs at most 256"
    ):
        load_seed(seed)


def test_git_never_asks_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    environment = git_source._environment(callers_config=True)
    assert environment["GIT_SSH_COMMAND"] == "ssh -o BatchMode=yes"
    assert environment["GIT_TERMINAL_PROMPT"] == "0"
    # A caller's own ssh command is kept (a key file, a jump host).
    monkeypatch.setenv("GIT_SSH_COMMAND", "ssh -i key")
    assert git_source._environment(callers_config=True)["GIT_SSH_COMMAND"] == "ssh -i key"

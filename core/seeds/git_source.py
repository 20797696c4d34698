"""Git seeds: a repository at a commit, fetched once and checked out once per commit.

A seed whose ``seed.toml`` has a ``[source]`` table (``git``, ``commit``) takes
its files from that commit instead of its own folder. The agent keeps, in its
cache (``$XDG_CACHE_HOME/sandboxed-coding-agent/git``):

* ``repos/<hash of the location>.git``: a bare repository that every fetch of
  that location goes into, outside any sandbox (:mod:`.git_fetch`). A local path
  or a ``file://`` URL needs no network; a network URL is fetched by ``git`` on
  this machine, never inside a sandbox.
* ``trees/<commit>``: the tree at that commit, checked out once and made
  read-only (:func:`materialize`, here), which every later sandbox of any seed at
  that commit binds read-only instead of receiving copies of its files.

A second run of a seed therefore costs one ``git cat-file`` and one
``git ls-tree``, whatever the repository's size. The repository is hostile
input: ``git`` runs (:mod:`.git_command`) with the repository's hooks, fsmonitor
and the ``ext::`` transport off, only a fetch reads the caller's own git
configuration (its credentials and proxies; a filter it names, such as
git-lfs's, never runs on a checkout), and a checkout writes each file exactly as
the commit holds it, whatever the repository's ``.gitattributes`` say. The tree is
listed and checked before it is checked out (:mod:`.git_tree`): a link leading
out of it, a path git would never check out or a tree past its ceilings
(:data:`MAX_TREE_FILES`, :data:`MAX_TREE_BYTES`, :data:`MAX_TREE_DEPTH`) is
refused. Submodules are left out (their folder is empty), as ``git`` itself
leaves them until told otherwise.

Every name of those three modules that the rest of the agent uses is importable
from here as well.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from .git_command import GIT_TIMEOUT_SECONDS as GIT_TIMEOUT_SECONDS
from .git_command import GitSourceError as GitSourceError
from .git_command import _environment as _environment
from .git_command import git as git
from .git_fetch import CACHE_FOLDER as CACHE_FOLDER
from .git_fetch import SourceTree as SourceTree
from .git_fetch import cache_root as cache_root
from .git_fetch import fetch as fetch
from .git_fetch import location_problem as location_problem
from .git_fetch import locked
from .git_fetch import repository_folder as repository_folder
from .git_fetch import resolve as resolve
from .git_tree import MAX_LINK_HOPS as MAX_LINK_HOPS
from .git_tree import MAX_PATH_BYTES as MAX_PATH_BYTES
from .git_tree import MAX_TREE_BYTES as MAX_TREE_BYTES
from .git_tree import MAX_TREE_DEPTH as MAX_TREE_DEPTH
from .git_tree import MAX_TREE_FILES as MAX_TREE_FILES
from .git_tree import TreeFile as TreeFile
from .git_tree import list_tree as list_tree

#: Largest file read from the repository without a checkout (``pyproject.toml``).
MAX_SHOWN_BYTES = 1024 * 1024
#: What a checkout writes each file with: the commit's bytes, whatever the tree's
#: ``.gitattributes`` say (``$GIT_DIR/info/attributes`` comes before them).
CHECKOUT_ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding\n"


def tree_folder(source: SourceTree, environ: Mapping[str, str] = os.environ) -> Path:
    """Where the tree at ``source.commit`` is checked out, read-only (made once, then reused)."""
    return cache_root(environ) / "trees" / source.commit


def materialize(source: SourceTree, environ: Mapping[str, str] = os.environ) -> Path:
    """The commit's tree checked out in the cache, made read-only; checked out only once.

    The tree is checked (:func:`list_tree`) before it is written, and written to a
    temporary folder renamed into place when complete, so a folder in place is whole.
    """
    final = tree_folder(source, environ)
    if final.is_dir():
        return final
    with locked(final.with_name(final.name + ".lock")):
        if final.is_dir():
            return final
        list_tree(source, environ)
        folder = fetch(source.repository, source.commit, environ)
        # Under the lock, any partial checkout of this commit is one a killed agent left.
        for stale in final.parent.glob(f".partial-{source.commit}-*"):
            _make_writable(stale)
            shutil.rmtree(stale, ignore_errors=True)
        partial = final.with_name(f".partial-{source.commit}-{os.getpid()}")
        index = final.with_name(f".index-{source.commit}-{os.getpid()}")
        partial.mkdir(parents=True)
        (folder / "info").mkdir(exist_ok=True)
        (folder / "info" / "attributes").write_text(CHECKOUT_ATTRIBUTES)
        try:
            git(["read-tree", source.commit], git_dir=folder, index=index)
            git(
                ["checkout-index", "--all", "--force"],
                git_dir=folder,
                work_tree=partial,
                index=index,
            )
            _read_only(partial)
            partial.rename(final)
        except BaseException:
            _make_writable(partial)
            shutil.rmtree(partial, ignore_errors=True)
            raise
        finally:
            index.unlink(missing_ok=True)
    return final


def _read_only(root: Path) -> None:
    """Files 0444 (0555 when executable), folders 0555: readable by the sandbox's user,
    writable by nobody but root."""
    folders: list[str] = []
    for folder, _, files in os.walk(root):
        folders.append(folder)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                executable = os.lstat(path).st_mode & 0o100
                os.chmod(path, 0o555 if executable else 0o444)
    for folder in reversed(folders):
        os.chmod(folder, 0o555)  # noqa: S103 - read-only, for the sandbox's user


def _make_writable(root: Path) -> None:
    """Let a partial checkout be removed."""
    for folder, _, _ in os.walk(root):
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o700)


def show(source: SourceTree, path: str, environ: Mapping[str, str] = os.environ) -> bytes | None:
    """One file of the commit's tree as git stores it, without a checkout; ``None`` if absent."""
    folder = fetch(source.repository, source.commit, environ)
    found = git(["cat-file", "-s", f"{source.commit}:{path}"], git_dir=folder, check=False)
    if found.returncode != 0:
        return None
    if int(found.stdout) > MAX_SHOWN_BYTES:
        raise GitSourceError(f"{path}: larger than {MAX_SHOWN_BYTES} bytes")
    return git(["cat-file", "blob", f"{source.commit}:{path}"], git_dir=folder).stdout


def read_files(
    source: SourceTree, paths: Sequence[str], environ: Mapping[str, str] = os.environ
) -> dict[str, bytes]:
    """Some files of the tree, from the checked-out copy, never following a link."""
    from . import seed_files

    root = materialize(source, environ)
    return seed_files.read_seed_files(root, tuple(paths), untrusted=False)

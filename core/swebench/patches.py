"""Patches applied to a commit's tree without a checkout, in the agent's cache.

A task's repository is a local clone under ``--repos DIR``; it is only ever
fetched from (:func:`~..git_source.fetch`, into the cache's bare repository),
never written. A patch (a task's ``test_patch``, a reference fix, a model's
patch) is applied with ``git apply --cached`` to a temporary index holding the
base commit's tree, in that bare repository: the new files are read back as
blobs of the resulting tree, and no working tree is ever touched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import attrs

from ..plans import contract
from ..seeds import git_source
from ..seeds.git_source import GitSourceError, git
from ..seeds.patterns import WILDCARDS, has_control_character

#: The largest file a patch may leave that is read back (a whole-file plan holds it).
MAX_FILE_BYTES = 1024 * 1024
#: The most files one patch may change.
MAX_CHANGED_FILES = 1000
_REGULAR = ("100644", "100755")


class PatchProblem(Exception):
    """A patch that cannot be applied to the commit, or whose result cannot be used."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ChangesNothing(PatchProblem):
    """A patch that applies and leaves the tree as it was."""


@attrs.frozen
class Change:
    """One file a patch changes.

    :ivar path: the file's path in the tree.
    :ivar status: ``A`` added, ``M`` modified, ``D`` deleted.
    :ivar regular: whether the file is a regular file after the patch (not a link or a
        submodule); always true for a deleted file.
    """

    path: str
    status: str
    regular: bool = True


@attrs.frozen
class Patched:
    """A commit's tree with a patch applied.

    :ivar repository: the cache's bare repository holding both trees.
    :ivar commit: the base commit.
    :ivar tree: the patched tree's object ID.
    :ivar changes: every file the patch changes, in path order.
    """

    repository: Path
    commit: str
    tree: str
    changes: tuple[Change, ...]

    def paths(self, *statuses: str) -> tuple[str, ...]:
        return tuple(c.path for c in self.changes if c.status in statuses)

    def read(self, path: str) -> bytes:
        """The file at ``path`` after the patch.

        :raises PatchProblem: it is larger than :data:`MAX_FILE_BYTES`.
        """
        size = git(["cat-file", "-s", f"{self.tree}:{path}"], git_dir=self.repository)
        if int(size.stdout) > MAX_FILE_BYTES:
            raise PatchProblem(f"{path} would be larger than {MAX_FILE_BYTES} bytes")
        return git(["cat-file", "blob", f"{self.tree}:{path}"], git_dir=self.repository).stdout

    def read_base(self, path: str) -> bytes | None:
        """The file at ``path`` in the base commit; ``None`` when it has none.

        :raises PatchProblem: it is larger than :data:`MAX_FILE_BYTES`.
        """
        found = git(
            ["cat-file", "-s", f"{self.commit}:{path}"], git_dir=self.repository, check=False
        )
        if found.returncode != 0:
            return None
        if int(found.stdout) > MAX_FILE_BYTES:
            raise PatchProblem(f"{path} is larger than {MAX_FILE_BYTES} bytes")
        return git(["cat-file", "blob", f"{self.commit}:{path}"], git_dir=self.repository).stdout

    def test_infrastructure(self) -> tuple[tuple[str, str], ...]:
        """Each file the patch changes that steers the test framework, with why
        (:func:`~...contract.test_infrastructure_problem`), in path order.

        :raises PatchProblem: one of them is larger than :data:`MAX_FILE_BYTES`.
        """
        found: list[tuple[str, str]] = []
        for change in self.changes:
            if contract.needs_original(change.path):
                new = None if change.status == "D" else _text(self.read(change.path))
                old = None if change.status == "A" else _text(self.read_base(change.path))
            else:
                # Refused for its path alone, whatever it holds.
                new, old = "", None
            problem = contract.test_infrastructure_problem(change.path, new, old)
            if problem is not None:
                found.append((change.path, problem))
        return tuple(found)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def clone_for(repos: Path, repo: str) -> Path:
    """The local clone of ``repo`` (``owner/name``) under ``repos``.

    Looked for as ``repos/owner__name`` (SWE-bench's own spelling, as in its
    instance IDs), then ``repos/owner/name``, then ``repos/name``, each also with
    ``.git`` appended (a bare clone).

    :raises PatchProblem: none of them is a git repository.
    """
    owner, name = repo.split("/", 1)
    tried = []
    for relative in (f"{owner}__{name}", f"{owner}/{name}", name):
        for candidate in (repos / relative, repos / f"{relative}.git"):
            tried.append(str(candidate))
            if (candidate / ".git").exists() or (candidate / "HEAD").is_file():
                return candidate.resolve()
    raise PatchProblem(f"no clone of {repo} under {repos} (looked for {', '.join(tried[::2])})")


def repository(clone: Path, commit: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The cache's bare repository of ``clone``, holding ``commit`` (fetched if it does not).

    :raises PatchProblem: the clone cannot be fetched from, or does not hold ``commit``.
    """
    try:
        git_source.resolve(str(clone), commit, environ)
        return git_source.fetch(str(clone), commit, environ)
    except GitSourceError as error:
        raise PatchProblem(error.message) from None


def apply(folder: Path, commit: str, patch: str, *, what: str = "the patch") -> Patched:
    """``patch`` applied to ``commit``'s tree in the bare repository ``folder``.

    :param what: what the patch is, for messages.
    :raises PatchProblem: the patch does not apply (with git's reason), changes nothing
        (:class:`ChangesNothing`),
        changes more than :data:`MAX_CHANGED_FILES` files, or a file whose name is not
        UTF-8 or holds a control character.
    """
    try:
        data = patch.encode("utf-8")
    except UnicodeEncodeError:
        raise PatchProblem(f"{what} is not text (it holds a lone surrogate)") from None
    with tempfile.TemporaryDirectory(prefix="agent-swebench-index-") as scratch:
        index = Path(scratch, "index")
        git(["read-tree", commit], git_dir=folder, index=index)
        applied = git(
            ["apply", "--cached", "--whitespace=nowarn", "-"],
            git_dir=folder,
            index=index,
            data=data,
            check=False,
        )
        if applied.returncode != 0:
            raise PatchProblem(f"{what} does not apply to {commit[:12]}: {_reason(applied.stderr)}")
        tree = git(["write-tree"], git_dir=folder, index=index).stdout.decode().strip()
    listing = git(
        ["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", commit, tree], git_dir=folder
    ).stdout
    changes: list[Change] = []
    fields = listing.split(b"\0")
    for head, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        if not head:
            continue
        _, new_mode, _, _, status = head.decode().split()
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            raise PatchProblem(f"{what} changes a file whose name is not UTF-8") from None
        if has_control_character(path):
            raise PatchProblem(f"{what} changes {path!r}, whose name holds a control character")
        kind = status[0]
        regular = kind == "D" or new_mode in _REGULAR
        changes.append(Change(path, "M" if kind == "T" else kind, regular))
        if len(changes) > MAX_CHANGED_FILES:
            raise PatchProblem(f"{what} changes more than {MAX_CHANGED_FILES} files")
    if not changes:
        raise ChangesNothing(f"{what} changes nothing")
    return Patched(folder, commit, tree, tuple(changes))


def path_problem(path: str, *, in_folder: bool) -> str | None:
    """Why a seed cannot name ``path`` as one file, or ``None``.

    :param in_folder: the file is to be written into the seed's folder, where files and
        folders whose names start with ``.`` are never seed files.
    """
    if WILDCARDS & set(path):
        return "the path contains * or ?, which a seed's patterns read as wildcards"
    if in_folder and any(part.startswith(".") for part in path.split("/")):
        return "a folder or file starting with '.' is never a seed file"
    if in_folder and path == "seed.toml":
        return "the seed's own manifest stands there"
    if len(path) > 256 or path.count("/") >= 16:
        return "the path is longer than a seed's patterns may be (256 characters, 16 folders)"
    return None


def _reason(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error:")]
    chosen = errors or [line for line in lines if line] or ["git apply refused it"]
    text = "; ".join(chosen[:3])
    return text if len(text) <= 500 else text[:497] + "..."

"""A git seed's repository: where it may come from, fetched into the cache, its commit resolved.

Every fetch of a location goes into one bare repository of the agent's cache
(:func:`repository_folder`), outside any sandbox: a local path or a ``file://``
URL needs no network; a network URL is fetched by ``git`` on this machine. A seed
names a full commit ID (:func:`resolve`); a branch, a tag or a short ID is refused
with the commit it points to now.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs

from .git_command import GitSourceError, git

CACHE_FOLDER = Path("sandboxed-coding-agent", "git")

_FULL_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_URL = re.compile(r"([a-z][a-z0-9+.-]*)://", re.IGNORECASE)
_SCHEMES = frozenset({"file", "https", "http", "ssh", "git"})


@attrs.frozen
class SourceTree:
    """A repository at a commit: where a git seed's files come from.

    Plain data, so a runner on another machine can fetch the same tree.

    :ivar repository: where the repository is: an absolute path or a URL
        (``file://``, ``https://``, ``ssh://``, ``git://``).
    :ivar commit: the full commit ID (40 or 64 lowercase hex digits).
    """

    repository: str
    commit: str = attrs.field(validator=attrs.validators.matches_re(_FULL_COMMIT))


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where fetched repositories and checked-out trees are kept (XDG base directory rules)."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / CACHE_FOLDER


def location_problem(repository: str) -> str | None:
    """Why ``repository`` cannot be fetched from, or ``None``."""
    if not repository or repository.startswith("-") or "\0" in repository:
        return "must be a path or a URL"
    if any(ord(c) < 32 or ord(c) == 127 for c in repository):
        return "contains a control character"
    scheme = _URL.match(repository)
    if scheme:
        if scheme.group(1).lower() not in _SCHEMES:
            known = ", ".join(f"{s}://" for s in sorted(_SCHEMES))
            return f"{scheme.group(1)}:// is not a transport the agent uses (known: {known})"
        return None
    if "::" in repository:
        return "a git remote helper (TRANSPORT::ADDRESS) is not a transport the agent uses"
    if not os.path.isabs(repository):
        return "must be an absolute path or a URL"
    return None


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock file at ``path`` while the block runs: one agent at a time fetches into
    a repository of the cache, or checks out a commit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def repository_folder(repository: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The cache's bare repository for ``repository``."""
    name = hashlib.sha256(repository.encode()).hexdigest()[:24]
    return cache_root(environ) / "repos" / f"{name}.git"


def _has_commit(folder: Path, commit: str) -> bool:
    found = git(["cat-file", "-e", f"{commit}^{{commit}}"], git_dir=folder, check=False)
    return found.returncode == 0


def fetch(repository: str, commit: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The cache's bare repository of ``repository``, holding ``commit``; fetched if it is not.

    ``commit`` may be any name while it is being checked (:func:`resolve`); only a full
    commit ID skips the fetch when it is already there.
    """
    problem = location_problem(repository)
    if problem:
        raise GitSourceError(f"git = {repository!r}: {problem}")
    if not _URL.match(repository) and not Path(repository).exists():
        raise GitSourceError(f"git = {repository!r}: no such repository")
    folder = repository_folder(repository, environ)
    with locked(folder.with_name(folder.name + ".lock")):
        if not (folder / "HEAD").exists():
            git(["init", "--quiet", "--bare", "--", str(folder)])
        if _FULL_COMMIT.fullmatch(commit) and _has_commit(folder, commit):
            return folder
        git(
            [
                "fetch", "--quiet", "--no-tags", "--force", "--", repository,
                "+refs/heads/*:refs/sources/heads/*", "+refs/tags/*:refs/sources/tags/*",
            ],
            git_dir=folder,
            callers_config=True,
        )  # fmt: skip
        if _FULL_COMMIT.fullmatch(commit) and not _has_commit(folder, commit):
            # Not on a branch or tag: a server may still give it when asked by its ID.
            git(
                ["fetch", "--quiet", "--no-tags", "--", repository, commit],
                git_dir=folder,
                check=False,
                callers_config=True,
            )
    return folder


def resolve(repository: str, commit: str, environ: Mapping[str, str] = os.environ) -> SourceTree:
    """The tree of ``repository`` at ``commit``, fetched into the cache if needed.

    :raises GitSourceError: the repository cannot be fetched, ``commit`` is a branch or
        a tag (the error names the commit it points to now), or it is not there.
    """
    if not isinstance(commit, str) or not commit or commit.startswith("-") or "\0" in commit:
        raise GitSourceError("commit must be a full commit ID (40 hex digits)")
    folder = fetch(repository, commit, environ)
    if _FULL_COMMIT.fullmatch(commit):
        if not _has_commit(folder, commit):
            raise GitSourceError(f"commit {commit} is not in {repository}")
        return SourceTree(repository, commit)
    named = commit.removeprefix("refs/")
    for candidate in (f"refs/sources/heads/{named}", f"refs/sources/tags/{named}", commit):
        found = git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"],
            git_dir=folder,
            check=False,
        )
        if found.returncode == 0:
            full = found.stdout.decode().strip()
            raise GitSourceError(
                f"commit = {commit!r} is a branch, a tag or a short ID, which can move or "
                f"become ambiguous; name the full commit: commit = {full!r}"
            )
    raise GitSourceError(
        f"commit = {commit!r} is not in {repository} (a seed names a full commit ID)"
    )

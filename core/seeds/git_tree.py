"""A git seed's tree: every file of its commit, listed and checked before anything uses it.

The tree is refused when it holds a symbolic link leading out of it (followed
through the tree's other links, as the kernel would), a path git would never check
out (a ``.``, ``..`` or ``.git`` part, a path under a file), a path that is not
UTF-8 or holds a control character, or more than :data:`MAX_TREE_FILES` entries,
:data:`MAX_TREE_BYTES` bytes or :data:`MAX_TREE_DEPTH` folders of depth; a listing
past the ceiling is stopped, not read to its end. Submodules are left out.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from .git_command import GitSourceError, git, nul_records
from .git_fetch import SourceTree, fetch

#: Ceilings of a git seed's tree (a folder seed's are in :mod:`.manifest`).
MAX_TREE_FILES = 100_000
MAX_TREE_BYTES = 2 * 1024 * 1024 * 1024
MAX_TREE_DEPTH = 64
MAX_PATH_BYTES = 1024
#: Most links followed to resolve one symbolic link of a tree (the kernel's own limit).
MAX_LINK_HOPS = 40

_CONTROL = re.compile("[\x00-\x1f\x7f]")
_SYMLINK = "120000"
_GITLINK = "160000"


@attrs.frozen
class TreeFile:
    """A file of a commit's tree, as ``git ls-tree`` lists it."""

    path: str
    size: int
    link: bool = False


def _path_problem(path: str) -> str | None:
    if len(path.encode()) > MAX_PATH_BYTES:
        return f"a path is longer than {MAX_PATH_BYTES} bytes"
    if _CONTROL.search(path):
        return f"{path!r}: the path contains a control character"
    if path.count("/") >= MAX_TREE_DEPTH:
        return f"{path!r}: deeper than {MAX_TREE_DEPTH} folders"
    # Only a path with a part that is empty or starts with '.' needs a closer look.
    if ("/." in f"/{path}" or "//" in f"/{path}/") and any(
        part in ("", ".", "..") or part.lower() == ".git" for part in path.split("/")
    ):
        # git refuses to check these out; saying so now names the path.
        return f"{path!r}: a path with a '.', '..' or '.git' part, which git never checks out"
    return None


def _link_target(path: str, target: bytes) -> tuple[str | None, str | None]:
    """The link's target as text, or why it cannot be one (not UTF-8, absolute)."""
    try:
        text = target.decode("utf-8")
    except UnicodeDecodeError:
        return None, f"{path}: a symbolic link whose target is not UTF-8"
    if text.startswith("/") or "\0" in text or not text:
        return None, f"{path}: a symbolic link to {text!r}, outside the tree"
    return text, None


def _link_problem(path: str, links: Mapping[str, str]) -> str | None:
    """Why the link at ``path`` leads out of the tree, or ``None``.

    Followed as the kernel follows it, through the tree's other links: by its text
    alone, ``a/b/s/../..`` stays inside, but not when ``a/b/s`` is a link to ``../..``.
    Where the tree is bound into the sandbox, out of it is the host's root while the
    sandbox is being set up.
    """
    shown = f"{path}: a symbolic link to {links[path]!r}"
    folder = path.split("/")[:-1]
    pending = list(reversed(links[path].split("/")))
    hops = 1
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not folder:
                return f"{shown}, outside the tree"
            folder.pop()
            continue
        here = "/".join((*folder, part))
        if here in links:
            hops += 1
            if hops > MAX_LINK_HOPS:
                return f"{shown}, which leads to itself (a loop of links)"
            pending.extend(reversed(links[here].split("/")))
        else:
            folder.append(part)
    if folder and folder[0] == ".git":
        return f"{shown}, outside the tree"
    return None


def list_tree(source: SourceTree, environ: Mapping[str, str] = os.environ) -> list[TreeFile]:
    """Every file of the commit's tree, checked against the ceilings and the link rule.

    :raises GitSourceError: the tree breaks a ceiling, holds a path that is not UTF-8,
        has a control character or that git would not check out, or a symbolic link
        that leads out of it.
    """
    folder = fetch(source.repository, source.commit, environ)
    arguments = ["ls-tree", "-r", "-z", "--long", "--full-tree", source.commit]
    # Closed on the way out, whatever the way: git is stopped, not left blocked on its pipe.
    with contextlib.closing(
        nul_records(arguments, folder, limit=MAX_TREE_FILES + 1, longest=MAX_PATH_BYTES + 256)
    ) as listing:
        found, links = _entries(source.commit, listing)
    total = sum(entry.size for entry in found)
    if total > MAX_TREE_BYTES:
        raise GitSourceError(
            f"{source.commit}: {total} bytes of files; a git seed has at most {MAX_TREE_BYTES}"
        )
    problem = _under_a_file(found)
    if problem:
        raise GitSourceError(f"{source.commit}: {problem}")
    if links:
        contents = _blobs(folder, [oid for _, oid in links])
        texts: dict[str, str] = {}
        for path, oid in links:
            if oid not in contents:
                raise GitSourceError(
                    f"{source.commit}: {path}: a link whose target is not in the repository"
                )
            text, problem = _link_target(path, contents[oid])
            if problem or text is None:
                raise GitSourceError(f"{source.commit}: {problem}")
            texts[path] = text
        for path in texts:
            problem = _link_problem(path, texts)
            if problem:
                raise GitSourceError(f"{source.commit}: {problem}")
    return found


def _blobs(folder: Path, object_ids: Sequence[str]) -> dict[str, bytes]:
    """The blobs of ``object_ids`` (each asked for once) that the repository has."""
    unique = list(dict.fromkeys(object_ids))
    answer = git(
        ["cat-file", "--batch", "--buffer"],
        git_dir=folder,
        data="".join(f"{oid}\n" for oid in unique).encode(),
    ).stdout
    found: dict[str, bytes] = {}
    start = 0
    for oid in unique:
        # Read by offset: slicing off each answer would copy the rest, 100,000 times.
        end = answer.find(b"\n", start)
        fields = answer[start:end].split()
        if end < 0:
            break
        start = end + 1
        if len(fields) == 3:  # else "<oid> missing", with nothing after
            length = int(fields[2])
            if fields[1] == b"blob":
                found[oid] = answer[start : start + length]
            start += length + 1
    return found


def _entries(commit: str, listing: Iterator[bytes]) -> tuple[list[TreeFile], list[tuple[str, str]]]:
    """The files of ``git ls-tree -r -z --long`` records, and the links' object IDs."""
    found: list[TreeFile] = []
    links: list[tuple[str, str]] = []
    for count, record in enumerate(listing):
        if count >= MAX_TREE_FILES:
            raise GitSourceError(
                f"{commit}: more than {MAX_TREE_FILES} files; a git seed has at most that"
            )
        head, _, raw_path = record.partition(b"\t")
        mode, kind, object_id, size = head.split()
        if mode == _GITLINK.encode() or kind != b"blob":
            continue
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            name = raw_path.decode("utf-8", "backslashreplace")
            raise GitSourceError(f"{commit}: {name}: the path is not valid UTF-8") from None
        problem = _path_problem(path)
        if problem:
            raise GitSourceError(f"{commit}: {problem}")
        link = mode == _SYMLINK.encode()
        if link and int(size) > MAX_PATH_BYTES:
            raise GitSourceError(
                f"{commit}: {path}: a symbolic link to a path longer than {MAX_PATH_BYTES} bytes"
            )
        if link:
            links.append((path, object_id.decode()))
        found.append(TreeFile(path, int(size), link))
    return found, links


def _under_a_file(files: Sequence[TreeFile]) -> str | None:
    """Why a path of the tree is under another path that is a file or a link, or ``None``."""
    kinds = {entry.path: "a symbolic link" if entry.link else "a file" for entry in files}
    for entry in files:
        parts = entry.path.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            if above in kinds:
                return f"{entry.path!r}: under {above!r}, {kinds[above]}"
    return None

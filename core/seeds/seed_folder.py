"""A seed folder's files, found through the folder's open descriptor, never following a link.

A seed folder holds its manifest (:data:`MANIFEST`) and the seed's files. It may
come from anyone: every entry is reached relative to the descriptor of the folder
the manifest was read from (a folder swapped in at its path is never looked into),
no link is followed, and a folder nested deeper than :data:`MAX_DEPTH` or holding
more than :data:`MAX_WALK_ENTRIES` entries is refused rather than walked.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .manifest_errors import ManifestError

#: The manifest of a seed folder, which is never one of the seed's files.
MANIFEST = "seed.toml"
#: How deep a seed folder's folders may nest, and how many entries it may hold in all.
MAX_DEPTH = 16
MAX_WALK_ENTRIES = 2000


def walk(root_fd: int, root: Path) -> list[str]:
    """Regular files of the folder open at ``root_fd`` (shown as ``root``), without hidden
    entries, caches, links and the manifest, never following a link.

    A seed folder may come from anyone: one nested deeper than :data:`MAX_DEPTH` or
    holding more than :data:`MAX_WALK_ENTRIES` entries is refused rather than walked.
    """
    found: list[str] = []
    seen = 0
    for directory, subdirs, names, folder_fd in os.fwalk(".", dir_fd=root_fd):
        base = directory.removeprefix(".").lstrip("/")
        seen += len(subdirs) + len(names)
        if seen > MAX_WALK_ENTRIES:
            raise ManifestError(
                f"{root}: holds more than {MAX_WALK_ENTRIES} files and folders; "
                "a seed folder holds the seed's files only"
            )
        depth = len(base.split("/")) if base else 0
        if subdirs and depth >= MAX_DEPTH:
            raise ManifestError(
                f"{root}: folders nest more than {MAX_DEPTH} levels deep ({base!r})"
            )
        # fwalk lists a link to a folder among the names, never among the folders.
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            if name.startswith(".") or name.endswith((".pyc", ".pyo")):
                continue
            try:
                mode = os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode
            except OSError:
                continue
            relative = f"{base}/{name}" if base else name
            if stat.S_ISREG(mode) and relative != MANIFEST:
                found.append(relative)
    return found


def lstat_at(root_fd: int, relative: str) -> os.stat_result:
    """The entry at ``relative`` below ``root_fd``, reached without following any link."""
    *folders, name = relative.split("/")
    opened: list[int] = []
    try:
        folder_fd = root_fd
        for part in folders:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            folder_fd = os.open(part, flags, dir_fd=folder_fd)
            opened.append(folder_fd)
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    finally:
        for fd in opened:
            os.close(fd)


def literal_file_problem(root_fd: int, relative: str) -> str | None:
    """Why ``relative``, a path a seed lists as it is (no wildcard), is not one of its files,
    or ``None``."""
    try:
        mode = lstat_at(root_fd, relative).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "no such file"
    except OSError as error:
        if error.errno == errno.ELOOP:
            mode = stat.S_IFLNK
        else:
            return f"cannot be read: {error.strerror}"
    # A link could hand the sandbox, and the provider, any file the caller can read.
    if stat.S_ISLNK(mode):
        return "is or passes through a symbolic link; seed files must be inside the seed folder"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if relative == MANIFEST:
        return "the manifest itself is not a seed file"
    return None

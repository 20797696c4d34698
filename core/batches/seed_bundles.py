"""A seed folder sent by content: read on one machine, bounded, written out on another.

A batch on a Ray cluster (:mod:`.on_ray`) runs its tasks on nodes that need not share
a filesystem with the machine that started it. A task whose seed is an installed
seed's name needs nothing sent (the node has the same seeds installed); a task whose
seed is a folder has that folder read here (:func:`pack_seed`: regular files and
folders only, at most :data:`MAX_BUNDLE_FILES` files and :data:`MAX_BUNDLE_BYTES`
bytes) and written into a private temporary folder on the node that runs it
(:func:`unpack_seed`), which is removed when the task ends.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import attrs

from ..errors import UsageError
from ..seeds import manifest

#: The most files a seed folder sent to another machine may hold.
MAX_BUNDLE_FILES = 20_000
#: The most bytes its files may hold together.
MAX_BUNDLE_BYTES = 256 * 1024 * 1024
#: The folders never sent: a version control's own data, and caches the node makes again.
SKIPPED_FOLDERS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache"})


@attrs.frozen
class SeedBundle:
    """A seed folder's content.

    :ivar manifest: the name of the file the task named, when it named the manifest
        itself (``seed.toml``) rather than its folder; ``None`` otherwise.
    :ivar folders: every folder under it, relative, parents first.
    :ivar files: every file: relative path, bytes, whether it is executable.
    """

    manifest: str | None
    folders: tuple[str, ...]
    files: tuple[tuple[str, bytes, bool], ...]

    @property
    def size(self) -> int:
        return sum(len(data) for _, data, _ in self.files)


def pack_seed(seed: str) -> SeedBundle | None:
    """The content of the seed folder ``seed`` names; ``None`` for an installed seed's name.

    :raises UsageError: the folder cannot be read, holds a symbolic link or a special
        file, or is past :data:`MAX_BUNDLE_FILES` or :data:`MAX_BUNDLE_BYTES`.
    """
    if not manifest.looks_like_path(seed):
        return None
    path = Path(seed)
    named = None
    try:
        if path.name == manifest.MANIFEST or path.is_file():
            named, path = path.name, path.parent
        return _pack(path, named)
    except OSError as error:
        raise UsageError(
            f"cannot read the seed folder {seed!r} to send it: {error.strerror}"
        ) from None


def _pack(root: Path, named: str | None) -> SeedBundle:
    folders: list[str] = []
    files: list[tuple[str, bytes, bool]] = []
    total = 0
    for here, subfolders, names in os.walk(root, onerror=_raise):
        subfolders[:] = sorted(name for name in subfolders if name not in SKIPPED_FOLDERS)
        base = Path(here)
        for name in [*subfolders, *sorted(names)]:
            path = base / name
            relative = path.relative_to(root).as_posix()
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise UsageError(
                    f"the seed folder {str(root)!r} holds a symbolic link, {relative!r}: a "
                    "seed sent to another machine is sent by content; put the file there"
                )
            if stat.S_ISDIR(mode):
                folders.append(relative)
                continue
            if not stat.S_ISREG(mode):
                raise UsageError(
                    f"the seed folder {str(root)!r} holds {relative!r}, which is not a regular file"
                )
            if len(files) >= MAX_BUNDLE_FILES:
                raise UsageError(
                    f"the seed folder {str(root)!r} holds more than {MAX_BUNDLE_FILES} files, "
                    "more than is sent to another machine"
                )
            data = _read(path, MAX_BUNDLE_BYTES - total)
            if data is None:
                raise UsageError(
                    f"the seed folder {str(root)!r} holds more than {MAX_BUNDLE_BYTES} bytes, "
                    "more than is sent to another machine"
                )
            total += len(data)
            files.append((relative, data, bool(mode & stat.S_IXUSR)))
    return SeedBundle(manifest=named, folders=tuple(folders), files=tuple(files))


def _raise(error: OSError) -> None:
    raise error


def _read(path: Path, most: int) -> bytes | None:
    """The file's bytes, or ``None`` when it holds more than ``most``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as stream:
        data = stream.read(most + 1)
    return None if len(data) > most else data


def unpack_seed(bundle: SeedBundle, into: Path) -> str:
    """Write ``bundle`` into the empty folder ``into`` (private to this user: the files
    get ordinary modes); the seed as a task names it there.

    Every path was made by :func:`pack_seed`, but is checked again: none leads out of
    ``into``.
    """
    root = into.resolve()
    for relative in bundle.folders:
        _inside(root, relative).mkdir(mode=0o755)
    for relative, data, executable in bundle.files:
        target = _inside(root, relative)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(target, flags, 0o755 if executable else 0o644)
        with open(fd, "wb") as stream:
            stream.write(data)
    return str(root / bundle.manifest) if bundle.manifest else str(root)


def _inside(root: Path, relative: str) -> Path:
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise UsageError(f"a seed sent by content names the path {relative!r}, outside its folder")
    return root.joinpath(*parts)

"""Applying a recorded run's patch to a folder: every file checked first, then each written whole.

The record is untrusted: a path it names is written only when it stays inside the
folder (no absolute path, no ``..``, no symbolic link that leads out of it), and
only when the folder still holds the text the run changed (for a file the run
created, no file at all). One file that does not fit refuses the whole patch
before anything is written; the files are then written to temporary files beside
them and renamed into place, each keeping its mode. A file that cannot be written
leaves the folder as it was, without the folders made for the patch's new files.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from ..errors import UsageError
from ..model import PatchPlan

#: How much of a file's name its temporary file's name repeats.
TEMPORARY_NAME_CHARS = 40


@attrs.frozen
class AppliedFile:
    """A file a patch wrote.

    :ivar path: its path relative to the folder, as the patch names it.
    :ivar created: whether the run created it (otherwise it replaced the run's original).
    """

    path: str
    created: bool


@attrs.frozen
class _Target:
    path: str
    real: str
    data: bytes
    mode: int | None  # None: a new file, given the mode the umask allows
    owner: tuple[int, int] | None


def apply_patch(
    originals: Mapping[str, str], plan: PatchPlan, folder: Path, *, run_id: str
) -> list[AppliedFile]:
    """Write ``plan``'s files into ``folder``, where each still holds its text in ``originals``
    (a path missing there is a file the run created, which must not exist yet).

    :raises UsageError: the folder is missing, a path leaves it, a file differs from the
        run's original or cannot be written; nothing is written then.
    """
    root = _root(folder)
    changed = [entry for entry in plan.files if originals.get(entry.path) != entry.content]
    targets = [
        _checked(root, entry.path, entry.content, originals.get(entry.path), run_id)
        for entry in changed
    ]
    seen: dict[str, str] = {}
    for target in targets:
        other = seen.setdefault(target.real, target.path)
        if other != target.path:
            raise UsageError(
                f"{target.path!r} and {other!r} are the same file in {root}; nothing written"
            )
    _write_all(root, targets)
    return [AppliedFile(target.path, target.mode is None) for target in targets]


def _root(folder: Path) -> str:
    try:
        if not folder.is_dir():
            raise UsageError(f"there is no folder {str(folder)!r} to apply the patch to")
    except OSError as error:
        raise UsageError(f"cannot read the folder {str(folder)!r}: {error.strerror}") from None
    return os.path.realpath(folder)


def _checked(root: str, path: str, content: str, original: str | None, run_id: str) -> _Target:
    """Where ``path`` is written, once it is shown to be inside ``root`` and to hold the
    run's original (or, for a file the run created, to be absent)."""
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\x00" in path:
        raise UsageError(
            f"run {run_id}'s patch names {path!r}, which is not a path inside {root}; "
            "nothing written"
        )
    lexical = os.path.join(root, *parts)
    real = os.path.realpath(lexical)
    if os.path.commonpath([root, real]) != root or real == root:
        raise UsageError(f"{path!r} leads out of {root} through a symbolic link; nothing written")
    data = content.encode("utf-8")
    if original is None:
        if os.path.lexists(lexical):
            raise UsageError(
                f"{path!r} already exists in {root}, but run {run_id} created it; nothing written"
            )
        _check_folders(root, real, path)
        return _Target(path, real, data, None, None)
    try:
        status = os.stat(real)
    except FileNotFoundError:
        raise UsageError(
            f"{path!r} is missing from {root}; run {run_id} changed it from the seed's text; "
            "nothing written"
        ) from None
    except OSError as error:
        raise UsageError(f"cannot read {path!r} in {root}: {error.strerror}") from None
    if not stat.S_ISREG(status.st_mode):
        raise UsageError(f"{path!r} in {root} is not a regular file; nothing written")
    now = _read(real, status.st_size, path, root)
    if now == data:
        raise UsageError(f"{path!r} in {root} already holds run {run_id}'s change; nothing written")
    if now != original.encode("utf-8"):
        raise UsageError(
            f"{path!r} in {root} no longer holds the text run {run_id} changed (it was "
            "edited since, or is another version); nothing written"
        )
    return _Target(path, real, data, stat.S_IMODE(status.st_mode), (status.st_uid, status.st_gid))


def _read(real: str, size: int, path: str, root: str) -> bytes:
    try:
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as stream:
            return stream.read(size + 1)
    except OSError as error:
        raise UsageError(f"cannot read {path!r} in {root}: {error.strerror}") from None


def _check_folders(root: str, real: str, path: str) -> None:
    """Refuse a new file whose nearest existing folder is not one."""
    folder = os.path.dirname(real)
    while folder != root and not os.path.lexists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise UsageError(
            f"cannot create {path!r}: {os.path.relpath(folder, root)!r} in {root} is not "
            "a folder; nothing written"
        )


def _write_all(root: str, targets: Sequence[_Target]) -> None:
    """Each file to a temporary file beside it, then every one renamed into place: a
    file that cannot be written leaves the folder as it was."""
    umask = os.umask(0)
    os.umask(umask)
    written: list[tuple[str, _Target]] = []
    made: list[str] = []
    try:
        for target in targets:
            written.append((_temporary_copy(target, 0o666 & ~umask, made), target))
    except OSError as error:
        for temporary, _ in written:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        _remove_empty(made)
        failed = targets[len(written)].path
        raise UsageError(
            f"cannot write {failed!r} in {root}: {error.strerror}; nothing written"
        ) from None
    for number, (temporary, target) in enumerate(written):
        try:
            os.replace(temporary, target.real)
        except OSError as error:
            for left, _ in written[number:]:
                with contextlib.suppress(OSError):
                    os.unlink(left)
            _remove_empty(made)
            done = ", ".join(t.path for _, t in written[:number]) or "none"
            raise UsageError(
                f"cannot write {target.path!r} in {root}: {error.strerror} "
                f"(already written: {done})"
            ) from None


def _make_folders(folder: str, made: list[str]) -> None:
    """Create ``folder`` and each missing folder above it, adding each to ``made``."""
    missing: list[str] = []
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for path in reversed(missing):
        os.mkdir(path)
        made.append(path)


def _remove_empty(made: list[str]) -> None:
    """Remove the folders :func:`_make_folders` created, deepest first, where empty."""
    for path in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(path)


def _temporary_copy(target: _Target, new_mode: int, made: list[str]) -> str:
    folder, name = os.path.split(target.real)
    _make_folders(folder, made)
    # Named after the file, shortened: a name of up to 255 bytes must leave room for the rest.
    prefix = "." + name[:TEMPORARY_NAME_CHARS] + "."
    descriptor, temporary = tempfile.mkstemp(prefix=prefix, suffix=".apply", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(target.data)
            stream.flush()
            if target.owner is not None:
                with contextlib.suppress(OSError):  # only root may give a file away
                    os.fchown(stream.fileno(), *target.owner)
            os.fchmod(stream.fileno(), new_mode if target.mode is None else target.mode)
            os.fsync(stream.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return temporary

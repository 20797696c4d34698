"""Reading a seed's files without following links and without trusting the folder to hold still.

A seed folder may come from anyone (a downloaded tarball, say), and whatever is
read from it goes to the sandbox and to the model provider. So every file is
opened relative to one descriptor of the seed's folder, one path segment at a
time, never following a symbolic link, and is then read from that descriptor
only, never by its path again: a link, a FIFO or a folder swapped in after the
manifest was checked is refused, not followed or waited on.

Python has no ``openat2(RESOLVE_NO_SYMLINKS)``; opening each segment with
``O_NOFOLLOW`` relative to the previous one gives the same guarantee, since the
paths never hold ``..`` (a folder seed's are checked with its manifest, and the
reader refuses any path that has one).
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
from collections.abc import Iterable
from pathlib import Path

from ..errors import UsageError

#: A seed is read whole and sent to the planner: the most bytes all its files may hold.
MAX_SEED_BYTES = 2 * 1024 * 1024

# O_NOFOLLOW: a symbolic link (last segment or any folder on the way) is an error, never
# followed. O_DIRECTORY: a folder segment is a folder. O_CLOEXEC: no process the agent
# starts inherits the descriptor.
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer (regular
# files ignore it). O_NOCTTY: a terminal device never becomes the agent's terminal.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 64 * 1024

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class SeedFileError(UsageError):
    """A seed file that cannot be read safely; the message names the file and the problem."""


def shown_name(path: str) -> str:
    """``path`` quoted for a message, whatever it holds: bytes that are not UTF-8 (which
    reach Python as lone surrogates) as ``\\xNN``, control characters escaped as ``repr``
    would, everything else as it is (``'café\\xff.py'``)."""
    shown = []
    for char in path:
        if 0xDC80 <= ord(char) <= 0xDCFF:
            shown.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or char in "'\\":
            shown.append(repr(char)[1:-1] if char != "'" else "\\'")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            shown.append(f"\\u{ord(char):04x}")
        else:
            shown.append(char)
    return "'" + "".join(shown) + "'"


def hard_link_problem(path: str, links: int) -> str:
    """Why a hard-linked file is refused in a seed folder of unknown origin, and the fix."""
    copy = shlex.quote(f"{path}.copy")
    original = shlex.quote(path)
    return (
        f"is a hard link ({links} names for one file): it could be any file of this machine; "
        f"replace it with a copy (in the seed folder: cp {original} {copy} && mv {copy} {original})"
    )


def read_seed_files(
    root: Path,
    paths: Iterable[str],
    *,
    untrusted: bool,
    identity: tuple[int, int] | None = None,
) -> dict[str, bytes]:
    """Read ``paths`` (relative, ``/``-separated, never ``.`` or ``..``) of the folder ``root``.

    Symbolic links (the file or a folder on its way), FIFOs, sockets and devices
    are refused for every seed; with ``untrusted``, a file with more than one
    name (a hard link, which could be any file the caller can read) is refused
    too. All files together hold at most :data:`MAX_SEED_BYTES`. With ``identity``
    (device, inode), ``root`` must still be that folder.

    :raises SeedFileError: naming the first file that cannot be read safely.
    """
    try:
        # The seed's folder itself may be reached through links (a home folder on
        # another disk, say): only what is inside it must never be one.
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise SeedFileError(f"seed folder {str(root)!r} cannot be read: {error.strerror}") from None
    try:
        found = os.fstat(root_fd)
        if identity is not None and (found.st_dev, found.st_ino) != identity:
            # Another folder now stands at that path (a link or a rename swapped in since
            # the manifest was read): its files are none of the seed's.
            raise SeedFileError(
                f"seed folder {str(root)!r} is no longer the folder its seed.toml was read "
                "from (it was replaced since); run again once nothing changes it"
            )
        files: dict[str, bytes] = {}
        room = MAX_SEED_BYTES
        for path in paths:
            files[path] = _read(root_fd, path, room, untrusted)
            room -= len(files[path])
        return files
    finally:
        os.close(root_fd)


def _read(root_fd: int, path: str, room: int, untrusted: bool) -> bytes:
    *folders, name = parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        # A folder seed's paths are checked when its manifest is read; a plugin's are not.
        raise _error(path, "has an empty, '.' or '..' segment; seed files are inside the folder")
    opened: list[int] = []
    try:
        folder_fd = root_fd
        for part in folders:
            folder_fd = _open(folder_fd, part, _FOLDER_FLAGS, path)
            opened.append(folder_fd)
        # Looked at before it is opened, so that a device named in the folder is never
        # opened (opening some has effects); the fstat below is what counts.
        _refuse_special(os.stat(name, dir_fd=folder_fd, follow_symlinks=False), path)
        fd = _open(folder_fd, name, _FILE_FLAGS, path)
    except OSError as error:  # the look before opening
        raise _error(path, f"cannot be read: {error.strerror}") from None
    finally:
        for folder in opened:
            os.close(folder)
    try:
        # What was opened is what counts: the entry may have changed since it was looked at.
        info = os.fstat(fd)
        _refuse_special(info, path)
        if untrusted and info.st_nlink != 1:
            raise _error(path, hard_link_problem(path, info.st_nlink))
        if info.st_size > room:
            raise _error(path, _too_large(info.st_size))
        # One byte more than fstat promised tells that the file grew, and nothing past
        # the bound is ever read.
        data = _read_at_most(fd, info.st_size + 1, path)
    finally:
        os.close(fd)
    if len(data) != info.st_size:
        raise _error(
            path,
            f"changed while it was read (it was {info.st_size} bytes when opened); "
            "run again once nothing is writing to the seed folder",
        )
    return data


def _open(folder_fd: int, part: str, flags: int, path: str) -> int:
    try:
        return os.open(part, flags, dir_fd=folder_fd)
    except OSError as error:
        if error.errno == errno.ELOOP or _is_link(folder_fd, part):
            raise _error(path, _LINK) from None
        raise _error(path, f"cannot be read: {error.strerror}") from None


def _is_link(folder_fd: int, part: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=folder_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _refuse_special(info: os.stat_result, path: str) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise _error(path, _LINK)
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "of an unknown kind")
        raise _error(path, f"is not a regular file ({kind})")


def _read_at_most(fd: int, limit: int, path: str) -> bytes:
    chunks: list[bytes] = []
    while limit > 0:
        try:
            chunk = os.read(fd, min(limit, _CHUNK))
        except OSError as error:
            raise _error(path, f"cannot be read: {error.strerror}") from None
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)


def _too_large(size: int) -> str:
    if size > MAX_SEED_BYTES:
        return f"is {size} bytes; a seed has at most {MAX_SEED_BYTES} bytes in all"
    return f"takes the seed past {MAX_SEED_BYTES} bytes in all, the most a seed may hold"


def _error(path: str, problem: str) -> SeedFileError:
    return SeedFileError(f"seed file {path!r} {problem}")


_LINK = (
    "is (or passes through) a symbolic link: it could be any file of this machine; "
    "seed files must be inside the seed folder"
)

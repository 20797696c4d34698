"""Folder seeds: a directory with a ``seed.toml`` describing a seed project.

``agent run --seed ./path/to/seed`` reads the manifest with :func:`load_seed`;
a plugin can ship a folder seed inside its package and register the result of
:func:`load_seed` from its ``register_seeds`` hook. The format is documented in
``docs/seed-manifest.md``; every problem is reported as one
:class:`ManifestError` naming the file, the line and the key.

This module finds, opens and parses the manifest, within bounds and without
following a link; :mod:`~.manifest_reader` reads its keys into the seed,
:mod:`~.seed_folder` finds the folder's files and :mod:`~.manifest_errors` says
where a problem is; the names of theirs that the rest of the agent uses are
importable from here too.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

from ..plans.policy_parameters import INT_RANGE
from . import seed_files
from .manifest_errors import ManifestError as ManifestError
from .manifest_errors import key_lines as key_lines
from .manifest_reader import DEFAULT_FILES as DEFAULT_FILES
from .manifest_reader import MAX_PATTERNS as MAX_PATTERNS
from .manifest_reader import MAX_REQUIREMENTS as MAX_REQUIREMENTS
from .manifest_reader import MAX_SEED_BYTES as MAX_SEED_BYTES
from .manifest_reader import MAX_SEED_FILES as MAX_SEED_FILES
from .manifest_reader import MAX_TEST_ID_CHARS as MAX_TEST_ID_CHARS
from .manifest_reader import MAX_TEST_IDS as MAX_TEST_IDS
from .manifest_reader import ManifestReader
from .manifest_reader import PolicyCheck as PolicyCheck
from .project import SeedProject
from .seed_folder import MANIFEST as MANIFEST
from .seed_folder import MAX_DEPTH as MAX_DEPTH
from .seed_folder import MAX_WALK_ENTRIES as MAX_WALK_ENTRIES

#: A manifest is a few lines; a seed folder may come from anyone, so it is read within bounds.
MAX_MANIFEST_BYTES = 256 * 1024
MAX_NESTING = 16

#: Whether :func:`load_seed` trusts a folder when not told: only while the plugin host
#: runs a plugin's ``register_seeds`` hook (see :func:`reading_plugin_seeds`).
_PLUGIN_SEEDS = contextvars.ContextVar("reading_plugin_seeds", default=False)


def looks_like_path(value: str) -> bool:
    """Whether ``--seed VALUE`` names a folder rather than a registered seed.

    Seed names never contain ``/`` and never start with ``.``, so ``./calculator``
    is the folder even when a seed called ``calculator`` exists.
    """
    return "/" in value or os.sep in value or value.startswith(".") or value.endswith(".toml")


@contextlib.contextmanager
def reading_plugin_seeds() -> Iterator[None]:
    """While active, :func:`load_seed` trusts the folders it reads unless told otherwise.

    The plugin host wraps each plugin's ``register_seeds`` hook in it: a folder a plugin
    ships is part of an installed package, whose files installers such as
    ``uv tool install`` hard-link from their cache, and the plugin's code runs inside
    the agent anyway. So a plugin author never needs to pass ``untrusted``.
    """
    token = _PLUGIN_SEEDS.set(True)
    try:
        yield
    finally:
        _PLUGIN_SEEDS.reset(token)


def load_seed(
    location: str | os.PathLike[str],
    *,
    check_policy: PolicyCheck | None = None,
    untrusted: bool | None = None,
) -> SeedProject:
    """Read the folder seed at ``location`` (its folder, or its ``seed.toml``).

    :param check_policy: called with each ``[policies.NAME]`` table so that an
        unknown policy or a bad parameter is reported with its line; it raises
        :class:`ValueError`, :class:`TypeError` or :class:`UsageError`.
    :param untrusted: the folder may come from anyone, so a hard-linked file among the
        seed's files is refused, now and when the files are read
        (:attr:`SeedProject.untrusted`). ``None``: untrusted, except when a plugin's
        ``register_seeds`` hook calls it.
    :raises ManifestError: the manifest is missing, is not TOML, or describes no valid seed.
    """
    if untrusted is None:
        untrusted = not _PLUGIN_SEEDS.get()
    path = Path(location)
    # A path from a record or a tasks file may hold what no path can (a NUL, a name
    # too long for any folder): it names no seed, and says so.
    if "\x00" in str(path):
        raise ManifestError(
            f"{seed_files.shown_name(str(path))}: a path cannot hold a NUL character"
        )
    try:
        manifest = path if path.name == MANIFEST or path.is_file() else path / MANIFEST
    except OSError as error:
        raise ManifestError(f"{path}: cannot read it: {error.strerror}") from None
    # The folder is opened once, and everything after is read relative to that descriptor:
    # a folder swapped in at its path meanwhile (a link, a rename) is never looked into.
    try:
        root_fd = os.open(manifest.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ManifestError(
            f"{manifest}: no such file (a folder seed needs a {MANIFEST})"
        ) from None
    except OSError as error:
        raise ManifestError(f"{manifest.parent}: cannot read it: {error.strerror}") from None
    try:
        text = _read_manifest(manifest, untrusted, root_fd)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ManifestError(f"{manifest}: {_toml_problem(str(error))}") from None
        except RecursionError:  # tomllib parses nested values recursively
            raise ManifestError(f"{manifest}: values are nested too deeply") from None
        except ValueError:  # Python's limit on the digits of an integer it reads (4,300)
            raise ManifestError(f"{manifest}: an integer is outside TOML's 64-bit range") from None
        if _nested_deeper(data, MAX_NESTING):
            raise ManifestError(f"{manifest}: values are nested too deeply")
        reader = ManifestReader(manifest, text, untrusted, root_fd)
        out_of_range = _integer_out_of_range(data, ())
        if out_of_range is not None:
            raise reader.fail(out_of_range, "an integer outside TOML's 64-bit range")
        return reader.seed(data, check_policy)
    finally:
        os.close(root_fd)


def _read_manifest(manifest: Path, untrusted: bool, root_fd: int) -> str:
    """The manifest's text, if it is a small regular file of its own.

    A link is never followed (it could point at any file the caller can read,
    whose text would then reach the messages and the planner), and a FIFO or a
    device is never opened (opening some has effects): the entry is first
    opened as a bare reference (``O_PATH``), checked, and only then reopened
    through that reference for reading, so what is read is what was checked.
    """
    try:
        entry = os.open(manifest.name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
    except FileNotFoundError:
        raise ManifestError(
            f"{manifest}: no such file (a folder seed needs a {MANIFEST})"
        ) from None
    except OSError as error:
        raise ManifestError(f"{manifest}: cannot read it: {error.strerror}") from None
    try:
        info = os.fstat(entry)
        if stat.S_ISLNK(info.st_mode):
            raise ManifestError(
                f"{manifest}: is a symbolic link; the manifest must be a file of the seed folder"
            )
        if not stat.S_ISREG(info.st_mode):
            raise ManifestError(f"{manifest}: is not a regular file")
        if untrusted and info.st_nlink != 1:
            problem = seed_files.hard_link_problem(MANIFEST, info.st_nlink)
            raise ManifestError(f"{manifest}: {problem}")
        if info.st_size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{manifest}: larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            fd = os.open(f"/proc/self/fd/{entry}", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as error:
            raise ManifestError(f"{manifest}: cannot read it: {error.strerror}") from None
    finally:
        os.close(entry)
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
        except OSError as error:
            raise ManifestError(f"{manifest}: cannot read it: {error.strerror}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{manifest}: larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ManifestError(f"{manifest}: cannot read it: {error}") from None


def _nested_deeper(value: object, levels: int) -> bool:
    """Whether tables and arrays nest deeper than ``levels`` in ``value``."""
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, list):
        children = value
    else:
        return False
    return levels == 0 or any(_nested_deeper(child, levels - 1) for child in children)


def _integer_out_of_range(value: object, key: tuple[str, ...]) -> tuple[str, ...] | None:
    """The key of an integer TOML 1.0 does not allow (beyond 64 bits), or ``None``.

    tomllib reads any size, but no limit or parameter means one, and one of
    4,300 digits or more cannot even be written out in a message or a run record.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return None if value in INT_RANGE else key
    if isinstance(value, dict):
        children = [((*key, str(name)), child) for name, child in value.items()]
    elif isinstance(value, list):  # an item has no key of its own: the list's is named
        children = [(key, item) for item in value]
    else:
        return None
    for child_key, child in children:
        found = _integer_out_of_range(child, child_key)
        if found is not None:
            return found
    return None


def _toml_problem(message: str) -> str:
    found = re.fullmatch(r"(.*) \(at (line \d+, column \d+|end of document)\)", message, re.S)
    if not found:
        return f"not valid TOML: {message}"
    return f"{found.group(2)}: not valid TOML: {found.group(1)}"

"""One release of ``test-patch`` per sandbox definition, not one per test.

Preparing a release resolves the image, stores the (empty) source and creates
a release: three control-plane requests, and one more release kept in the
workspace, each time. A release depends only on the sandbox's definition (its
image, resources, network, command), so the agent prepares one per definition
and reuses it: found by the definition's content hash, first in this process,
then in ``$XDG_STATE_HOME/sandboxed-coding-agent/lazycloud/releases.json``
(the control plane has no way to look a release up by its content). The hash
is also put in the release's metadata (``agent-spec-sha256``), so a release in
the workspace says what it was made from.

A release the control plane no longer knows (a create answers 404) is
forgotten, and a new one prepared.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sandboxed_coding_agent.core.records.planner_calls import state_directory

from .ledger import sandbox_id_shape

METADATA_KEY = "agent-spec-sha256"
#: The most releases the file keeps (the newest), and the most bytes it may hold.
MAX_KEPT = 64
MAX_FILE_BYTES = 64 * 1024

_lock = threading.Lock()
#: Content hash → release ID, for this process; and the locks that make forty
#: threads wanting the same release prepare it once.
_known: dict[str, str] = {}
_preparing: dict[str, threading.Lock] = {}


def releases_file(environ: Mapping[str, str] = os.environ) -> Path:
    return state_directory(environ) / "lazycloud" / "releases.json"


def definition_key(definition: Any, endpoint: str, workspace: str) -> str:
    """The content hash of a sandbox definition in one workspace: what its release holds."""
    from importlib import metadata

    try:
        sdk = metadata.version("lazycloud-client")
    except metadata.PackageNotFoundError:
        sdk = "unknown"
    spec = definition.spec().model_dump(mode="json")
    spec.get("metadata", {}).pop(METADATA_KEY, None)
    text = json.dumps(
        {"spec": spec, "sdk": sdk, "endpoint": endpoint, "workspace": workspace},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def release_for(
    key: str, prepare: Callable[[], str], environ: Mapping[str, str] = os.environ
) -> str:
    """The release ID for ``key``: known already, or made by ``prepare()`` (once, whatever
    the threads asking) and remembered."""
    with _lock:
        known = _known.get(key)
        if known is not None:
            return known
        preparing = _preparing.setdefault(key, threading.Lock())
    with preparing:
        with _lock:
            known = _known.get(key) or _read(environ).get(key)
            if known is not None:
                _known[key] = known
                return known
        release = sandbox_id_shape(prepare())
        with _lock:
            _known[key] = release
            _write(environ, key, release)
        return release


def forget(key: str, release: str, environ: Mapping[str, str] = os.environ) -> None:
    """Stop reusing ``release`` for ``key`` (the control plane no longer has it)."""
    with _lock:
        if _known.get(key) == release:
            del _known[key]
        saved = _read(environ)
        if saved.get(key) == release:
            del saved[key]
            _save(environ, saved)


def _read(environ: Mapping[str, str]) -> dict[str, str]:
    """The saved releases; nothing from a file that is not a small private file of the
    user's holding hashes and release IDs."""
    path = releases_file(environ)
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        found = os.fstat(handle)
        if (
            not stat.S_ISREG(found.st_mode)
            or found.st_uid != os.geteuid()
            or found.st_size > MAX_FILE_BYTES
        ):
            return {}
        data = os.read(handle, MAX_FILE_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(handle)
    try:
        loaded = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    kept: dict[str, str] = {}
    for key, release in loaded.items():
        with contextlib.suppress(ValueError, TypeError):
            if len(key) == 64 and all(c in "0123456789abcdef" for c in key):
                kept[key] = sandbox_id_shape(release)
    return kept


def _write(environ: Mapping[str, str], key: str, release: str) -> None:
    saved = _read(environ)
    saved.pop(key, None)
    saved[key] = release
    _save(environ, dict(list(saved.items())[-MAX_KEPT:]))


def _save(environ: Mapping[str, str], saved: Mapping[str, str]) -> None:
    """Write the file whole (a private temporary file renamed into place); a failure only
    means the next process prepares its own release."""
    path = releases_file(environ)
    temporary = path.with_name(f".releases.{os.getpid()}.{threading.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = os.open(temporary, flags, 0o600)
        try:
            os.write(handle, json.dumps(dict(saved)).encode())
        finally:
            os.close(handle)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)

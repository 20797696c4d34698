"""Where and how a batch ran, as each of its results lines records it: the agent's
version, Python, the host and the command line, without anything that looks like a
secret (the API key never reaches a results line in any case: every line is written
with it blanked)."""

from __future__ import annotations

import datetime
import functools
import platform
import re
import socket
import sys
from collections.abc import Sequence

import attrs

#: How much of the command line is kept: its first words, each cut to this many characters.
MAX_ARGS = 64
MAX_ARG_CHARS = 500
REDACTED = "[redacted]"

_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|credential|cookie|bearer", re.I)
# Values that are secrets whatever option carries them: provider and forge key prefixes,
# JWTs, and long unbroken runs of letters and digits (a key pasted as an argument).
_SECRET_VALUE = re.compile(
    r"\b(?:sk|pk|rk|ghp|gho|ghs|ghu|github_pat|xox[abprs]|glpat|AKIA|AIza)[-_A-Za-z0-9]{8,}"
    r"|\beyJ[-_A-Za-z0-9]{10,}\.[-_A-Za-z0-9]{10,}"
    r"|(?<![-_./A-Za-z0-9])(?=[-_A-Za-z0-9]*[0-9])(?=[-_A-Za-z0-9]*[A-Za-z])[-_A-Za-z0-9]{32,}"
)
_URL_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^/@\s]*@")


@attrs.frozen
class BatchEnvironment:
    """Where a batch ran.

    :ivar agent_version: this agent's version.
    :ivar python: the Python that ran it (implementation and version).
    :ivar host: the host's name.
    :ivar command_line: the command's words (``sys.argv``), anything that looks like a
        secret replaced by ``[redacted]``.
    """

    agent_version: str
    python: str
    host: str
    command_line: tuple[str, ...] = ()


def scrub_command_line(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` without what looks like a secret: the value of an option or a variable
    whose name says key, token, secret, password and the like, a password in a URL,
    and any word shaped like a key. Bounded to :data:`MAX_ARGS` words."""
    kept: list[str] = []
    secret_next = False
    for word in argv[:MAX_ARGS]:
        if secret_next:
            kept.append(REDACTED)
            secret_next = False
            continue
        name, equals, _ = word.partition("=")
        if equals and _SECRET_NAME.search(name):
            kept.append(f"{name}={REDACTED}")
            continue
        if word.startswith("-") and not equals and _SECRET_NAME.search(word):
            secret_next = True
        word = _URL_PASSWORD.sub(rf"\1{REDACTED}@", word)
        word = _SECRET_VALUE.sub(REDACTED, word)
        kept.append(word[:MAX_ARG_CHARS])
    if len(argv) > MAX_ARGS:
        kept.append(f"[{len(argv) - MAX_ARGS} more words left out]")
    return tuple(kept)


@functools.cache
def batch_environment() -> BatchEnvironment:
    """This process's environment, as a results line records it."""
    from .. import __version__

    return BatchEnvironment(
        agent_version=__version__,
        python=f"{platform.python_implementation()} {platform.python_version()}",
        host=socket.gethostname(),
        command_line=scrub_command_line(sys.argv),
    )


def utc_now() -> str:
    """Now, in ISO 8601 UTC to the millisecond: ``2026-12-04T01:15:00.123+00:00``."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")

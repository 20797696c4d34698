"""Running ``git`` against a repository that is hostile input.

Every ``git`` command of a git seed (:mod:`.git_source`) runs through :func:`git`
or :func:`nul_records`: with the repository's hooks, fsmonitor and the ``ext::``
transport off, without a terminal or a password prompt, with none of the caller's
environment but what a fetch needs, and for at most :data:`GIT_TIMEOUT_SECONDS`.
Only a fetch reads the caller's own git configuration (``callers_config``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Generator, Sequence
from pathlib import Path

from ..errors import UsageError

#: How long one ``git`` command may take (a first fetch of a large repository is the longest).
GIT_TIMEOUT_SECONDS = 1800
# Settings that keep a hostile repository from running anything on this machine.
_SAFE = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "safe.directory=*",
    "-c", "core.symlinks=true",
    "-c", "advice.detachedHead=false",
)  # fmt: skip


class GitSourceError(UsageError):
    """A git seed's repository or commit cannot be used."""


def _environment(callers_config: bool) -> dict[str, str]:
    keep = ("PATH", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "SSL_CERT_FILE", "SSL_CERT_DIR")
    found = {name: os.environ[name] for name in keep if name in os.environ}
    if callers_config and "HOME" in os.environ:
        found["HOME"] = os.environ["HOME"]
    found.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1",
        LC_ALL="C",
        # A key in the caller's environment never reaches git, which could print or send it.
        GIT_ASKPASS="/bin/false",
        SSH_ASKPASS="/bin/false",
    )
    # ssh never asks (a host's key, a password): it fails with its reason instead.
    found.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    if not callers_config:
        # The caller's ~/.gitconfig may name programs (git-lfs's filter, a diff driver) that
        # a repository's .gitattributes would have run on a checkout.
        found["GIT_CONFIG_GLOBAL"] = os.devnull
    return found


def _command(
    arguments: Sequence[str],
    git_dir: Path | None,
    work_tree: Path | None = None,
    index: Path | None = None,
    callers_config: bool = False,
) -> tuple[list[str], dict[str, str]]:
    executable = shutil.which("git")
    if executable is None:
        raise GitSourceError("git seeds need git, which is not installed on this machine")
    environment = _environment(callers_config)
    if git_dir is not None:
        environment["GIT_DIR"] = str(git_dir)
    if work_tree is not None:
        environment["GIT_WORK_TREE"] = str(work_tree)
    if index is not None:
        environment["GIT_INDEX_FILE"] = str(index)
    return [executable, *_SAFE, *arguments], environment


def _failure(command: str, stderr: bytes, returncode: int) -> GitSourceError:
    """git's own reason (the first line that is not a warning or a hint; ssh's, when
    ssh failed), not the advice after it."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith(("warning: ", "hint: "))]
    detail = lines[0].removeprefix("fatal: ").removeprefix("error: ") if lines else returncode
    return GitSourceError(f"git {command} failed: {detail}")


def git(
    arguments: Sequence[str],
    *,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    index: Path | None = None,
    data: bytes | None = None,
    check: bool = True,
    callers_config: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git`` with the settings a hostile repository cannot change; raise on failure.

    :param callers_config: read the caller's own git configuration (``~/.gitconfig``): a
        fetch needs its credentials, proxies and URL rewrites; nothing else does.
    """
    argv, environment = _command(arguments, git_dir, work_tree, index, callers_config)
    try:
        # Input from a file, not a pipe: subprocess writes a pipe 512 bytes at a time.
        with tempfile.TemporaryFile() as given:
            given.write(data or b"")
            given.seek(0)
            done = subprocess.run(
                argv,
                stdin=given if data is not None else subprocess.DEVNULL,
                capture_output=True,
                env=environment,
                # No controlling terminal, which ssh would otherwise open to ask on.
                start_new_session=True,
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise GitSourceError(
            f"git {arguments[0]} took longer than {GIT_TIMEOUT_SECONDS} seconds"
        ) from None
    if check and done.returncode != 0:
        raise _failure(arguments[0], done.stderr, done.returncode)
    return done


def nul_records(
    arguments: Sequence[str], git_dir: Path, *, limit: int, longest: int
) -> Generator[bytes, None, None]:
    """The NUL-separated records ``git`` prints, read as they come, at most ``limit`` of
    at most ``longest`` bytes: ``git`` is stopped then (or when the reader stops), so a
    listing without end is never read to its end.

    :raises GitSourceError: ``git`` failed, printed a longer record, or took longer
        than :data:`GIT_TIMEOUT_SECONDS`.
    """
    argv, environment = _command(arguments, git_dir)
    expired = threading.Event()
    with (
        tempfile.TemporaryFile() as errors,
        subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=environment,
            start_new_session=True,
        ) as process,
    ):
        assert process.stdout is not None

        def expire() -> None:
            expired.set()
            process.kill()

        timer = threading.Timer(GIT_TIMEOUT_SECONDS, expire)
        timer.start()
        count = 0
        ended = False
        try:
            rest = b""
            while count < limit and not ended:
                chunk = process.stdout.read(1 << 16)
                if chunk:
                    *complete, rest = (rest + chunk).split(b"\0")
                else:
                    ended, complete = True, [rest] if rest else []
                if len(rest) > longest:
                    raise GitSourceError(
                        f"git {arguments[0]}: a record longer than {longest} bytes"
                    )
                for record in complete[: limit - count]:
                    count += 1
                    yield record
        finally:
            timer.cancel()
            if not ended:
                process.kill()
            process.stdout.close()
            process.wait()
        if expired.is_set():
            raise GitSourceError(
                f"git {arguments[0]} took longer than {GIT_TIMEOUT_SECONDS} seconds"
            )
        if ended and process.returncode != 0:
            errors.seek(0)
            raise _failure(arguments[0], errors.read(), process.returncode)

"""Sessions: shell commands run one at a time on a seed, each in a fresh sandbox.

A planner that explores (looks around, runs the visible tests, edits) works in a
session. Each command is one job of the runner, with the same walls as a test:
no network, nothing of the host but what it needs read-only, the seed's limits,
every process gone when the command ends. It runs as ``bash -c COMMAND`` in the
project folder; the only state carried from one command to the next is the
project's files, which the runner's harness hands back after each command
(:attr:`~sandboxed_coding_agent.core.model.SandboxJob.session`). So there is no
hidden state between commands: no environment variable, working folder or
process survives one.

What a session sees: the seed's files without its hidden tests, and for a git seed
its tree with no ``.git``. Its test files are read-only (as in a test's sandbox);
every other file may be changed, and files may be made. :meth:`Session.changes`
says what differs from the seed at the end; a planner turns the changes to
editable files into a plan, which is then proven in a fresh sandbox from the
pristine seed, never in the session.

Any runner whose harness honours ``SandboxJob.session`` offers sessions (the local
sandbox's does, and any runner that starts the harness as its PID 1 with the
settings it is given). A runner that does not hands back no files, and the first
command says so (:class:`SessionError`).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
import stat
import time
from collections.abc import Mapping
from pathlib import Path

import attrs

from ..errors import SandboxError
from ..model import CommandResult as CommandResult
from ..model import SandboxJob, SeedProject, SessionStep
from ..protocols import Runner
from ..seeds import git_source
from ..verdicts.evidence import TestHarness
from ..verdicts.verdict import MAX_REPORT_BYTES, signed_lines

#: Seconds one command may run when the caller does not say.
DEFAULT_COMMAND_SECONDS = 60.0
#: What a session's files may come to, in all: what the harness hands back after each
#: command travels in its report, whose bound is the runner's.
MAX_SESSION_BYTES = MAX_REPORT_BYTES // 2
#: The most files a session carries, and the most bytes their paths may come to: each file
#: is a few arguments of the next sandbox's command line, which the kernel bounds (a
#: quarter of the stack's limit, 512 KiB under the local sandbox's), and ``bwrap`` too
#: (9,000 arguments, five a file).
MAX_SESSION_FILES = 1000
MAX_SESSION_PATH_BYTES = 128 * 1024
#: The most bytes one path of a session may have: the next sandbox makes it under its
#: project folder, and a path has at most 4,096 bytes (``PATH_MAX``).
LONGEST_SESSION_PATH = 2048
#: Seconds the runner's timeout leaves, after the command's, for ending its processes and
#: handing back the files.
HAND_BACK_SECONDS = 10.0


class SessionError(SandboxError):
    """A session could not go on: its runner offers none, or a command's files could not
    be carried (too many, or not handed back)."""


class SessionFilesRefused(SessionError):
    """The files a command left are not kept, and the session's are as they were before
    it: they passed one of a session's bounds, or the command passed a limit of the seed
    (its output, say) and its sandbox was stopped before they were handed back."""


class Session:
    """Shell commands run one at a time on ``seed``, each in a fresh sandbox of ``runner``.

    :param command_seconds: how long each command may run (a command may ask for less).
    """

    def __init__(
        self,
        runner: Runner,
        seed: SeedProject,
        *,
        command_seconds: float = DEFAULT_COMMAND_SECONDS,
    ) -> None:
        self.runner = runner
        self.seed = seed
        self.command_seconds = command_seconds
        hidden = set(seed.hidden_files)
        self._original = {p: data for p, data in seed.read_files().items() if p not in hidden}
        self.files: dict[str, bytes] = dict(self._original)
        #: The files of the last command whose sandbox started: what the session goes back to
        #: should the files a command left be ones no sandbox can start with.
        self._started: dict[str, bytes] = self.files
        self.tests = tuple(p for p in seed.test_files if p not in hidden)

    def run(self, command: str, *, seconds: float | None = None) -> CommandResult:
        """Run ``command`` with ``bash -c`` in a fresh sandbox holding the session's files,
        and carry the files it leaves into the next command.

        :raises SessionFilesRefused: the command left too many files, or passed a limit of
            the seed (the session's files are as before it).
        :raises SessionError: the runner hands back no files.
        :raises SandboxError: the sandbox could not be made.
        """
        limit = min(seconds or self.command_seconds, self.command_seconds)
        key = secrets.token_hex(32)
        writable = [path for path in self.files if path not in self.tests]
        job = SandboxJob(
            seed=self.seed.name,
            files=self.files,
            test_command=("bash", "-c", command),
            limits=attrs.evolve(self.seed.limits, test_timeout_seconds=limit + HAND_BACK_SECONDS),
            runtime=self.seed.runtime,
            harness=TestHarness(
                key=key, framework=None, editable=tuple(writable), tests=self.tests
            ),
            tree=self.seed.source,
            tree_hidden=self.seed.hidden_files,
            session=SessionStep(
                timeout_seconds=limit,
                max_bytes=MAX_SESSION_BYTES,
                max_files=MAX_SESSION_FILES,
                max_path_bytes=MAX_SESSION_PATH_BYTES,
                longest_path=LONGEST_SESSION_PATH,
            ),
        )
        started = time.monotonic()
        try:
            outcome = self.runner.run_test(job)
        except SandboxError as error:
            if self.files == self._started:
                raise  # the same files as a sandbox started with: the runner's own trouble
            # What the last command left (a tree's folders opened past what a sandbox may
            # bind, say): the session goes back to the files before it.
            self.files = self._started
            raise SessionFilesRefused(
                f"the files the last command left could not be put in a sandbox "
                f"({error.message}); they are as before that command, and this command "
                "did not run"
            ) from None
        self._started = self.files
        try:
            handed = read_hand_back(outcome.report, key, self.runner.name)
        except SessionFilesRefused:
            raise
        except SessionError:
            if outcome.limit_hit is None:
                raise
            # The command's doing (a flood of output, say): the session goes on without it.
            raise SessionFilesRefused(
                f"the command passed the seed's {outcome.limit_hit} limit, and its sandbox "
                "was stopped before the files were handed back: none of its changes is kept"
            ) from None
        exit_code, timed_out = handed.exit_code, handed.timed_out
        files, unplaced = self._placeable(handed.files)
        self.files = {**{p: d for p, d in self.files.items() if p in self.tests}, **files}
        return CommandResult(
            command=command,
            output=outcome.output,
            output_truncated=outcome.output_truncated,
            exit_code=None if timed_out else exit_code,
            timed_out=timed_out or outcome.timed_out,
            seconds=round(time.monotonic() - started, 3),
            sandbox_id=outcome.sandbox_id,
            not_kept=(*handed.not_kept, *unplaced),
        )

    def _placeable(self, files: dict[str, bytes]) -> tuple[dict[str, bytes], tuple[str, ...]]:
        """``files`` the next sandbox can hold, and the paths of those it cannot: for a git
        seed, a file under what the tree has as a file or a link (a command that renamed a
        folder of the tree and made a folder in its place), which no runner could put
        there around the tree, and the session could then run no command."""
        if self.seed.source is None:
            return files, ()
        tree = git_source.tree_folder(self.seed.source)
        if not tree.is_dir():
            return files, ()
        hidden = set(self.seed.hidden_files)
        unplaced = tuple(path for path in files if _under_a_file(tree, path, hidden))
        return {p: d for p, d in files.items() if p not in unplaced}, unplaced[:100]

    def changes(self) -> dict[str, bytes | None]:
        """Each file that differs from the seed's: its bytes now, or ``None`` if deleted."""
        changed: dict[str, bytes | None] = {
            path: data for path, data in self.files.items() if self._original.get(path) != data
        }
        changed.update({path: None for path in self._original if path not in self.files})
        return dict(sorted(changed.items()))


@attrs.frozen
class HandBack:
    """What the harness handed back after a command: its status, and the project's files."""

    exit_code: int | None
    timed_out: bool
    files: dict[str, bytes]
    not_kept: tuple[str, ...]


def read_hand_back(report: str | None, key: str, runner: str) -> HandBack:
    """The command's exit status, whether it timed out, and the files of its report, checked
    as the hostile data
    they are (the command wrote them, in effect).

    :raises SessionError: no step or end line (the runner offers no sessions, or the
        harness did not finish), too many files, or a line that is not what the
        harness writes.
    """
    if report is None:
        raise SessionError(f"runner {runner!r} offers no sessions: it runs no harness")
    step: tuple[int | None, bool] | None = None
    files: dict[str, bytes] = {}
    not_kept: tuple[str, ...] = ()
    ended = False
    if len(report) > MAX_REPORT_BYTES:
        raise SessionError("what the command's sandbox handed back is larger than any report")
    for line in signed_lines(report, key):
        if line is None:
            raise SessionError("what the command's sandbox handed back is not the harness's")
        kind = line.get("kind")
        if kind == "step" and step is None:
            step = (_int_or_none(line.get("exit_code")), line.get("timed_out") is True)
        elif kind == "file" and step is not None and not ended:
            path, data = _file(line)
            files[path] = data
        elif kind == "files" and step is not None and not ended:
            skipped = line.get("skipped")
            if isinstance(skipped, list):
                not_kept = tuple(_text(str(name)[:200]) for name in skipped[:100])
            ended = True
        elif kind == "too-large":
            raise _too_large()
    lengths = [len(os.fsencode(path)) for path in files]  # each a name (checked by _file)
    if (
        len(files) > MAX_SESSION_FILES
        or sum(lengths) > MAX_SESSION_PATH_BYTES
        or max(lengths, default=0) > LONGEST_SESSION_PATH
    ):
        raise _too_large()  # a harness that does not bound them: the next sandbox could not start
    if step is None or not ended:
        raise SessionError(
            f"runner {runner!r} handed back no files after the command (it offers no "
            "sessions, or the sandbox ended before the harness did)"
        )
    return HandBack(step[0], step[1], files, not_kept)


def _under_a_file(tree: Path, path: str, hidden: set[str]) -> bool:
    """Whether a folder of ``path`` is a file or a link of ``tree`` (a file of ``hidden``
    is left out of the tree, so not one)."""
    parts = path.split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth])
        if folder in hidden:
            return False
        try:
            mode = os.lstat(tree / folder).st_mode  # no link above it: checked at its depth
        except OSError:
            return False  # not in the tree: the sandbox makes the folder
        if not stat.S_ISDIR(mode):
            return True
    return False


def _too_large() -> SessionFilesRefused:
    return SessionFilesRefused(
        f"the session's files came to more than {MAX_SESSION_BYTES} bytes, "
        f"{MAX_SESSION_FILES} files or {MAX_SESSION_PATH_BYTES} bytes of paths (or a path "
        f"of more than {LONGEST_SESSION_PATH} bytes) after the command"
    )


def _text(name: str) -> str:
    """A file's name as text to show: a name that is not UTF-8 comes from the harness with
    its bytes as lone surrogates, which no UTF-8 message (the model's conversation, a
    record) may hold; each byte that is not UTF-8 becomes U+FFFD."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # surrogates the harness does not write
        raw = name.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _file(line: Mapping[str, object]) -> tuple[str, bytes]:
    path, data = line.get("path"), line.get("data")
    if not isinstance(path, str) or not isinstance(data, str):
        raise SessionError("a file handed back after the command is not a path and data")
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in path:
        raise SessionError(f"a file handed back after the command has the path {path!r}")
    try:
        os.fsencode(path)  # bytes of a name: no surrogate but those of bytes not UTF-8
    except UnicodeEncodeError:
        raise SessionError(f"a file handed back after the command has the path {path!r}") from None
    try:
        return os.path.normpath(path), base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise SessionError(f"the file {path!r} handed back is not base64") from None

"""Git seeds: a repository at a commit, fetched once and checked out once per commit.

A seed whose ``seed.toml`` has a ``[source]`` table (``git``, ``commit``) takes
its files from that commit instead of its own folder. The agent keeps, in its
cache (``$XDG_CACHE_HOME/sandboxed-coding-agent/git``):

* ``repos/<hash of the location>.git``: a bare repository that every fetch of
  that location goes into, outside any sandbox. A local path or a ``file://``
  URL needs no network; a network URL is fetched by ``git`` on this machine,
  never inside a sandbox.
* ``trees/<commit>``: the tree at that commit, checked out once and made
  read-only, which every later sandbox of any seed at that commit binds
  read-only instead of receiving copies of its files.

A second run of a seed therefore costs one ``git cat-file`` and one
``git ls-tree``, whatever the repository's size. The repository is hostile
input: ``git`` runs with the repository's hooks, fsmonitor and the ``ext::``
transport off, only a fetch reads the caller's own git configuration (its
credentials and proxies; a filter it names, such as git-lfs's, never runs on a
checkout), and a checkout writes each file exactly as the commit holds it,
whatever the repository's ``.gitattributes`` say. The tree is refused when it
holds a symbolic link leading out of it (followed through the tree's other
links, as the kernel would), a path git would never check out (a ``.``,
``..`` or ``.git`` part, a path under a file), a path that is not UTF-8 or
holds a control character, or more than :data:`MAX_TREE_FILES` entries,
:data:`MAX_TREE_BYTES` bytes or :data:`MAX_TREE_DEPTH` folders of depth; a
listing past the ceiling is stopped, not read to its end. Submodules are left
out (their folder is empty), as ``git`` itself leaves them until told otherwise.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from .errors import UsageError

CACHE_FOLDER = Path("sandboxed-coding-agent", "git")
#: Ceilings of a git seed's tree (a folder seed's are in :mod:`.manifest`).
MAX_TREE_FILES = 100_000
MAX_TREE_BYTES = 2 * 1024 * 1024 * 1024
MAX_TREE_DEPTH = 64
MAX_PATH_BYTES = 1024
#: Largest file read from the repository without a checkout (``pyproject.toml``).
MAX_SHOWN_BYTES = 1024 * 1024
#: How long one ``git`` command may take (a first fetch of a large repository is the longest).
GIT_TIMEOUT_SECONDS = 1800
#: Most links followed to resolve one symbolic link of a tree (the kernel's own limit).
MAX_LINK_HOPS = 40
#: What a checkout writes each file with: the commit's bytes, whatever the tree's
#: ``.gitattributes`` say (``$GIT_DIR/info/attributes`` comes before them).
CHECKOUT_ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding\n"

_FULL_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_URL = re.compile(r"([a-z][a-z0-9+.-]*)://", re.IGNORECASE)
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_SCHEMES = frozenset({"file", "https", "http", "ssh", "git"})
_SYMLINK = "120000"
_GITLINK = "160000"
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


@attrs.frozen
class SourceTree:
    """A repository at a commit: where a git seed's files come from.

    Plain data, so a runner on another machine can fetch the same tree.

    :ivar repository: where the repository is: an absolute path or a URL
        (``file://``, ``https://``, ``ssh://``, ``git://``).
    :ivar commit: the full commit ID (40 or 64 lowercase hex digits).
    """

    repository: str
    commit: str = attrs.field(validator=attrs.validators.matches_re(_FULL_COMMIT))


@attrs.frozen
class TreeFile:
    """A file of a commit's tree, as ``git ls-tree`` lists it."""

    path: str
    size: int
    link: bool = False


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where fetched repositories and checked-out trees are kept (XDG base directory rules)."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / CACHE_FOLDER


def location_problem(repository: str) -> str | None:
    """Why ``repository`` cannot be fetched from, or ``None``."""
    if not repository or repository.startswith("-") or "\0" in repository:
        return "must be a path or a URL"
    if any(ord(c) < 32 or ord(c) == 127 for c in repository):
        return "contains a control character"
    scheme = _URL.match(repository)
    if scheme:
        if scheme.group(1).lower() not in _SCHEMES:
            known = ", ".join(f"{s}://" for s in sorted(_SCHEMES))
            return f"{scheme.group(1)}:// is not a transport the agent uses (known: {known})"
        return None
    if "::" in repository:
        return "a git remote helper (TRANSPORT::ADDRESS) is not a transport the agent uses"
    if not os.path.isabs(repository):
        return "must be an absolute path or a URL"
    return None


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


def _records(
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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def repository_folder(repository: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The cache's bare repository for ``repository``."""
    name = hashlib.sha256(repository.encode()).hexdigest()[:24]
    return cache_root(environ) / "repos" / f"{name}.git"


def _has_commit(folder: Path, commit: str) -> bool:
    found = git(["cat-file", "-e", f"{commit}^{{commit}}"], git_dir=folder, check=False)
    return found.returncode == 0


def fetch(repository: str, commit: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The cache's bare repository of ``repository``, holding ``commit``; fetched if it is not.

    ``commit`` may be any name while it is being checked (:func:`resolve`); only a full
    commit ID skips the fetch when it is already there.
    """
    problem = location_problem(repository)
    if problem:
        raise GitSourceError(f"git = {repository!r}: {problem}")
    if not _URL.match(repository) and not Path(repository).exists():
        raise GitSourceError(f"git = {repository!r}: no such repository")
    folder = repository_folder(repository, environ)
    with _locked(folder.with_name(folder.name + ".lock")):
        if not (folder / "HEAD").exists():
            git(["init", "--quiet", "--bare", "--", str(folder)])
        if _FULL_COMMIT.fullmatch(commit) and _has_commit(folder, commit):
            return folder
        git(
            [
                "fetch", "--quiet", "--no-tags", "--force", "--", repository,
                "+refs/heads/*:refs/sources/heads/*", "+refs/tags/*:refs/sources/tags/*",
            ],
            git_dir=folder,
            callers_config=True,
        )  # fmt: skip
        if _FULL_COMMIT.fullmatch(commit) and not _has_commit(folder, commit):
            # Not on a branch or tag: a server may still give it when asked by its ID.
            git(
                ["fetch", "--quiet", "--no-tags", "--", repository, commit],
                git_dir=folder,
                check=False,
                callers_config=True,
            )
    return folder


def resolve(repository: str, commit: str, environ: Mapping[str, str] = os.environ) -> SourceTree:
    """The tree of ``repository`` at ``commit``, fetched into the cache if needed.

    :raises GitSourceError: the repository cannot be fetched, ``commit`` is a branch or
        a tag (the error names the commit it points to now), or it is not there.
    """
    if not isinstance(commit, str) or not commit or commit.startswith("-") or "\0" in commit:
        raise GitSourceError("commit must be a full commit ID (40 hex digits)")
    folder = fetch(repository, commit, environ)
    if _FULL_COMMIT.fullmatch(commit):
        if not _has_commit(folder, commit):
            raise GitSourceError(f"commit {commit} is not in {repository}")
        return SourceTree(repository, commit)
    named = commit.removeprefix("refs/")
    for candidate in (f"refs/sources/heads/{named}", f"refs/sources/tags/{named}", commit):
        found = git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{candidate}^{{commit}}"],
            git_dir=folder,
            check=False,
        )
        if found.returncode == 0:
            full = found.stdout.decode().strip()
            raise GitSourceError(
                f"commit = {commit!r} is a branch, a tag or a short ID, which can move or "
                f"become ambiguous; name the full commit: commit = {full!r}"
            )
    raise GitSourceError(
        f"commit = {commit!r} is not in {repository} (a seed names a full commit ID)"
    )


def _path_problem(path: str) -> str | None:
    if len(path.encode()) > MAX_PATH_BYTES:
        return f"a path is longer than {MAX_PATH_BYTES} bytes"
    if _CONTROL.search(path):
        return f"{path!r}: the path contains a control character"
    if path.count("/") >= MAX_TREE_DEPTH:
        return f"{path!r}: deeper than {MAX_TREE_DEPTH} folders"
    # Only a path with a part that is empty or starts with '.' needs a closer look.
    if ("/." in f"/{path}" or "//" in f"/{path}/") and any(
        part in ("", ".", "..") or part.lower() == ".git" for part in path.split("/")
    ):
        # git refuses to check these out; saying so now names the path.
        return f"{path!r}: a path with a '.', '..' or '.git' part, which git never checks out"
    return None


def _link_target(path: str, target: bytes) -> tuple[str | None, str | None]:
    """The link's target as text, or why it cannot be one (not UTF-8, absolute)."""
    try:
        text = target.decode("utf-8")
    except UnicodeDecodeError:
        return None, f"{path}: a symbolic link whose target is not UTF-8"
    if text.startswith("/") or "\0" in text or not text:
        return None, f"{path}: a symbolic link to {text!r}, outside the tree"
    return text, None


def _link_problem(path: str, links: Mapping[str, str]) -> str | None:
    """Why the link at ``path`` leads out of the tree, or ``None``.

    Followed as the kernel follows it, through the tree's other links: by its text
    alone, ``a/b/s/../..`` stays inside, but not when ``a/b/s`` is a link to ``../..``.
    Where the tree is bound into the sandbox, out of it is the host's root while the
    sandbox is being set up.
    """
    shown = f"{path}: a symbolic link to {links[path]!r}"
    folder = path.split("/")[:-1]
    pending = list(reversed(links[path].split("/")))
    hops = 1
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not folder:
                return f"{shown}, outside the tree"
            folder.pop()
            continue
        here = "/".join((*folder, part))
        if here in links:
            hops += 1
            if hops > MAX_LINK_HOPS:
                return f"{shown}, which leads to itself (a loop of links)"
            pending.extend(reversed(links[here].split("/")))
        else:
            folder.append(part)
    if folder and folder[0] == ".git":
        return f"{shown}, outside the tree"
    return None


def list_tree(source: SourceTree, environ: Mapping[str, str] = os.environ) -> list[TreeFile]:
    """Every file of the commit's tree, checked against the ceilings and the link rule.

    :raises GitSourceError: the tree breaks a ceiling, holds a path that is not UTF-8,
        has a control character or that git would not check out, or a symbolic link
        that leads out of it.
    """
    folder = fetch(source.repository, source.commit, environ)
    arguments = ["ls-tree", "-r", "-z", "--long", "--full-tree", source.commit]
    # Closed on the way out, whatever the way: git is stopped, not left blocked on its pipe.
    with contextlib.closing(
        _records(arguments, folder, limit=MAX_TREE_FILES + 1, longest=MAX_PATH_BYTES + 256)
    ) as listing:
        found, links = _entries(source.commit, listing)
    total = sum(entry.size for entry in found)
    if total > MAX_TREE_BYTES:
        raise GitSourceError(
            f"{source.commit}: {total} bytes of files; a git seed has at most {MAX_TREE_BYTES}"
        )
    problem = _under_a_file(found)
    if problem:
        raise GitSourceError(f"{source.commit}: {problem}")
    if links:
        contents = _blobs(folder, [oid for _, oid in links])
        texts: dict[str, str] = {}
        for path, oid in links:
            if oid not in contents:
                raise GitSourceError(
                    f"{source.commit}: {path}: a link whose target is not in the repository"
                )
            text, problem = _link_target(path, contents[oid])
            if problem or text is None:
                raise GitSourceError(f"{source.commit}: {problem}")
            texts[path] = text
        for path in texts:
            problem = _link_problem(path, texts)
            if problem:
                raise GitSourceError(f"{source.commit}: {problem}")
    return found


def _blobs(folder: Path, object_ids: Sequence[str]) -> dict[str, bytes]:
    """The blobs of ``object_ids`` (each asked for once) that the repository has."""
    unique = list(dict.fromkeys(object_ids))
    answer = git(
        ["cat-file", "--batch", "--buffer"],
        git_dir=folder,
        data="".join(f"{oid}\n" for oid in unique).encode(),
    ).stdout
    found: dict[str, bytes] = {}
    start = 0
    for oid in unique:
        # Read by offset: slicing off each answer would copy the rest, 100,000 times.
        end = answer.find(b"\n", start)
        fields = answer[start:end].split()
        if end < 0:
            break
        start = end + 1
        if len(fields) == 3:  # else "<oid> missing", with nothing after
            length = int(fields[2])
            if fields[1] == b"blob":
                found[oid] = answer[start : start + length]
            start += length + 1
    return found


def _entries(commit: str, listing: Iterator[bytes]) -> tuple[list[TreeFile], list[tuple[str, str]]]:
    """The files of ``git ls-tree -r -z --long`` records, and the links' object IDs."""
    found: list[TreeFile] = []
    links: list[tuple[str, str]] = []
    for count, record in enumerate(listing):
        if count >= MAX_TREE_FILES:
            raise GitSourceError(
                f"{commit}: more than {MAX_TREE_FILES} files; a git seed has at most that"
            )
        head, _, raw_path = record.partition(b"\t")
        mode, kind, object_id, size = head.split()
        if mode == _GITLINK.encode() or kind != b"blob":
            continue
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            name = raw_path.decode("utf-8", "backslashreplace")
            raise GitSourceError(f"{commit}: {name}: the path is not valid UTF-8") from None
        problem = _path_problem(path)
        if problem:
            raise GitSourceError(f"{commit}: {problem}")
        link = mode == _SYMLINK.encode()
        if link and int(size) > MAX_PATH_BYTES:
            raise GitSourceError(
                f"{commit}: {path}: a symbolic link to a path longer than {MAX_PATH_BYTES} bytes"
            )
        if link:
            links.append((path, object_id.decode()))
        found.append(TreeFile(path, int(size), link))
    return found, links


def _under_a_file(files: Sequence[TreeFile]) -> str | None:
    """Why a path of the tree is under another path that is a file or a link, or ``None``."""
    kinds = {entry.path: "a symbolic link" if entry.link else "a file" for entry in files}
    for entry in files:
        parts = entry.path.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            if above in kinds:
                return f"{entry.path!r}: under {above!r}, {kinds[above]}"
    return None


def tree_folder(source: SourceTree, environ: Mapping[str, str] = os.environ) -> Path:
    """Where the tree at ``source.commit`` is checked out, read-only (made once, then reused)."""
    return cache_root(environ) / "trees" / source.commit


def materialize(source: SourceTree, environ: Mapping[str, str] = os.environ) -> Path:
    """The commit's tree checked out in the cache, made read-only; checked out only once.

    The tree is checked (:func:`list_tree`) before it is written, and written to a
    temporary folder renamed into place when complete, so a folder in place is whole.
    """
    final = tree_folder(source, environ)
    if final.is_dir():
        return final
    with _locked(final.with_name(final.name + ".lock")):
        if final.is_dir():
            return final
        list_tree(source, environ)
        folder = fetch(source.repository, source.commit, environ)
        # Under the lock, any partial checkout of this commit is one a killed agent left.
        for stale in final.parent.glob(f".partial-{source.commit}-*"):
            _make_writable(stale)
            shutil.rmtree(stale, ignore_errors=True)
        partial = final.with_name(f".partial-{source.commit}-{os.getpid()}")
        index = final.with_name(f".index-{source.commit}-{os.getpid()}")
        partial.mkdir(parents=True)
        (folder / "info").mkdir(exist_ok=True)
        (folder / "info" / "attributes").write_text(CHECKOUT_ATTRIBUTES)
        try:
            git(["read-tree", source.commit], git_dir=folder, index=index)
            git(
                ["checkout-index", "--all", "--force"],
                git_dir=folder,
                work_tree=partial,
                index=index,
            )
            _read_only(partial)
            partial.rename(final)
        except BaseException:
            _make_writable(partial)
            shutil.rmtree(partial, ignore_errors=True)
            raise
        finally:
            index.unlink(missing_ok=True)
    return final


def _read_only(root: Path) -> None:
    """Files 0444 (0555 when executable), folders 0555: readable by the sandbox's user,
    writable by nobody but root."""
    folders: list[str] = []
    for folder, _, files in os.walk(root):
        folders.append(folder)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                executable = os.lstat(path).st_mode & 0o100
                os.chmod(path, 0o555 if executable else 0o444)
    for folder in reversed(folders):
        os.chmod(folder, 0o555)  # noqa: S103 - read-only, for the sandbox's user


def _make_writable(root: Path) -> None:
    """Let a partial checkout be removed."""
    for folder, _, _ in os.walk(root):
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o700)


def show(source: SourceTree, path: str, environ: Mapping[str, str] = os.environ) -> bytes | None:
    """One file of the commit's tree as git stores it, without a checkout; ``None`` if absent."""
    folder = fetch(source.repository, source.commit, environ)
    found = git(["cat-file", "-s", f"{source.commit}:{path}"], git_dir=folder, check=False)
    if found.returncode != 0:
        return None
    if int(found.stdout) > MAX_SHOWN_BYTES:
        raise GitSourceError(f"{path}: larger than {MAX_SHOWN_BYTES} bytes")
    return git(["cat-file", "blob", f"{source.commit}:{path}"], git_dir=folder).stdout


def read_files(
    source: SourceTree, paths: Sequence[str], environ: Mapping[str, str] = os.environ
) -> dict[str, bytes]:
    """Some files of the tree, from the checked-out copy, never following a link."""
    from . import seed_files

    root = materialize(source, environ)
    return seed_files.read_seed_files(root, tuple(paths), untrusted=False)

"""SWE-bench task instances as git seeds: one folder per instance, checked by loading it.

Each seed names the task's local clone and base commit (``[source]``), and holds
the test files as the task's ``test_patch`` leaves them, which replace the
tree's files of the same paths. The reference fix (``patch``) is never written
into a seed: with ``--editable oracle`` only the *names* of the files it changes
are used, as the editable files, and the seed's description says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .. import manifest
from ..errors import UsageError
from ..git_source import git
from ..model import ALWAYS_TEST_PATHS, LIMIT_CEILINGS
from ..patterns import matches_any
from . import patches
from .patches import Patched, PatchProblem
from .tasks import BadLine, TaskInstance

#: ``--editable oracle``: the files the reference fix changes (SWE-bench's "oracle" setting).
ORACLE = "oracle"
#: The test frameworks a seed's test command can run the test files with.
FRAMEWORKS = ("pytest", "unittest")
#: A seed folder's note of the instance it was made from (a hidden file: never a seed file).
INSTANCE_FILE = ".swebench.json"
#: The batch tasks file ``agent swebench import`` writes beside the seed folders.
BATCH_FILE = "batch.jsonl"
#: The most bytes of the problem statement a seed's prompt holds; the rest is cut.
MAX_PROMPT_BYTES = 64 * 1024
#: The most files one key of a seed may list (:data:`~..manifest.MAX_PATTERNS`).
MAX_LISTED = manifest.MAX_PATTERNS
#: The limits of a seed made from a task: a real project's files and test suite are far
#: larger than a toy seed's, so the plan's bounds are the ceilings and the test has time.
SEED_LIMITS: Mapping[str, int] = {
    "max_files": LIMIT_CEILINGS["max_files"],
    "max_total_bytes": LIMIT_CEILINGS["max_total_bytes"],
    "max_path_chars": LIMIT_CEILINGS["max_path_chars"],
    "test_timeout_seconds": 1800,
    "cpu_seconds": 1800,
    "memory_mb": 2048,
    "max_processes": 512,
    "disk_mb": 1024,
    "max_output_bytes": 64 * 1024,
}

_NAME_CHARS = re.compile(r"[^a-z0-9._-]+")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@attrs.frozen
class ImportOptions:
    """How ``agent swebench import`` makes a seed of each task.

    :ivar editable: patterns of the files a plan may replace; empty: :data:`ORACLE`.
    :ivar hidden_tests: the test files are hidden tests, which the planner never sees.
    :ivar framework: one of :data:`FRAMEWORKS`: what the test command runs.
    :ivar requirements: packages of the seed's runtime; ``None``: ``pytest`` for pytest,
        none for unittest.
    :ivar project: install the project's own dependencies (``[runtime] project``);
        ``None``: when its ``pyproject.toml`` has a ``[project]`` table.
    :ivar python: the runtime's Python version; ``None``: the agent's own.
    """

    editable: tuple[str, ...] = ()
    hidden_tests: bool = True
    framework: str = attrs.field(default="pytest", validator=attrs.validators.in_(FRAMEWORKS))
    requirements: tuple[str, ...] | None = None
    project: bool | None = None
    python: str | None = None

    @property
    def oracle(self) -> bool:
        return not self.editable


@attrs.frozen
class SeedSpec:
    """Everything one seed folder holds.

    :ivar files: the files written into the folder (test files, placeholders), by path.
    """

    name: str
    description: str
    repository: str
    commit: str
    files: Mapping[str, bytes]
    tests: tuple[str, ...]
    hidden_tests: tuple[str, ...]
    editable: tuple[str, ...]
    test_command: tuple[str, ...]
    prompt: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    runtime: Mapping[str, Any] | None
    limits: Mapping[str, int]
    instance: InstanceNote


@attrs.frozen
class ImportedSeed:
    """A seed written for one task instance.

    :ivar instance_id: the instance.
    :ivar name: the seed's name, which is also its folder's.
    :ivar folder: the seed's folder.
    :ivar editable: the files (or patterns) a plan may replace.
    :ivar oracle: the editable files are those the reference fix changes.
    :ivar tests: the test files the seed adds.
    :ivar hidden: the test files are hidden tests.
    :ivar notes: what was left out, for the user.
    """

    instance_id: str
    name: str
    folder: Path
    editable: tuple[str, ...]
    oracle: bool
    tests: tuple[str, ...]
    hidden: bool
    notes: tuple[str, ...] = ()


def seed_name(instance_id: str) -> str:
    """The seed (and folder) name of ``instance_id``: the ID itself when it is a seed name,
    else it lowercased, other characters as ``-``, cut, and a hash of the ID appended so
    two IDs never share a name."""
    if _NAME.fullmatch(instance_id):
        return instance_id
    mapped = _NAME_CHARS.sub("-", instance_id.lower()).lstrip("._-")
    digest = hashlib.sha256(instance_id.encode("utf-8")).hexdigest()[:10]
    return f"{mapped[:53].rstrip('._-') or 'task'}-{digest}"


def batch_task_id(instance_id: str, name: str) -> str:
    """The ID of the instance's line in a batch tasks file: the instance ID when a task ID
    may be it (every SWE-bench ID may), else the seed's name."""
    return instance_id if _TASK_ID.fullmatch(instance_id) else name


@attrs.frozen
class TestFiles:
    """A task's test files as its ``test_patch`` leaves them.

    :ivar files: the files it adds or changes, by path.
    :ivar runnable: those the test command runs (Python files).
    :ivar notes: what was left out, and why.
    """

    __test__ = False

    files: Mapping[str, bytes]
    runnable: tuple[str, ...]
    notes: tuple[str, ...] = ()


def test_files(task: TaskInstance, patched: Patched) -> TestFiles:
    """The files ``test_patch`` (applied as ``patched``) adds or changes.

    :raises BadLine: it changes no Python file, or more than a seed can list.
    """
    files: dict[str, bytes] = {}
    notes: list[str] = []
    for change in patched.changes:
        if change.status == "D":
            notes.append(f"{change.path}: test_patch deletes it; the tree's copy stays")
            continue
        problem = patches.path_problem(change.path, in_folder=True)
        if problem is None and not change.regular:
            problem = "not a regular file after test_patch"
        if problem is not None:
            notes.append(f"{change.path}: left out ({problem})")
            continue
        try:
            files[change.path] = patched.read(change.path)
        except PatchProblem as error:
            raise BadLine(task.line, error.message, "test_patch") from None
    runnable = tuple(path for path in sorted(files) if path.endswith(".py"))
    if not runnable:
        raise BadLine(task.line, "adds or changes no Python test file to run", "test_patch")
    if len(files) > MAX_LISTED:
        raise BadLine(
            task.line,
            f"changes {len(files)} files; a seed lists at most {MAX_LISTED}",
            "test_patch",
        )
    return TestFiles(files, runnable, tuple(notes))


def test_command(framework: str, runnable: Sequence[str]) -> tuple[str, ...]:
    """The command that runs the test files ``runnable`` with ``framework``."""
    if framework == "unittest":
        modules = [path.removesuffix(".py").replace("/", ".") for path in runnable]
        return ("python", "-m", "unittest", *modules)
    return ("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *runnable)


def has_project_table(folder: Path, commit: str) -> bool:
    """Whether the commit's ``pyproject.toml`` has a ``[project]`` table."""
    found = git(["cat-file", "-s", f"{commit}:pyproject.toml"], git_dir=folder, check=False)
    if found.returncode != 0 or int(found.stdout) > patches.MAX_FILE_BYTES:
        return False
    text = git(["cat-file", "blob", f"{commit}:pyproject.toml"], git_dir=folder).stdout
    try:
        return isinstance(tomllib.loads(text.decode("utf-8")).get("project"), dict)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError):
        return False


def runtime_of(options: ImportOptions, folder: Path, commit: str) -> dict[str, Any] | None:
    """The seed's ``[runtime]`` table, or ``None`` when it needs none."""
    requirements = options.requirements
    if requirements is None:
        requirements = ("pytest",) if options.framework == "pytest" else ()
    project = options.project
    if project is None:
        project = has_project_table(folder, commit)
    table: dict[str, Any] = {}
    if options.python is not None:
        table["python"] = options.python
    if requirements:
        table["requirements"] = list(requirements)
    if project:
        table["project"] = True
    return table or None


def prompt_of(problem_statement: str) -> str:
    """The problem statement as a seed's prompt: at most :data:`MAX_PROMPT_BYTES` bytes."""
    data = problem_statement.encode("utf-8")
    if len(data) <= MAX_PROMPT_BYTES:
        return problem_statement
    kept = data[:MAX_PROMPT_BYTES].decode("utf-8", "ignore")
    return (
        kept
        + f"\n\n[the problem statement is cut here: it is longer than {MAX_PROMPT_BYTES} bytes]"
    )


def oracle_files(
    task: TaskInstance, folder: Path, tests: Mapping[str, bytes]
) -> tuple[tuple[str, ...], dict[str, bytes], tuple[str, ...]]:
    """The files the reference fix changes that a plan may replace, the empty files the
    seed adds for those it creates, and notes on those left out.

    :raises BadLine: the task has no reference fix, it does not apply, or it changes no
        file a plan may replace.
    """
    if task.patch is None or not task.patch.strip():
        raise BadLine(task.line, "--editable oracle needs the reference fix", "patch")
    try:
        fixed = patches.apply(folder, task.base_commit, task.patch, what="the reference fix")
    except PatchProblem as error:
        raise BadLine(task.line, error.message, "patch") from None
    editable: list[str] = []
    placeholders: dict[str, bytes] = {}
    notes: list[str] = []
    for change in fixed.changes:
        if change.path in tests or matches_any(change.path, ALWAYS_TEST_PATHS):
            notes.append(f"{change.path}: the fix changes it, but it is a test file")
            continue
        if change.status == "D" or not change.regular:
            notes.append(f"{change.path}: the fix deletes it or makes it a link; a plan cannot")
            continue
        problem = patches.path_problem(change.path, in_folder=change.status == "A")
        if problem is not None:
            notes.append(f"{change.path}: left out ({problem})")
            continue
        if change.status == "A":
            placeholders[change.path] = b""  # a plan replaces existing files only
        editable.append(change.path)
    if not editable:
        raise BadLine(task.line, "the reference fix changes no file a plan may replace", "patch")
    if len(editable) > MAX_LISTED:
        raise BadLine(
            task.line,
            f"the reference fix changes {len(editable)} files; a seed lists at most {MAX_LISTED}",
            "patch",
        )
    return tuple(editable), placeholders, tuple(notes)


def import_task(
    task: TaskInstance,
    repos: Path,
    out: Path,
    options: ImportOptions,
    environ: Mapping[str, str] = os.environ,
) -> ImportedSeed:
    """Write the seed of ``task`` into ``out/<seed name>``, replacing an earlier import of it.

    :raises BadLine: the task cannot be a seed (its clone, commit or patches), naming the field.
    """
    name = seed_name(task.instance_id)
    try:
        clone = patches.clone_for(repos, task.repo)
    except PatchProblem as error:
        raise BadLine(task.line, error.message, "repo") from None
    try:
        folder = patches.repository(clone, task.base_commit, environ)
    except PatchProblem as error:
        raise BadLine(task.line, error.message, "base_commit") from None
    try:
        tested = patches.apply(folder, task.base_commit, task.test_patch, what="test_patch")
    except PatchProblem as error:
        raise BadLine(task.line, error.message, "test_patch") from None
    tests = test_files(task, tested)
    notes = list(tests.notes)
    files = dict(tests.files)
    placeholders: dict[str, bytes] = {}
    if options.oracle:
        editable, placeholders, left_out = oracle_files(task, folder, tests.files)
        files.update(placeholders)
        notes.extend(left_out)
        how = f"{ORACLE}: the files the reference fix changes"
    else:
        editable = options.editable
        how = ", ".join(editable)
    listed = tuple(sorted(tests.files))
    spec = SeedSpec(
        name=name,
        description=f"SWE-bench {task.instance_id}: {task.repo} at {task.base_commit[:12]}; "
        f"editable: {how}",
        repository=str(clone),
        commit=task.base_commit,
        files=files,
        tests=listed,
        hidden_tests=listed if options.hidden_tests else (),
        editable=editable,
        test_command=test_command(options.framework, tests.runnable),
        prompt=prompt_of(task.problem_statement),
        fail_to_pass=task.fail_to_pass,
        pass_to_pass=task.pass_to_pass,
        runtime=runtime_of(options, folder, task.base_commit),
        limits=SEED_LIMITS,
        instance=instance_note(task, list(placeholders)),
    )
    written = write_seed(out, spec, line=task.line)
    return ImportedSeed(
        instance_id=task.instance_id,
        name=name,
        folder=written,
        editable=editable,
        oracle=options.oracle,
        tests=listed,
        hidden=options.hidden_tests,
        notes=tuple(notes),
    )


@attrs.frozen
class InstanceNote:
    """What a seed folder notes of its instance (:data:`INSTANCE_FILE`); never the fix.

    :ivar instance_id: the instance the seed was made from.
    :ivar repo: its repository, ``owner/name``.
    :ivar base_commit: its base commit.
    :ivar created_files: the files the seed adds empty for a plan to fill (the fix creates
        them): a patch creates them, rather than changing a file of the base commit.
    """

    instance_id: str
    repo: str = ""
    base_commit: str = ""
    created_files: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "created_files": list(self.created_files),
        }


def instance_note(task: TaskInstance, created: Sequence[str] = ()) -> InstanceNote:
    return InstanceNote(task.instance_id, task.repo, task.base_commit, tuple(sorted(created)))


def read_instance_note(folder: Path) -> InstanceNote | None:
    """The instance note of the seed folder ``folder``; ``None`` when it has none."""
    try:
        fd = os.open(folder / INSTANCE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = stream.read(64 * 1024 + 1)
    try:
        note = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(note, dict) or not isinstance(note.get("instance_id"), str):
        return None
    created = note.get("created_files")
    if not isinstance(created, list) or not all(isinstance(path, str) for path in created):
        created = []
    return InstanceNote(
        instance_id=note["instance_id"],
        repo=str(note.get("repo", "")),
        base_commit=str(note.get("base_commit", "")),
        created_files=tuple(created),
    )


def render_manifest(spec: SeedSpec) -> str:
    """The ``seed.toml`` of ``spec``."""
    lines = [
        "# Made by `agent swebench import` from a SWE-bench task instance; the reference",
        "# fix is not in this folder.",
        f"name = {_string(spec.name)}",
        f"description = {_string(spec.description)}",
        f"editable = {_strings(spec.editable)}",
        f"tests = {_strings(spec.tests)}",
    ]
    if spec.hidden_tests:
        lines.append(f"hidden_tests = {_strings(spec.hidden_tests)}")
    lines += [
        f"test_command = {_strings(spec.test_command)}",
        f"fail_to_pass = {_strings(spec.fail_to_pass)}",
        f"pass_to_pass = {_strings(spec.pass_to_pass)}",
        f"default_prompt = {_multiline(spec.prompt)}",
        "",
        "[source]",
        f"git = {_string(spec.repository)}",
        f"commit = {_string(spec.commit)}",
    ]
    if spec.runtime is not None:
        lines += ["", "[runtime]"]
        for key, value in spec.runtime.items():
            lines.append(f"{key} = {_value(value)}")
    lines += ["", "[limits]"]
    lines += [f"{key} = {_value(value)}" for key, value in spec.limits.items()]
    return "\n".join(lines) + "\n"


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return _strings(value)
    raise TypeError(f"no TOML for {type(value).__name__}")


def _escape(char: str, keep: str) -> str:
    if char in keep:
        return char
    if char == "\\":
        return "\\\\"
    if char == '"':
        return '\\"'
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"\\u{ord(char):04x}"
    return char


def _string(text: str) -> str:
    return '"' + "".join(_escape(char, "") for char in text) + '"'


def _strings(items: Sequence[str]) -> str:
    if not items:
        return "[]"
    return "[\n" + "".join(f"    {_string(item)},\n" for item in items) + "]"


def _multiline(text: str) -> str:
    # Kept readable: line breaks and tabs as they are; every quote escaped, so no run of
    # them can close the string early.
    return '"""\n' + "".join(_escape(char, "\n\t") for char in text) + '"""'


def write_seed(out: Path, spec: SeedSpec, *, line: int) -> Path:
    """Write ``spec`` into ``out/<name>``, load it as a seed to check it, and only then put
    it in place of an earlier import of the same instance.

    :raises BadLine: it does not load as a seed (the manifest's message), or something
        that is not a seed of this command's stands at its path.
    :raises UsageError: ``out`` cannot be written.
    """
    final = out / spec.name
    try:
        out.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".partial-{spec.name}-", dir=out))
    except OSError as error:
        raise UsageError(f"cannot write seeds into {str(out)!r}: {error.strerror}") from None
    try:
        for path, data in {**spec.files, manifest.MANIFEST: render_manifest(spec).encode()}.items():
            _write_new(partial, path, data)
        _write_new(partial, INSTANCE_FILE, json.dumps(spec.instance.as_json(), indent=2).encode())
        try:
            manifest.load_seed(partial)
        except UsageError as error:
            problem = error.message.replace(str(partial), str(final))
            raise BadLine(line, f"the seed would not load: {problem}") from None
        _replace(final, partial, line)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


def _write_new(root: Path, relative: str, data: bytes) -> None:
    target = root.joinpath(*relative.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(target, flags, 0o644)
    with open(fd, "wb") as stream:
        stream.write(data)


def _replace(final: Path, partial: Path, line: int) -> None:
    try:
        found = os.lstat(final)
    except FileNotFoundError:
        os.rename(partial, final)
        return
    if not stat.S_ISDIR(found.st_mode) or read_instance_note(final) is None:
        raise BadLine(
            line,
            f"{final} exists and is not a seed this command wrote; move it away, or import "
            "into another folder",
        )
    retired = final.with_name(f".retired-{final.name}-{os.getpid()}")
    os.rename(final, retired)
    os.rename(partial, final)
    with contextlib.suppress(OSError):
        shutil.rmtree(retired)


def write_batch_file(out: Path, seeds: Sequence[ImportedSeed]) -> Path:
    """Write ``out/batch.jsonl``: one ``agent batch`` task per seed (its folder, absolute)."""
    from ..records import write_private_file

    lines = [
        json.dumps({"id": batch_task_id(seed.instance_id, seed.name), "seed": str(seed.folder)})
        for seed in seeds
    ]
    path = out / BATCH_FILE
    try:
        write_private_file(path, "".join(line + "\n" for line in lines))
    except OSError as error:
        raise UsageError(f"cannot write {str(path)!r}: {error.strerror}") from None
    return path

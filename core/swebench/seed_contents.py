"""What the seed of a SWE-bench task holds: its test files and the command that runs them,
the files a plan may replace, its runtime, its prompt and its limits.

Each is chosen from the task instance, its clone at the base commit and the
options of ``agent swebench import`` (:class:`ImportOptions`); with ``--editable
oracle`` the editable files are the names of the files the reference fix
changes, never its content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..model import ALWAYS_TEST_PATHS, LIMIT_CEILINGS
from ..seeds import manifest
from ..seeds.git_source import git
from ..seeds.patterns import matches_any
from ..seeds.project_metadata import ProjectMetadataError, read_project
from . import patches
from .patches import Patched, PatchProblem
from .tasks import BadLine, TaskInstance

#: ``--editable oracle``: the files the reference fix changes (SWE-bench's "oracle" setting).
ORACLE = "oracle"
#: The test frameworks a seed's test command can run the test files with.
FRAMEWORKS = ("pytest", "unittest")
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


#: Stands, in a test command of the options' (a specs file's), for the task's test files.
TESTS_PLACEHOLDER = "{tests}"


@attrs.frozen
class ImportOptions:
    """How ``agent swebench import`` makes a seed of each task.

    :ivar editable: patterns of the files a plan may replace; empty: :data:`ORACLE`.
    :ivar hidden_tests: the test files are hidden tests, which the planner never sees.
    :ivar framework: one of :data:`FRAMEWORKS`: what the test command runs.
    :ivar requirements: packages of the seed's runtime; ``None``: ``pytest`` for pytest,
        none for unittest.
    :ivar project: install the project's own dependencies (``[runtime] project``);
        ``None``: when the project names itself (:func:`has_project_table`).
    :ivar python: the runtime's Python version; ``None``: the agent's own.
    :ivar guard_allow: the guard capabilities the seed allows (``[guard] allow``).
    :ivar test_command: the test command, ``"{tests}"`` standing for the test files;
        ``None``: the framework's (:func:`test_command`).
    """

    editable: tuple[str, ...] = ()
    hidden_tests: bool = True
    framework: str = attrs.field(default="pytest", validator=attrs.validators.in_(FRAMEWORKS))
    requirements: tuple[str, ...] | None = None
    project: bool | None = None
    python: str | None = None
    guard_allow: tuple[str, ...] = ()
    test_command: tuple[str, ...] | None = None

    @property
    def oracle(self) -> bool:
        return not self.editable


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


def command_of(options: ImportOptions, runnable: Sequence[str]) -> tuple[str, ...]:
    """The seed's test command: the options' own, with ``"{tests}"`` as the test files
    ``runnable``, or else the framework's."""
    if options.test_command is None:
        return test_command(options.framework, runnable)
    return tuple(
        item
        for argument in options.test_command
        for item in (runnable if argument == TESTS_PLACEHOLDER else (argument,))
    )


def test_command(framework: str, runnable: Sequence[str]) -> tuple[str, ...]:
    """The command that runs the test files ``runnable`` with ``framework``."""
    if framework == "unittest":
        modules = [path.removesuffix(".py").replace("/", ".") for path in runnable]
        return ("python", "-m", "unittest", *modules)
    return ("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *runnable)


def has_project_table(folder: Path, commit: str) -> bool:
    """Whether the commit's tree is a Python project that names itself: a ``[project]``
    table in ``pyproject.toml``, a ``[metadata] name`` in ``setup.cfg``, or a literal
    ``setup(name=...)`` in ``setup.py`` (:mod:`...project_metadata`, read, never run)."""

    def read(path: str) -> bytes | None:
        found = git(["cat-file", "-s", f"{commit}:{path}"], git_dir=folder, check=False)
        if found.returncode != 0 or int(found.stdout) > patches.MAX_FILE_BYTES:
            return None
        return git(["cat-file", "blob", f"{commit}:{path}"], git_dir=folder).stdout

    try:
        return bool(read_project(read).name)
    except ProjectMetadataError:
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


def fix_test_infrastructure(task: TaskInstance, folder: Path) -> tuple[str, ...]:
    """The files steering the test framework that the task's reference fix changes: a
    task whose fix is in the framework itself (pytest's own repository), whose seed
    lets plans change them (``[guard] allow = ["test-infrastructure"]``). Empty when the
    task has no reference fix or it does not apply (which a seed needing it reports).
    """
    if task.patch is None or not task.patch.strip():
        return ()
    try:
        fixed = patches.apply(folder, task.base_commit, task.patch, what="the reference fix")
        return tuple(path for path, _ in fixed.test_infrastructure())
    except PatchProblem:
        return ()


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

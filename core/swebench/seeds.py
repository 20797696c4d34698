"""SWE-bench task instances as git seeds: one folder per instance, checked by loading it.

Each seed names the task's local clone and base commit (``[source]``), and holds
the test files as the task's ``test_patch`` leaves them, which replace the
tree's files of the same paths. The reference fix (``patch``) is never written
into a seed: with ``--editable oracle`` only the *names* of the files it changes
are used, as the editable files, and the seed's description says so.

Making one (:func:`import_task`) is here; what a seed holds is chosen in
:mod:`.seed_contents` and the folder is written by :mod:`.seed_folders`, whose
names are importable from here too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from ..errors import UsageError
from ..seeds.patterns import matches_any
from ..seeds.project import ALWAYS_TEST_PATHS, TEST_INFRASTRUCTURE
from . import patches
from .patches import PatchProblem
from .seed_contents import (
    FRAMEWORKS,
    MAX_LISTED,
    MAX_PROMPT_BYTES,
    ORACLE,
    SEED_LIMITS,
    ImportOptions,
    TestFiles,
    command_of,
    fix_test_infrastructure,
    has_project_table,
    oracle_files,
    prompt_of,
    runtime_of,
    test_command,
    test_files,
)
from .seed_folders import (
    INSTANCE_FILE,
    InstanceNote,
    SeedSpec,
    instance_note,
    read_instance_note,
    render_manifest,
    write_seed,
)
from .tasks import BadLine, TaskInstance

__all__ = [
    "BATCH_FILE",
    "FRAMEWORKS",
    "INSTANCE_FILE",
    "MAX_LISTED",
    "MAX_PROMPT_BYTES",
    "ORACLE",
    "SEED_LIMITS",
    "ImportOptions",
    "ImportedSeed",
    "InstanceNote",
    "SeedSpec",
    "TestFiles",
    "batch_task_id",
    "command_of",
    "fix_test_infrastructure",
    "has_project_table",
    "import_task",
    "instance_note",
    "oracle_files",
    "prompt_of",
    "read_instance_note",
    "render_manifest",
    "runtime_of",
    "seed_name",
    "test_command",
    "test_files",
    "write_batch_file",
    "write_seed",
]

#: The batch tasks file ``agent swebench import`` writes beside the seed folders.
BATCH_FILE = "batch.jsonl"

_NAME_CHARS = re.compile(r"[^a-z0-9._-]+")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


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
    # Those a plan could replace: never a test file, which the seed keeps out of every plan.
    infrastructure = [
        path
        for path in fix_test_infrastructure(task, folder)
        if path not in tests.files and not matches_any(path, ALWAYS_TEST_PATHS)
    ]
    if infrastructure:
        notes.append(
            f"{infrastructure[0]}: the reference fix changes the test framework's own files, "
            f'so plans may too ([guard] allow = ["{TEST_INFRASTRUCTURE}"])'
        )
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
        test_command=command_of(options, tests.runnable),
        prompt=prompt_of(task.problem_statement),
        fail_to_pass=task.fail_to_pass,
        pass_to_pass=task.pass_to_pass,
        runtime=runtime_of(options, folder, task.base_commit),
        limits=SEED_LIMITS,
        instance=instance_note(task, list(placeholders)),
        guard_allow=_allowed(options, bool(infrastructure)),
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


def _allowed(options: ImportOptions, infrastructure: bool) -> tuple[str, ...]:
    """The seed's ``[guard] allow``: the options' (a specs file's), and the test framework's
    files when the reference fix changes them."""
    allowed = (*options.guard_allow, *((TEST_INFRASTRUCTURE,) if infrastructure else ()))
    return tuple(dict.fromkeys(allowed))


def write_batch_file(out: Path, seeds: Sequence[ImportedSeed]) -> Path:
    """Write ``out/batch.jsonl``: one ``agent batch`` task per seed (its folder, absolute)."""
    from ..records.planner_calls import write_private_file

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

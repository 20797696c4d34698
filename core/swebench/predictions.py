"""SWE-bench predictions from a batch's results: one line per instance, with the chosen patch.

A result line (:class:`~..batch.TaskResult`) is mapped back to its instance by
the note ``agent swebench import`` leaves in each seed folder
(:data:`~.seeds.INSTANCE_FILE`), or else by its task ID (``agent swebench
import`` makes the instance ID the task ID in the batch tasks file it writes).
The patch is the diff of the attempt the run's verdict rests on, with ``diff
--git`` headers added as git writes them; it applies with ``git apply`` to the
base commit.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path

import attrs

from ..batches.batch import TaskResult
from ..seeds.manifest import looks_like_path
from .seeds import InstanceNote, read_instance_note

_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@attrs.frozen
class PredictionOut:
    """One line of a predictions file, and where it came from.

    :ivar instance_id: the instance.
    :ivar model_name_or_path: the model's name, as given.
    :ivar model_patch: the patch; empty when the run made none, or it did not pass.
    :ivar task_id: the batch task it came from.
    :ivar status: that task's status.
    """

    instance_id: str
    model_name_or_path: str
    model_patch: str
    task_id: str
    status: str

    def line(self) -> dict[str, str]:
        return {
            "instance_id": self.instance_id,
            "model_name_or_path": self.model_name_or_path,
            "model_patch": self.model_patch,
        }


def note_of(result: TaskResult) -> InstanceNote | None:
    """The instance note of ``result``'s seed folder, if it names one that has a note."""
    if not looks_like_path(result.seed):
        return None
    return read_instance_note(Path(result.seed))


def instance_of(result: TaskResult) -> str:
    """The instance ``result`` is for: the seed folder's note, else the task's ID."""
    note = note_of(result)
    return note.instance_id if note is not None else result.id


def patch_of(result: TaskResult, *, include_failed: bool = False) -> str:
    """The patch of ``result``'s chosen attempt, as ``git apply`` takes it; empty when the
    run ended in an error, changed nothing, or did not pass (unless ``include_failed``)."""
    run = result.result
    if run is None or not run.diff:
        return ""
    if not run.tests_passed and not include_failed:
        return ""
    note = note_of(result)
    return with_git_headers(run.diff, created=note.created_files if note is not None else ())


def with_git_headers(diff: str, *, created: Collection[str] = ()) -> str:
    """``diff`` (unified, ``a/`` and ``b/`` prefixed) with a ``diff --git`` line before
    each file's ``---``/``+++`` pair, as git writes one; a diff that has them is kept.

    A file in ``created`` was an empty file the seed added (the base commit has none):
    its diff creates it (``new file mode``, from ``/dev/null``).

    Hunks are read by their line counts, so a changed line that looks like a file
    header (a removed ``-- a/x``) is never taken for one.
    """
    if not diff or diff.startswith("diff --git "):
        return diff
    lines = diff.splitlines(keepends=True)
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        hunk = _HUNK.match(line)
        if hunk is not None:
            old = 1 if hunk.group(1) is None else int(hunk.group(1))
            new = 1 if hunk.group(2) is None else int(hunk.group(2))
            out.append(line)
            index += 1
            while index < len(lines) and (old > 0 or new > 0 or lines[index].startswith("\\")):
                body = lines[index]
                if body.startswith("-"):
                    old -= 1
                elif body.startswith("+"):
                    new -= 1
                elif not body.startswith("\\"):
                    old, new = old - 1, new - 1
                out.append(body)
                index += 1
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.startswith("--- a/") and following.startswith("+++ b/"):
            before = line[len("--- a/") :].rstrip("\n")
            after = following[len("+++ b/") :].rstrip("\n")
            out.append(f"diff --git a/{before} b/{after}\n")
            if before == after and before in created:
                out.append("new file mode 100644\n")
                line = "--- /dev/null\n"
        out.append(line)
        index += 1
    return "".join(out)


def predictions(
    results: Sequence[TaskResult], model_name: str, *, include_failed: bool = False
) -> tuple[list[PredictionOut], list[str]]:
    """One prediction per instance of ``results``, and what was left out (a second result
    for an instance already predicted), for the user."""
    found: list[PredictionOut] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for result in results:
        instance_id = instance_of(result)
        if instance_id in seen:
            problems.append(
                f"task {result.id} (line {result.line}) is for {instance_id!r}, which task "
                f"{seen[instance_id]} was for already; it was left out"
            )
            continue
        seen[instance_id] = result.id
        found.append(
            PredictionOut(
                instance_id=instance_id,
                model_name_or_path=model_name,
                model_patch=patch_of(result, include_failed=include_failed),
                task_id=result.id,
                status=result.status,
            )
        )
    return found, problems

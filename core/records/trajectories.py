"""Trajectories: the steps of a planner that explores, kept as it makes them.

A planner that works in a session (``agent run --planner explore``) keeps one line
per step in ``<planner-task-id>.jsonl`` under
``$XDG_STATE_HOME/sandboxed-coding-agent/trajectories``, appended as each step ends,
so a run that is killed keeps the steps it made. ``agent logs PLANNER_TASK_ID``
shows them after the call's record (and ``--json`` gives them as ``steps``).

A run that explores also notes, in ``<run-id>.tasks`` beside them, each planner call
as its first step is kept (one JSON line, ``{"run_id": ..., "planner_task_id": ...}``):
so ``agent logs RUN_ID`` finds the steps of a run that was killed before its record
was written, and ``agent runs prune`` deletes the trajectories of the runs it prunes.

A step holds what the model said, the command it ran, the output as the model saw
it (bounded), the exit code, the seconds and the tokens; never the API key (blanked
before each line is written), never a hidden test (the session holds none).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from .. import provider
from ..model import MAX_STEP_TEXT_CHARS as MAX_STEP_TEXT_CHARS
from ..model import TrajectoryStep
from ..serialization import structure, to_json
from .planner_calls import check_task_id, read_kept_file, state_directory
from .run_record_files import is_run_id

#: The largest trajectory ``agent logs`` reads.
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
#: How a run's note of its planner calls is named: the run ID, then this.
RUN_INDEX_SUFFIX = ".tasks"


def trajectories_directory(environ: Mapping[str, str] = os.environ) -> Path:
    return state_directory(environ) / "trajectories"


def trajectory_path(task_id: str, environ: Mapping[str, str] = os.environ) -> Path:
    return trajectories_directory(environ) / f"{check_task_id(task_id)}.jsonl"


def run_index_path(run_id: str, environ: Mapping[str, str] = os.environ) -> Path:
    """Where run ``run_id`` notes its planner calls that kept steps."""
    if not is_run_id(run_id):
        raise ValueError(f"{run_id!r} is not a run ID")
    return trajectories_directory(environ) / f"{run_id}{RUN_INDEX_SUFFIX}"


def append_step(
    task_id: str, step: TrajectoryStep, environ: Mapping[str, str] = os.environ
) -> None:
    """Add ``step`` to the trajectory of ``task_id`` (readable by its owner only), with
    the API key blanked, as one line written at once.

    :raises OSError: the folder cannot be written, or the file is a link.
    """
    line = provider.blank_key(to_json(step), environ.get(provider.API_KEY_ENV, ""))
    _append(trajectory_path(task_id, environ), line)


def note_call(run_id: str, task_id: str, environ: Mapping[str, str] = os.environ) -> None:
    """Note that planner call ``task_id`` of run ``run_id`` keeps steps.

    :raises OSError: as :func:`append_step`.
    """
    line = json.dumps({"run_id": run_id, "planner_task_id": check_task_id(task_id)})
    _append(run_index_path(run_id, environ), line)


def _append(path: Path, line: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    handle = os.open(path, flags, 0o600)
    try:
        os.write(handle, (line + "\n").encode("utf-8", "surrogatepass"))
    finally:
        os.close(handle)


def noted_calls(run_id: str, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The planner task IDs run ``run_id`` noted, in order, each once; none when it noted
    none or its note cannot be read (a hostile file: a line that is not one of the
    run's is skipped)."""
    path = run_index_path(run_id, environ)
    if not os.path.lexists(path):
        return []
    try:
        data = read_kept_file(path, limit=MAX_TRAJECTORY_BYTES)
    except ValueError:  # UnreadableRecord
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    found = [_noted_call(line, run_id) for line in lines]
    return list(dict.fromkeys(task_id for task_id in found if task_id is not None))


def _noted_call(line: str, run_id: str) -> str | None:
    try:
        noted = json.loads(line)
        if noted["run_id"] == run_id:
            return check_task_id(noted["planner_task_id"])
    except Exception:  # json, a missing key, a task ID that is none
        return None
    return None


def read_steps(
    task_id: str, environ: Mapping[str, str] = os.environ
) -> tuple[list[TrajectoryStep], str | None]:
    """The steps kept for ``task_id`` (none when it kept none), and what could not be read
    of them, in words (``None`` when all could).

    The file is hostile data: a damaged line is skipped and said, never raised.
    """
    path = trajectory_path(task_id, environ)
    if not os.path.lexists(path):
        return [], None
    try:
        data = read_kept_file(path, limit=MAX_TRAJECTORY_BYTES)
    except ValueError as unreadable:  # UnreadableRecord
        return [], f"the trajectory {str(path)!r} is {unreadable}"
    steps: list[TrajectoryStep] = []
    damaged = 0
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            steps.append(structure(json.loads(line), TrajectoryStep))
        except Exception:  # json or cattrs: a torn or hand-made line
            damaged += 1
    problem = f"{damaged} damaged line(s) of {str(path)!r} skipped" if damaged else None
    return steps, problem


def render_steps(steps: list[TrajectoryStep], problem: str | None = None) -> str:
    """The steps for a person: one heading per step, then what the model said, the
    command, and what it was told back, indented. Text from the model and the commands
    is shown with its control characters escaped, as it is hostile."""
    lines = [f"steps ({len(steps)}):"]
    for step in steps:
        head = f"  #{step.number} (attempt {step.attempt}) {step.kind}"
        if step.exit_code is not None or step.timed_out:
            head += " timed out" if step.timed_out else f" exit {step.exit_code}"
        if step.seconds is not None:
            head += f", {step.seconds:.1f} s"
        if step.prompt_tokens is not None or step.completion_tokens is not None:
            head += f", {step.prompt_tokens or 0:,}+{step.completion_tokens or 0:,} tokens"
        lines.append(head)
        for label, text in (("said", step.said), ("$", step.command), ("got", step.output)):
            if text:
                shown = _printable(text).splitlines() or [""]
                lines.append(f"    {label} {shown[0]}")
                lines.extend(f"      {line}" for line in shown[1:])
    if problem:
        lines.append(f"  ({problem})")
    return "\n".join(lines)


def _printable(text: str) -> str:
    return "".join(
        c if c in "\n\t" or (c.isprintable() and c not in "\x1b") else repr(c)[1:-1] for c in text
    )


__all__ = [
    "MAX_STEP_TEXT_CHARS",
    "TrajectoryStep",
    "append_step",
    "note_call",
    "noted_calls",
    "read_steps",
    "render_steps",
    "run_index_path",
    "trajectory_path",
]

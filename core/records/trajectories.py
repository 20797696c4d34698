"""Trajectories: the steps of a planner that explores, kept as it makes them.

A planner that works in a session (``agent run --planner explore``) keeps one line
per step in ``<planner-task-id>.jsonl`` under
``$XDG_STATE_HOME/sandboxed-coding-agent/trajectories``, appended as each step ends,
so a run that is killed keeps the steps it made. ``agent logs PLANNER_TASK_ID``
shows them after the call's record (and ``--json`` gives them as ``steps``).

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

#: The largest trajectory ``agent logs`` reads.
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024


def trajectories_directory(environ: Mapping[str, str] = os.environ) -> Path:
    return state_directory(environ) / "trajectories"


def trajectory_path(task_id: str, environ: Mapping[str, str] = os.environ) -> Path:
    return trajectories_directory(environ) / f"{check_task_id(task_id)}.jsonl"


def append_step(
    task_id: str, step: TrajectoryStep, environ: Mapping[str, str] = os.environ
) -> None:
    """Add ``step`` to the trajectory of ``task_id`` (readable by its owner only), with
    the API key blanked, as one line written at once.

    :raises OSError: the folder cannot be written, or the file is a link.
    """
    path = trajectory_path(task_id, environ)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = provider.blank_key(to_json(step), environ.get(provider.API_KEY_ENV, "")) + "\n"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    handle = os.open(path, flags, 0o600)
    try:
        os.write(handle, line.encode("utf-8", "surrogatepass"))
    finally:
        os.close(handle)


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
    "read_steps",
    "render_steps",
    "trajectory_path",
]

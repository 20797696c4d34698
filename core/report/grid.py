"""The task-by-model grid of a report that holds several models: a row per piece of work
(a seed and the instruction it was given; a SWE-bench instance is a seed), a column per
model asked for, and in each cell the outcome of every task of that work with that model,
each linking to the task's details."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from .rows import Row, instruction_of
from .text import attr, text

#: How the grid names the planner's default model.
DEFAULT_MODEL = "(default)"
#: The most characters of an instruction a row of the grid shows.
INSTRUCTION_CHARS = 100


def task_link(key: str) -> str:
    """The address of a task's details within the page (``#`` and its key)."""
    return "#" + quote(key, safe="")


def model_grid(rows: Sequence[Row]) -> str:
    """The grid; empty when the tasks asked for fewer than two models."""
    models = list(dict.fromkeys(row.result.model or DEFAULT_MODEL for row in rows))
    if len(models) < 2:
        return ""
    work: dict[tuple[str, str], dict[str, list[Row]]] = {}
    for row in rows:
        instruction, _ = instruction_of(row.result)
        cells = work.setdefault((row.result.seed, instruction or ""), {})
        cells.setdefault(row.result.model or DEFAULT_MODEL, []).append(row)
    heads = "".join(f"<th><code>{text(model)}</code></th>" for model in models)
    body = "\n".join(
        f"<tr><td>{_work(seed, instruction)}</td>"
        + "".join(f"<td>{_outcomes(cells.get(model, []))}</td>" for model in models)
        + "</tr>"
        for (seed, instruction), cells in work.items()
    )
    return (
        '<h2 id="grid-heading">tasks by model</h2>\n'
        '<p class="muted">A row per seed and instruction, a column per model asked for; '
        "each outcome opens that task's details.</p>\n"
        f'<div class="wide"><table class="grid" id="grid">\n<thead><tr><th>work</th>{heads}'
        f"</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table></div>"
    )


def _work(seed: str, instruction: str) -> str:
    flat = " ".join(instruction.split())
    if len(flat) > INSTRUCTION_CHARS:
        flat = flat[: INSTRUCTION_CHARS - 1] + "\u2026"
    said = f"<br><small>{text(flat)}</small>" if flat else ""
    return f"<code>{text(seed)}</code>{said}"


def _outcomes(rows: Sequence[Row]) -> str:
    if not rows:
        return '<small class="muted">not run</small>'
    return " ".join(
        f'<a href="{attr(task_link(row.key))}" title="{attr(row.key)}">'
        f'<span class="status s-{attr(row.result.status)}">{text(row.result.status)}</span></a>'
        for row in rows
    )

"""The report as JSON (``agent report --json``): what the page summarises, for a script,
from the same rows and figures as the page."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..batches.results import STATUSES
from ..verdicts.grading import RESOLUTIONS
from .rows import Figures, ResultsSource, Row, figures_of, grouped, merged, total


def report_summary(sources: Sequence[ResultsSource]) -> dict[str, Any]:
    """The counts per outcome, the figures by model, seed and file (each when there are
    several, as on the page) and every task with its outcome, as JSON values."""
    rows = merged(sources)
    figures = [figures_of(row.result) for row in rows]
    graded = any(row.result.resolution for row in rows)
    groups: list[tuple[str, str, Callable[[Row], str | None]]] = [
        ("by_model", "model", lambda row: row.result.model),
        ("by_seed", "seed", lambda row: row.result.seed),
        ("by_file", "file", lambda row: row.source),
    ]
    summary: dict[str, Any] = {
        "files": [source.label for source in sources],
        "summary": {
            **_figures(total(figures)),
            "statuses": {s: sum(row.result.status == s for row in rows) for s in STATUSES},
            "resolutions": {r: sum(row.result.resolution == r for row in rows) for r in RESOLUTIONS}
            if graded
            else None,
        },
    }
    for key, name, by in groups:
        tallies = _grouped(rows, figures, by)
        summary[key] = (
            [{name: label, **_figures(one)} for label, one in tallies] if len(tallies) > 1 else []
        )
    summary["tasks"] = [_task(row, one) for row, one in zip(rows, figures, strict=True)]
    return summary


def _grouped(
    rows: Sequence[Row], figures: Sequence[Figures], by: Callable[[Row], str | None]
) -> list[tuple[str | None, Figures]]:
    # grouped() keys by text; the planner's default model stays null here, not a label.
    labels: dict[str, str | None] = {}

    def named(row: Row) -> str:
        label = by(row)
        key = "\x00" if label is None else label
        labels[key] = label
        return key

    return [(labels[key], one) for key, one in grouped(rows, figures, named).items()]


def _figures(one: Figures) -> dict[str, Any]:
    return {
        "tasks": one.tasks,
        "passed": one.passed,
        "pass_rate": one.pass_rate,
        "attempts": one.attempts,
        "tokens": one.tokens,
        "prompt_tokens": one.prompt_tokens,
        "completion_tokens": one.completion_tokens,
        "cost": one.cost,
        "planner_calls": one.planner_calls,
        # Results record milliseconds; summing them must not print 0.30000000000000004.
        "planner_seconds": round(one.planner_seconds, 3),
        "sandbox_seconds": round(one.sandbox_seconds, 3),
        "seconds": round(one.seconds, 3),
    }


def _task(row: Row, one: Figures) -> dict[str, Any]:
    result = row.result
    return {
        "key": row.key,
        "id": result.id,
        "file": row.source,
        "line": result.line,
        "status": result.status,
        "resolution": result.resolution,
        "seed": result.seed,
        "model": result.model,
        "run_id": result.run_id,
        "error": result.error.kind if result.error is not None else None,
        "attempts": one.attempts,
        "tokens": one.tokens,
        "cost": one.cost,
        "seconds": result.seconds,
    }

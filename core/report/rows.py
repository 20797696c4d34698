"""The report's rows: the results of one or several files as one list of tasks, and the
figures of each task and of each group of tasks (a model, a seed, a file)."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

import attrs

from ..batches.results import TaskResult, latest
from ..model import Attempt, TrajectoryStep


@attrs.frozen
class ResultsSource:
    """One results file given to ``agent report``.

    :ivar label: how the page names it (its file name, or its path when two share a name).
    :ivar results: its lines, in order.
    :ivar steps: the steps of its planner calls that explored, by planner task ID, as
        this machine kept them (``agent report`` reads them; none kept, none shown),
        each made compact by :func:`~.details.compact_step`: the page shows them as given.
    """

    label: str
    results: Sequence[TaskResult]
    steps: Mapping[str, Sequence[TrajectoryStep]] = attrs.field(factory=dict)


@attrs.frozen
class Row:
    """One task of the report.

    :ivar key: the task's ID, or ``LABEL:ID`` when several files hold a task of that ID.
    :ivar source: the label of the file it was read from.
    :ivar result: its last line in that file.
    :ivar steps: the steps of its file's planner calls that explored, by planner task ID.
    """

    key: str
    source: str
    result: TaskResult
    steps: Mapping[str, Sequence[TrajectoryStep]] = attrs.field(factory=dict)


def merged(sources: Sequence[ResultsSource]) -> list[Row]:
    """Every task of ``sources`` in the order of the tasks file (line, then ID, then the
    order of the files): in each file the last line of a task counts (a task a budget
    stopped has a line before the one of its resumed run), and an ID that several files
    hold is named with its file's label, so that no two rows share a name."""
    found = [(source, [bounded(result) for result in latest(source.results)]) for source in sources]
    files_holding = Counter(result.id for _, results in found for result in results)
    rows = [
        (
            result.line,
            result.id,
            index,
            Row(_key(s.label, result.id, files_holding), s.label, result, s.steps),
        )
        for index, (s, results) in enumerate(found)
        for result in results
    ]
    rows.sort(key=lambda entry: entry[:3])
    return [row for *_, row in rows]


#: The most characters of a name (an ID, a seed, a model...) the page shows: a hand-made
#: results line may hold any length.
NAME_CHARS = 300


def short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "\u2026"


def bounded(result: TaskResult) -> TaskResult:
    """``result`` with its names no longer than :data:`NAME_CHARS`."""
    names = (result.id, result.seed, result.planner, result.runner, result.model)
    if all(len(name) <= NAME_CHARS for name in (*names, result.run_id, result.started_at) if name):
        return result

    def cut(name: str | None) -> str | None:
        return None if name is None else short(name)

    return attrs.evolve(
        result,
        id=short(result.id),
        seed=short(result.seed),
        planner=cut(result.planner),
        runner=cut(result.runner),
        model=cut(result.model),
        run_id=cut(result.run_id),
        started_at=cut(result.started_at),
    )


def _key(label: str, task_id: str, files_holding: Counter[str]) -> str:
    return f"{label}:{task_id}" if files_holding[task_id] > 1 else task_id


def planner_task_ids(result: TaskResult) -> list[str]:
    """The planner task IDs a task's line names: each attempt's, and its error's."""
    found = [a.planner_task_id for a in every_attempt(result)]
    if result.error is not None:
        found.append(result.error.planner_task_id)
    return list(dict.fromkeys(task_id for task_id in found if task_id))


def every_attempt(result: TaskResult) -> list[Attempt]:
    """Every attempt of every candidate of the task's run, whatever it ended in."""
    run = result.result
    if run is None:
        error = result.error
        return [a for c in error.candidates for a in c.attempts] if error is not None else []
    return [a for c in run.candidates for a in c.attempts] or list(run.attempts)


def instruction_of(result: TaskResult) -> tuple[str | None, str]:
    """The instruction the task ran with, and where it came from (``prompt``, ``default``,
    or ``""`` when its line does not say: an older line of a run that ended in an error)."""
    if result.prompt:
        return result.prompt, "prompt"
    if result.instruction:
        return result.instruction, "default"
    if result.result is not None and result.result.instruction:  # a line older than it
        return result.result.instruction, "default"
    return None, ""


@attrs.frozen
class Figures:
    """What one task, or a group of tasks, did and spent.

    :ivar prompt_tokens: ``None`` when no line says (results older than budgets).
    :ivar cost: US dollars; ``None`` when no line was priced.
    """

    tasks: int = 0
    passed: int = 0
    attempts: int = 0
    tokens: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    planner_calls: int = 0
    planner_seconds: float = 0.0
    sandbox_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def pass_rate(self) -> float:
        return self.passed / self.tasks if self.tasks else 0.0

    def plus(self, other: Figures) -> Figures:
        return Figures(
            tasks=self.tasks + other.tasks,
            passed=self.passed + other.passed,
            attempts=self.attempts + other.attempts,
            tokens=self.tokens + other.tokens,
            prompt_tokens=_add(self.prompt_tokens, other.prompt_tokens),
            completion_tokens=_add(self.completion_tokens, other.completion_tokens),
            cost=_add(self.cost, other.cost),
            planner_calls=self.planner_calls + other.planner_calls,
            planner_seconds=self.planner_seconds + other.planner_seconds,
            sandbox_seconds=self.sandbox_seconds + other.sandbox_seconds,
            seconds=self.seconds + other.seconds,
        )


N = TypeVar("N", int, float)


def _add(one: N | None, other: N | None) -> N | None:
    if one is None:
        return other
    return one if other is None else one + other


def figures_of(result: TaskResult) -> Figures:
    attempts = every_attempt(result)
    run = result.result
    prompt = completion = None
    if result.spend is not None:
        prompt, completion = result.spend.prompt_tokens, result.spend.completion_tokens
    elif any(a.usage for a in attempts):  # a line older than budgets
        prompt = sum((a.usage.prompt_tokens or 0) for a in attempts if a.usage)
        completion = sum((a.usage.completion_tokens or 0) for a in attempts if a.usage)
    planner_seconds = sum(a.planner_seconds or 0.0 for a in attempts)
    sandbox_seconds = sum(a.sandbox_seconds or 0.0 for a in attempts)
    if run is not None and not attempts:
        planner_seconds, sandbox_seconds = run.planner_seconds or 0.0, run.sandbox_seconds
    return Figures(
        tasks=1,
        passed=result.status == "passed",
        attempts=len(attempts) or (1 if run is not None else 0),
        tokens=result.tokens or (prompt or 0) + (completion or 0),
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost=result.spend.cost if result.spend is not None else None,
        planner_calls=result.spend.planner_calls if result.spend is not None else 0,
        planner_seconds=planner_seconds,
        sandbox_seconds=sandbox_seconds,
        seconds=result.seconds,
    )


def total(figures: Iterable[Figures]) -> Figures:
    summed = Figures()
    for one in figures:
        summed = summed.plus(one)
    return summed


def grouped(
    rows: Sequence[Row], figures: Sequence[Figures], by: Callable[[Row], str]
) -> dict[str, Figures]:
    """The figures of ``rows`` summed per ``by(row)``, in the order each group first appears."""
    groups: dict[str, Figures] = {}
    for row, one in zip(rows, figures, strict=True):
        name = by(row)
        groups[name] = groups.get(name, Figures()).plus(one)
    return groups


def batch_times(rows: Sequence[Row]) -> tuple[datetime.datetime, datetime.datetime] | None:
    """When the first task started and the last one ended, from the lines that say."""
    spans: list[tuple[datetime.datetime, datetime.datetime]] = []
    for row in rows:
        if row.result.started_at is None:
            continue
        try:
            start = datetime.datetime.fromisoformat(row.result.started_at)
        except ValueError:
            continue
        if start.tzinfo is None:
            start = start.replace(tzinfo=datetime.UTC)
        try:
            end = start + datetime.timedelta(seconds=row.result.seconds)
        except OverflowError:
            continue
        spans.append((start, end))
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)


def missing_lines(lines: Iterable[int]) -> tuple[list[str], int]:
    """The task-file lines from 1 to the last one with a result that have none, as ranges
    (``2``, ``5-7``), and how many lines that is."""
    ranges: list[str] = []
    count = previous = 0
    for line in sorted(set(lines)):
        if line > previous + 1:
            first, last = previous + 1, line - 1
            count += last - first + 1
            ranges.append(str(first) if first == last else f"{first}-{last}")
        previous = line
    return ranges, count

"""The page itself: summary, pass rates by model, seed and file, the tasks table with each
task's details in a full-width row under it, the environment, and what was left out."""

from __future__ import annotations

import datetime
import shlex
from collections.abc import Callable, Sequence

from .. import __version__
from ..batches.environment import BatchEnvironment, scrub_command_line
from ..batches.results import STATUSES, TaskResult
from ..verdicts.grading import RESOLUTIONS
from .assets import CSS, SCRIPT, content_security_policy
from .details import task_details
from .grid import model_grid
from .rows import (
    NAME_CHARS,
    Figures,
    ResultsSource,
    Row,
    batch_times,
    figures_of,
    grouped,
    instruction_of,
    merged,
    missing_lines,
    short,
    total,
)
from .text import TextBlocks, attr, cut, text

#: How many characters of results text (prompts, diffs, outputs) the page shows in all,
#: how many each task may show whatever the number of tasks (and at most), and how many
#: any one text may: a batch of 10,000 tasks stays a page a browser opens.
PAGE_TEXT_CHARS = 6_000_000
TASK_TEXT_CHARS = (600, 100_000)
TEXT_CHARS = 20_000

#: What each status means, shown when the pointer rests on it.
STATUS_MEANINGS = {
    "passed": "the seed's tests passed",
    "failed": "tested, and the tests did not pass",
    "rejected": "a policy refused every plan",
    "budget": "a budget stopped the task, or it never started",
    "no-submission": "the exploring planner's model submitted no change: its steps ran out, "
    "or it answered with no usable function call (exit 7 for agent run)",
    "provider-error": "the planner's provider failed (exit 3 for agent run)",
    "sandbox-error": "the sandbox failed (exit 5 for agent run)",
    "usage-error": "a usage or configuration error: an unknown seed, planner or runner, "
    "a missing or invalid variable (exit 2 for agent run)",
    "internal-error": "a bug of the agent or a plugin",
}
DEFAULT = "(default)"
#: The most characters of a task's instruction its row shows (its details show it all).
INSTRUCTION_CHARS = 120
_WORDS = (NAME_CHARS * 10, "head", "")


def render_html(results: Sequence[TaskResult], title: str) -> str:
    """The page for the results of one file, named ``title``."""
    return render_report([ResultsSource(title, results)], title)


def render_report(
    sources: Sequence[ResultsSource], title: str, *, now: datetime.datetime | None = None
) -> str:
    """The page for the results of ``sources`` (one results file or several)."""
    rows = merged(sources)
    figures = [figures_of(row.result) for row in rows]
    graded = any(row.result.resolution for row in rows)
    allowance = max(
        TASK_TEXT_CHARS[0], min(TASK_TEXT_CHARS[1], PAGE_TEXT_CHARS // (len(rows) or 1))
    )
    left_out = 0
    bodies: list[str] = []
    for order, (row, one) in enumerate(zip(rows, figures, strict=True)):
        replay = f"; agent replay {row.result.run_id} shows all" if row.result.run_id else ""
        blocks = TextBlocks(allowance, TEXT_CHARS, replay)
        bodies.append(blocks.fill(_task(order, row, one, graded, len(sources) > 1, blocks)))
        left_out += blocks.left_out
    written = (now or datetime.datetime.now(datetime.UTC)).isoformat(timespec="seconds")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>agent batch report: {attr(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>agent batch report</h1>
<p>{text(title)}: {len(rows):,} tasks</p>
{_summary(rows, total(figures), graded)}
{_tallies(rows, figures, len(sources))}
{model_grid(rows)}
<h2 id="tasks-heading">tasks</h2>
<p class="muted">In the order of the tasks file. Each task's details open under it.</p>
{_controls(rows, graded)}
<table class="tasks" id="tasks">
<thead><tr>{_heads()}</tr></thead>
{"".join(bodies)}
</table>
{_environment(sources, rows, written)}
{_notes(rows, allowance, left_out)}
<script>{SCRIPT}</script>
</body>
</html>
"""


def _summary(rows: Sequence[Row], all_: Figures, graded: bool) -> str:
    """The headline cards: the pass rate, tasks, passed, tokens and task time always; any
    other figure only when it is not zero (a status no task ended in, a cost not priced)."""
    rate = f"{100 * all_.pass_rate:.1f}%" if all_.tasks else "n/a"
    cards = [
        (rate, f"pass rate ({all_.passed:,} of {all_.tasks:,})"),
        (f"{all_.tasks:,}", "tasks"),
    ]
    for status in STATUSES:
        count = sum(r.result.status == status for r in rows)
        if count or status == "passed":
            cards.append((f"{count:,}", status))
    if graded:  # a batch with graded seeds: how each resolved
        for name in RESOLUTIONS:
            count = sum(r.result.resolution == name for r in rows)
            if count or name == RESOLUTIONS[0]:
                cards.append((f"{count:,}", f"resolved {name}"))
    cards.append((f"{all_.tokens:,}", "tokens"))
    if all_.tokens:
        split = f"{_count(all_.prompt_tokens)} / {_count(all_.completion_tokens)}"
        cards.append((split, "prompt / completion"))
    if all_.planner_calls:
        cards.append((f"{all_.planner_calls:,}", "planner calls"))
    if all_.cost is not None:
        cards.append((f"${all_.cost:,.4f}", "cost"))
    if all_.planner_seconds:
        cards.append((f"{all_.planner_seconds:,.1f} s", "planner time"))
    if all_.sandbox_seconds:
        cards.append((f"{all_.sandbox_seconds:,.1f} s", "sandbox time"))
    cards.append((f"{all_.seconds:,.1f} s", "task time"))
    shown = "\n".join(
        f'<div title="{attr(STATUS_MEANINGS.get(label, label))}"><b>{text(value)}</b>'
        f"{text(label)}</div>"
        for value, label in cards
    )
    return f'<div class="summary">\n{shown}\n</div>'


def _tallies(rows: Sequence[Row], figures: Sequence[Figures], files: int) -> str:
    """Pass rates and spending by model, by seed and by file, each when there are several."""
    groups: list[tuple[str, Callable[[Row], str]]] = [
        ("model", lambda row: row.result.model or DEFAULT),
        ("seed", lambda row: row.result.seed),
    ]
    if files > 1:
        groups.append(("results file", lambda row: row.source))
    tables: list[str] = []
    for name, by in groups:
        tallies = grouped(rows, figures, by)
        if len(tallies) < 2:
            continue
        body = "\n".join(
            f"<tr><td><code>{text(label)}</code></td>"
            f'<td class="num">{one.tasks:,}</td><td class="num">{one.passed:,}</td>'
            f'<td class="num">{100 * one.pass_rate:.1f}% ({one.passed:,} of {one.tasks:,})</td>'
            f'<td class="num">{one.tokens:,}</td>'
            f'<td class="num">{_count(one.prompt_tokens)} / {_count(one.completion_tokens)}</td>'
            f'<td class="num">{_cost(one.cost)}</td>'
            f'<td class="num">{one.planner_seconds:,.1f} s</td>'
            f'<td class="num">{one.sandbox_seconds:,.1f} s</td></tr>'
            for label, one in tallies.items()
        )
        tables.append(
            f"<h2>by {name}</h2>\n<table>\n<thead><tr><th>{name}</th>"
            '<th class="num">tasks</th><th class="num">passed</th><th class="num">pass rate</th>'
            '<th class="num">tokens</th><th class="num">prompt / completion</th>'
            '<th class="num">cost</th><th class="num">planner time</th>'
            f'<th class="num">sandbox time</th></tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>'
        )
    return "\n".join(tables)


#: Every way the tasks can be sorted: key, name, numeric. A click on a column's header
#: sorts by the first of its keys; the "sort" choice above the table offers all of them.
_SORTS = (
    ("order", "tasks file order", True),
    ("id", "task", False),
    ("status", "status", False),
    ("resolution", "resolution", False),
    ("seed", "seed", False),
    ("model", "model", False),
    ("planner", "planner", False),
    ("runner", "runner", False),
    ("attempts", "attempts", True),
    ("tokens", "tokens", True),
    ("cost", "cost", True),
    ("planner-seconds", "planner time", True),
    ("sandbox-seconds", "sandbox time", True),
    ("seconds", "task time", True),
)
#: The tasks table's columns, few enough for a window 1280 pixels wide: the key a click on
#: the header sorts by, the header, numeric. Each cell gathers what belongs together (the
#: status and resolution; the model, planner and runner; tokens and cost; the times).
_COLUMNS = (
    ("id", "task", False),
    ("status", "outcome", False),
    ("seed", "seed", False),
    ("model", "model", False),
    ("attempts", "attempts", True),
    ("tokens", "tokens", True),
    ("seconds", "time", True),
)


def _sorts(graded: bool) -> list[tuple[str, str, bool]]:
    return [s for s in _SORTS if graded or s[0] != "resolution"]


def _heads() -> str:
    return "".join(
        f'<th data-sort="{key}" data-type="{"num" if numeric else "text"}"'
        f'{" class=num" if numeric else ""} title="sort by {name}">{name}</th>'
        for key, name, numeric in _COLUMNS
    )


def _controls(rows: Sequence[Row], graded: bool) -> str:
    """Filters and a search, shown by the script (without it every task is listed)."""

    def pick(name: str, values: dict[str, str]) -> str:
        options = "".join(
            f'<option value="{attr(value)}">{text(label)}</option>'
            for value, label in values.items()
        )
        return (
            f'<label>{name} <select id="pick-{name}"><option value="*">all</option>'
            f"{options}</select></label>"
        )

    statuses = {
        s: f"{s} ({sum(r.result.status == s for r in rows):,})"
        for s in STATUSES
        if any(r.result.status == s for r in rows)
    }
    models = {r.result.model or "": r.result.model or DEFAULT for r in rows}
    seeds = {r.result.seed: r.result.seed for r in rows}
    sorts = "".join(
        f'<option value="{key}" data-type="{"num" if numeric else "text"}">{name}</option>'
        for key, name, numeric in _sorts(graded)
    )
    return (
        f'<div id="controls" hidden>{pick("status", statuses)}{pick("model", models)}'
        f'{pick("seed", seeds)}<label>sort <select id="sort-by">{sorts}</select></label>'
        '<label>search <input type="search" id="search" '
        'placeholder="ID, prompt, output..."></label><span id="shown" class="muted"></span></div>'
    )


def _task(order: int, row: Row, one: Figures, graded: bool, files: bool, blocks: TextBlocks) -> str:
    result = row.result
    run = result.result
    sort = {
        "order": str(order),
        "id": row.key,
        "status": result.status,
        "resolution": result.resolution or "",
        "seed": result.seed,
        "model": result.model or "",
        "planner": result.planner or (run.planner if run else None) or "",
        "runner": result.runner or (run.runner if run else None) or "",
        "attempts": str(one.attempts),
        "tokens": str(one.tokens),
        "cost": "" if one.cost is None else repr(one.cost),
        "planner-seconds": repr(one.planner_seconds),
        "sandbox-seconds": repr(one.sandbox_seconds),
        "seconds": repr(result.seconds),
    }
    data = " ".join(f'data-{key}="{attr(value)}"' for key, value in sort.items())
    answered = run.model if run is not None else None
    model = text(result.model or DEFAULT)
    if answered and answered != result.model:
        model += f"<br><small>answered: {text(answered)}</small>"
    planner = result.planner or (run.planner if run else None) or DEFAULT
    runner = result.runner or (run.runner if run else None) or DEFAULT
    model += f"<br><small>{text(planner)} \u00b7 {text(runner)}</small>"
    where = f", {text(row.source)}" if files else ""
    status = result.status
    outcome = (
        f'<span class="status s-{attr(status)}" '
        f'title="{attr(STATUS_MEANINGS.get(status, status))}">{text(status)}</span>'
    )
    if graded:
        outcome += (
            f'<br><span class="status s-{attr(result.resolution)}" title="resolution">'
            f"{text(result.resolution)}</span>"
            if result.resolution
            else '<br><small title="the seed names no fail_to_pass or pass_to_pass tests">'
            "not graded</small>"
        )
    instruction, source = instruction_of(result)
    said = ""
    if instruction is not None:
        flat = " ".join(instruction.split())
        if len(flat) > INSTRUCTION_CHARS:
            flat = flat[: INSTRUCTION_CHARS - 1] + "\u2026"
        of = "the seed's default: " if source == "default" else ""
        said = f'<br><small class="instruction">{text(of + flat)}</small>'
    cost = f"<br><small>{_cost(one.cost)}</small>" if one.cost is not None else ""
    cells = {
        "id": f"<code>{text(row.key)}</code><br><small>line {result.line}{where}</small>{said}",
        "status": outcome,
        "seed": text(result.seed),
        "model": model,
        "attempts": f"{one.attempts:,}",
        "tokens": f"{one.tokens:,}<br><small>{_count(one.prompt_tokens)} / "
        f"{_count(one.completion_tokens)}</small>{cost}",
        "seconds": f"{result.seconds:,.1f} s<br><small>planner {one.planner_seconds:,.1f} s"
        f"<br>sandbox {one.sandbox_seconds:,.1f} s</small>",
    }
    shown = "".join(
        f"<td{' class=num' if numeric else ''}>{cells[key]}</td>" for key, _, numeric in _COLUMNS
    )
    details = task_details(row, one, blocks)
    return (
        f'<tbody class="task" id="{attr(row.key)}" {data}>\n<tr class="row">{shown}</tr>\n'
        f'<tr class="more"><td colspan="{len(_COLUMNS)}"><details><summary>details of '
        f"{text(row.key)}</summary>\n{details}</details></td></tr>\n</tbody>\n"
    )


def _environment(sources: Sequence[ResultsSource], rows: Sequence[Row], written: str) -> str:
    facts: list[tuple[str, str]] = [
        (
            "results files",
            ", ".join(f"{s.label} ({len(s.results):,} lines)" for s in sources),
        ),
    ]
    times = batch_times(rows)
    if times is not None:
        start, end = times
        facts += [
            ("first task started", start.isoformat(timespec="seconds")),
            ("last task ended", end.isoformat(timespec="seconds")),
            ("batch duration", f"{(end - start).total_seconds():,.1f} s"),
        ]
    environments: dict[BatchEnvironment | None, int] = {}
    for row in rows:
        environments[row.result.env] = environments.get(row.result.env, 0) + 1
    for env, count in environments.items():
        if env is None:
            facts.append(("environment", f"not recorded by {count:,} older results lines"))
            continue
        of = f" ({count:,} tasks)" if len(environments) > 1 else ""
        facts += [
            (f"agent version{of}", short(env.agent_version)),
            ("Python", short(env.python)),
            ("host", short(env.host)),
            # Scrubbed again: a hand-made line may hold what agent batch would have left out.
            ("command line", cut(shlex.join(scrub_command_line(env.command_line)), *_WORDS)[0]),
        ]
    facts.append(("report written", f"{written} by agent {__version__}"))
    shown = "".join(f"<dt>{text(name)}</dt><dd>{text(value)}</dd>" for name, value in facts)
    return f'<h2>environment</h2>\n<dl class="facts">{shown}</dl>'


def _notes(rows: Sequence[Row], allowance: int, left_out: int) -> str:
    notes = [
        "Task lines that agent batch skipped (not JSON, an unknown field, a bad value) have "
        "no result: agent batch names each on its standard error when it starts "
        "(\u201cTASKS line N: ...; the line was skipped\u201d).",
        f"Each text of a task (prompt, diff, test output) shows at most {TEXT_CHARS:,} "
        f"characters, and all of a task's texts together at most {allowance:,} here; a text "
        "that is longer says where and how much was left out, and agent replay RUN_ID shows "
        "all of it.",
    ]
    if left_out:
        notes.append(f"{left_out:,} characters of results text were left out of this page.")
    # Over every file: shards of one tasks file each hold only some of its lines.
    ranges, count = missing_lines(row.result.line for row in rows)
    where = "these files" if len({row.source for row in rows}) > 1 else "this file"
    if count:
        shown = ", ".join(ranges[:20]) + (", ..." if len(ranges) > 20 else "")
        notes.append(
            f"{_lines(count)} of the tasks file before the last one with a result "
            f"{'has' if count == 1 else 'have'} no result in {where} "
            f"(blank lines, lines agent batch skipped, or tasks not run yet): {shown}."
        )
    listed = "".join(f"<li>{text(note)}</li>" for note in notes)
    return f"<h2>notes</h2>\n<ul>{listed}</ul>"


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count:,} lines"


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}"

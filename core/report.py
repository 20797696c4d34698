"""The HTML report of a batch's results: one self-contained page.

Everything is in the page (inline CSS, no script, no image, nothing fetched; its
Content-Security-Policy forbids loading anything), and every piece of text from
the results is escaped: a test's output or a model's diff may hold markup, and
it shows as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .batch import STATUSES, TaskResult, per_model, total_spend
from .grading import RESOLUTIONS, Grade

_RESOLUTION_KINDS = {"FULL": "passed", "PARTIAL": "partial", "NO": "failed"}

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em; color: #1d1d1f; }
h1 { font-size: 1.5em; margin-bottom: .2em; }
h2 { font-size: 1.15em; margin: 1.2em 0 .4em; }
table.models { width: auto; margin-bottom: 1em; }
.summary { display: flex; gap: 1.5em; flex-wrap: wrap; margin: 1em 0 1.5em; }
.summary div { background: #f4f4f6; border-radius: 6px; padding: .5em .9em; }
.summary b { display: block; font-size: 1.4em; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid #ddd;
  vertical-align: top; }
th { background: #f4f4f6; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { white-space: nowrap; font-weight: 600; border-radius: 4px; padding: 0 .4em; }
.passed { background: #d9f2df; color: #145a26; }
.failed, .rejected { background: #fbe0de; color: #8a1c12; }
.error, .partial, .budget { background: #fff1cc; color: #6b4e00; }
details { margin: .2em 0; }
summary { cursor: pointer; color: #0a58ca; }
pre { background: #f7f7f9; border: 1px solid #e3e3e8; padding: .6em; overflow-x: auto;
  max-height: 30em; white-space: pre-wrap; word-break: break-all; }
code { font-size: .95em; }
"""


def render_html(results: Sequence[TaskResult], title: str) -> str:
    """The page for ``results``: pass rate, counts, tokens, planner calls and cost (with a
    price table), the pass rate, tokens and cost per model when the tasks asked for
    several, and a row per task with its details."""
    total = len(results)
    passed = sum(1 for r in results if r.status == "passed")
    rate = f"{100 * passed / total:.1f}%" if total else "n/a"
    counts = "".join(
        f"<div><b>{sum(1 for r in results if r.status == s)}</b>{escape(s)}</div>" for s in STATUSES
    )
    if any(r.resolution for r in results):  # a batch with graded seeds: how each resolved
        counts += "".join(
            f"<div><b>{sum(1 for r in results if r.resolution == name)}</b>resolved {name}</div>"
            for name in RESOLUTIONS
        )
    rows = "\n".join(_row(result) for result in results)
    models = _models(results)
    spend = total_spend(results)
    cost = f"<div><b>${spend.cost:,.4f}</b>cost</div>\n" if spend.cost is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agent batch report: {escape(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>agent batch report</h1>
<p>{escape(title)}: {total} tasks</p>
<div class="summary">
<div><b>{rate}</b>pass rate ({passed} of {total})</div>
{counts}
<div><b>{sum(r.tokens for r in results):,}</b>tokens</div>
<div><b>{spend.planner_calls:,}</b>planner calls</div>
{cost}<div><b>{sum(r.seconds for r in results):.1f} s</b>task time</div>
</div>
{models}<table>
<thead><tr><th>task</th><th>seed</th><th>verdict</th><th>resolution</th>
<th class="num">attempts</th>
<th class="num">tokens</th><th class="num">time</th><th>details</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
</body>
</html>
"""


def _models(results: Sequence[TaskResult]) -> str:
    """A table of the pass rate and tokens per model, when the tasks asked for several."""
    tallies = per_model(results)
    if not tallies:
        return ""
    rows = "\n".join(
        f'<tr><td><code>{escape(tally.label)}</code></td><td class="num">{tally.tasks}</td>'
        f'<td class="num">{tally.passed}</td>'
        f'<td class="num">{100 * tally.pass_rate:.1f}% ({tally.passed} of {tally.tasks})</td>'
        f'<td class="num">{tally.tokens:,}</td>'
        f'<td class="num">{"-" if tally.cost is None else f"${tally.cost:,.4f}"}</td></tr>'
        for tally in tallies
    )
    return f"""<h2>by model</h2>
<table class="models">
<thead><tr><th>model</th><th class="num">tasks</th><th class="num">passed</th>
<th class="num">pass rate</th><th class="num">tokens</th><th class="num">cost</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
<h2>tasks</h2>
"""


def _row(result: TaskResult) -> str:
    kind = "error" if result.status.endswith("-error") else result.status
    attempts = (len(result.result.attempts) or 1) if result.result is not None else 0
    return (
        f"<tr><td><code>{escape(result.id)}</code><br><small>line {result.line}</small></td>"
        f"<td>{escape(result.seed)}{_model(result)}</td>"
        f'<td><span class="status {kind}">{escape(result.status)}</span></td>'
        f"<td>{_resolution(result)}</td>"
        f'<td class="num">{attempts}</td>'
        f'<td class="num">{result.tokens:,}</td>'
        f'<td class="num">{result.seconds:.1f} s</td>'
        f"<td>{_details(result)}</td></tr>"
    )


def _model(result: TaskResult) -> str:
    if result.model is None:
        return ""
    return f"<br><small>model <code>{escape(result.model)}</code></small>"


def _resolution(result: TaskResult) -> str:
    if result.resolution is None:
        return '<small title="the seed names no fail_to_pass or pass_to_pass tests">-</small>'
    kind = _RESOLUTION_KINDS[result.resolution]
    return f'<span class="status {kind}">{escape(result.resolution)}</span>'


def _details(result: TaskResult) -> str:
    parts: list[str] = []
    if result.run_id:
        parts.append(f"<small>run <code>{escape(result.run_id)}</code></small>")
    if result.prompt:
        parts.append(_block("prompt", result.prompt))
    if result.result is not None:
        parts.append(_block("diff", result.result.diff or "(no change)"))
        report = result.result.test_report
        if report is not None:
            listed = "".join(f"\n{test.outcome:8} {test.id}" for test in report.tests)
            found = "".join(
                f"\nguard: {finding.capability} ({finding.event}) {finding.detail}"
                for finding in report.guard
            )
            parts.append(_block("tests", report.summary + listed + found))
        grade = result.result.grade
        if grade is not None:
            parts.append(_block(f"graded {grade.resolution}", _graded(grade)))
        parts.append(_block("test output", result.result.test_output or "(none)"))
    if result.error is not None:
        parts.append(_block(f"{result.error.kind} error", result.error.message))
    return "\n".join(parts)


def _graded(grade: Grade) -> str:
    """Every listed test and how it ended, list by list."""
    lines = [grade.counts]
    for name, tests in (("fail_to_pass", grade.fail_to_pass), ("pass_to_pass", grade.pass_to_pass)):
        for how in ("passed", "failed", "missing"):
            lines.extend(f"{name} {how:8} {test}" for test in getattr(tests, how))
    if grade.report_problem is not None:
        lines.append(f"not counted: {grade.report_problem}")
    return "\n".join(lines)


def _block(label: str, text: str) -> str:
    return f"<details><summary>{escape(label)}</summary><pre>{escape(text)}</pre></details>"

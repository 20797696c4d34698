"""A task's details in the report: the commands to dig deeper, its prompt, its error, and
every candidate and attempt with its verdict, feedback, coloured diff, tests and output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from ..batches.results import TaskResult
from ..model import Attempt, Candidate, RunResult, TrajectoryStep
from ..verdicts import output_tests
from ..verdicts.evidence import TestReport
from ..verdicts.grading import Grade
from .rows import NAME_CHARS, Figures, Row, every_attempt, instruction_of
from .text import TextBlocks, cut, text

#: The steps of planner calls that explored, by planner task ID.
Steps = Mapping[str, Sequence[TrajectoryStep]]


def task_details(row: Row, figures: Figures, blocks: TextBlocks) -> str:
    result = row.result
    parts = [_facts(row, figures), _commands(result)]
    parts.append(_instruction(result, blocks))
    if result.error is not None:
        error = result.error
        said = [error.message]
        said += [f"planner task {error.planner_task_id}"] if error.planner_task_id else []
        said += [f"sandbox {error.sandbox_id}"] if error.sandbox_id else []
        said += [f"rejected: {r.describe()}" for r in error.rejections]
        said += [f"(the agent's error kind: {error.kind})"]
        # Named by the task's status, as its badge, the filter and the counts name it.
        parts.append(_block(result.status, blocks.add("\n".join(said), keep="both"), open_=True))
    shown = {a.planner_task_id for a in every_attempt(result)}
    if result.error is not None and result.error.planner_task_id not in shown:
        # A call that ended the run before it was an attempt (the model did not submit).
        parts.append(_steps(result.error.planner_task_id, row.steps, blocks))
    if result.result is not None:
        parts.append(_run(result.result, blocks, row.steps))
    elif result.error is not None and result.error.candidates:
        # A run that ended in an error: what it made before, as far as each candidate got.
        candidates = result.error.candidates
        if len(candidates) == 1:
            parts.append(_attempts_of(candidates[0].attempts, blocks, row.steps))
        else:
            parts.append(_candidates(candidates, None, blocks, row.steps))
    return '<div class="detail">' + "\n".join(p for p in parts if p) + "</div>"


#: How many lines of a step's output the report shows (``agent logs`` shows them all).
STEP_OUTPUT_LINES = 3
#: The most characters of one line of a step the report shows.
STEP_LINE_CHARS = 200


def _steps(task_id: str | None, steps: Steps, blocks: TextBlocks) -> str:
    """The steps of planner call ``task_id``, one compact entry each: its number, kind, exit
    code and command, then the first lines of what the model was told back."""
    found = steps.get(task_id) if task_id else None
    if not found:
        return ""
    lines = []
    for step in found:  # made compact by compact_step, as ResultsSource says
        head = f"#{step.number} {step.kind}"
        if step.timed_out:
            head += " (timed out)"
        elif step.exit_code is not None:
            head += f" (exit {step.exit_code})"
        if step.command:
            command = step.command.strip().splitlines() or [""]
            head += f": $ {command[0]}" + (" [...]" if len(command) > 1 else "")
        lines.append(head[:STEP_LINE_CHARS])
        lines += [f"    {line}" for line in (step.output or "").splitlines()]
    label = f"steps ({len(found):,}; all of them: agent logs {task_id})"
    return _block(label, blocks.add("\n".join(lines)), open_=True, kind="steps")


def compact_step(step: TrajectoryStep) -> TrajectoryStep:
    """``step`` as the report shows it: what the model said left out, and of what it was
    told back only the first lines (a command's status lines dropped: its exit code is in
    the step's heading), each cut, then how many more lines there were."""
    lines = (step.output or "").splitlines()
    if "output:" in lines[:4]:
        lines = lines[lines.index("output:") + 1 :]
    shown = [line[:STEP_LINE_CHARS] for line in lines[:STEP_OUTPUT_LINES]]
    if len(lines) > STEP_OUTPUT_LINES:
        shown.append(f"[... {len(lines) - STEP_OUTPUT_LINES:,} more lines]")
    return attrs.evolve(step, said=None, output="\n".join(shown) or None)


#: How the details name an instruction, by where it came from.
_INSTRUCTION = {
    "prompt": "instruction (the task's prompt)",
    "default": "instruction (the seed's default prompt: the task gave none)",
}


def _instruction(result: TaskResult, blocks: TextBlocks) -> str:
    instruction, source = instruction_of(result)
    if instruction is None:
        return (
            '<div class="muted">instruction: the seed\'s default prompt, which this results '
            "line does not hold (the seed could not be loaded, or the line is older than "
            "the instruction's record)</div>"
        )
    return _block(_INSTRUCTION[source], blocks.add(instruction), open_=True, kind="instruction")


def _facts(row: Row, figures: Figures) -> str:
    result = row.result
    run = result.result
    facts: list[tuple[str, str | None]] = [
        ("task", row.key),
        ("results file", f"{row.source}, line {result.line} of the tasks file"),
        ("started", result.started_at),
        ("task time", f"{result.seconds:,.1f} s"),
        ("seed", result.seed),
        ("planner", result.planner or (run.planner if run is not None else None)),
        ("runner", result.runner or (run.runner if run is not None else None)),
        ("model asked for", result.model),
        ("model that answered", run.model if run is not None else None),
        ("planner calls", f"{figures.planner_calls:,}" if result.spend is not None else None),
        ("run record", result.run_id),
    ]
    shown = "".join(
        f"<dt>{text(name)}</dt><dd>{text(value)}</dd>" for name, value in facts if value
    )
    return f'<dl class="facts">{shown}</dl>'


def _commands(result: TaskResult) -> str:
    """What to type to see more: the run's record and diff, each planner call's log."""
    commands: list[str] = []
    if result.run_id:
        commands += [f"agent replay {result.run_id}", f"agent diff {result.run_id}"]
    calls = [a.planner_task_id for a in every_attempt(result) if a.planner_task_id]
    if result.error is not None and result.error.planner_task_id:
        calls.append(result.error.planner_task_id)
    commands += [f"agent logs {call}" for call in dict.fromkeys(calls)]
    if not commands:
        return '<p class="muted">no run record or planner call to look into</p>'
    lines = "\n".join(f"<code>{text(command)}</code>" for command in commands)
    return f'<div>dig deeper:</div><pre class="commands">{lines}</pre>'


#: The most attempts a task shows (a run makes at most 16 candidates of 10 attempts; a
#: hand-made line may hold any number).
SHOWN_ATTEMPTS = 200


def _run(run: RunResult, blocks: TextBlocks, steps: Steps) -> str:
    if run.candidates:
        return _candidates(run.candidates, run.chosen_candidate, blocks, steps)
    if run.attempts:
        return _attempts_of(run.attempts, blocks, steps)
    # A line written before attempts were recorded: the run's one test.
    parts = [_diff(run.diff, blocks)]
    parts.append(_tests(run.test_report, run.grade, blocks))
    parts.append(_output(run.test_output, run.test_output_truncated, blocks))
    return "\n".join(p for p in parts if p)


def _candidates(
    candidates: tuple[Candidate, ...], chosen: int | None, blocks: TextBlocks, steps: Steps
) -> str:
    shown = _first_attempts(candidates)
    left = sum(len(c.attempts) for c in candidates) - sum(len(c.attempts) for c in shown)
    parts = [_candidate(c, chosen, blocks, steps) for c in shown]
    return "\n".join(parts + [_more_attempts(left)] * bool(left))


def _attempts_of(attempts: tuple[Attempt, ...], blocks: TextBlocks, steps: Steps) -> str:
    shown = attempts[:SHOWN_ATTEMPTS]
    left = len(attempts) - len(shown)
    parts = [_attempt(a, len(attempts), blocks, steps) for a in shown]
    return "\n".join(parts + [_more_attempts(left)] * bool(left))


def _first_attempts(candidates: tuple[Candidate, ...]) -> list[Candidate]:
    shown: list[Candidate] = []
    room = SHOWN_ATTEMPTS
    for candidate in candidates:
        if room <= 0:
            break
        shown.append(attrs.evolve(candidate, attempts=candidate.attempts[:room]))
        room -= len(shown[-1].attempts)
    return shown


def _more_attempts(left: int) -> str:
    return f'<p class="muted">{left:,} more attempts are left out of this page.</p>'


def _candidate(candidate: Candidate, chosen: int | None, blocks: TextBlocks, steps: Steps) -> str:
    how = ["chosen"] if candidate.number == chosen else []
    how += ["passed"] if candidate.passed else []
    how += ["stopped"] if candidate.stopped else []
    said = f" ({', '.join(how)})" if how else ""
    attempts = "\n".join(
        _attempt(a, len(candidate.attempts), blocks, steps) for a in candidate.attempts
    )
    return f"<h4>candidate {candidate.number}{said}</h4>\n{attempts}"


def _attempt(attempt: Attempt, of: int, blocks: TextBlocks, steps: Steps) -> str:
    said = [f'<span class="status s-{attempt.verdict}">{text(attempt.verdict)}</span>']
    if attempt.planner_task_id:
        said.append(f"planner task <code>{text(attempt.planner_task_id)}</code>")
    if attempt.model:
        said.append(f"model {text(attempt.model)}")
    if attempt.usage is not None:
        prompt, completion = attempt.usage.prompt_tokens, attempt.usage.completion_tokens
        said.append(f"{_count(prompt)} prompt + {_count(completion)} completion tokens")
    if attempt.cost is not None:
        said.append(f"${attempt.cost:,.4f}")
    if attempt.planner_seconds is not None:
        said.append(f"planner {attempt.planner_seconds:,.1f} s")
    if attempt.sandbox_seconds is not None:
        said.append(f"sandbox {attempt.sandbox_seconds:,.1f} s")
    if attempt.test_exit_code is not None:
        said.append(f"exit code {attempt.test_exit_code}")
    if attempt.test_timed_out:
        said.append("timed out")
    if attempt.limit_hit:
        said.append(f"limit hit: {text(attempt.limit_hit)}")
    parts: list[str] = [_steps(attempt.planner_task_id, steps, blocks)]
    if attempt.changed_files:
        changed, _ = cut(", ".join(attempt.changed_files), NAME_CHARS * 3, "head", "")
        parts.append(f"<div>changes {text(changed)}</div>")
    if attempt.rejections:
        fed = " (the feedback the next attempt got)" if attempt.number < of else ""
        listed = "\n".join(r.describe() for r in attempt.rejections)
        parts.append(_block(f"rejections{fed}", blocks.add(listed, keep="both"), open_=True))
    if attempt.answer is not None:
        answer = blocks.add(attempt.answer)
        parts.append(_block("the answer it was refused for", answer, open_=False))
    elif attempt.verdict == "rejected" and attempt.planner_task_id:
        parts.append(
            f'<div class="muted">the answer: <code>agent logs {text(attempt.planner_task_id)}'
            "</code></div>"
        )
    if attempt.diff or attempt.verdict != "rejected":
        parts.append(_diff(attempt.diff, blocks))
    parts.append(_tests(attempt.test_report, attempt.grade, blocks))
    if attempt.output_tests:
        counted = output_tests.summary(attempt.output_tests).partition(";")[0]
        listed = output_tests.listing(attempt.output_tests)
        parts.append(_block(f"output tests: {counted}", blocks.add(listed), open_=False))
    if attempt.tested or attempt.test_output:
        fed = (
            " (its end was the feedback the next attempt got, unless the seed hides its tests)"
            if attempt.number < of and attempt.verdict == "failed"
            else ""
        )
        parts.append(_output(attempt.test_output, attempt.test_output_truncated, blocks, note=fed))
    body = "\n".join(p for p in parts if p)
    return (
        f'<details class="attempt" open><summary>attempt {attempt.number} '
        f"{' · '.join(said)}</summary>\n{body}</details>"
    )


def _diff(diff: str, blocks: TextBlocks) -> str:
    if not diff:
        return '<div class="muted">no change</div>'
    return _block("diff", blocks.add(diff, diff=True), open_=True, kind="diff")


def _tests(report: TestReport | None, grade: Grade | None, blocks: TextBlocks) -> str:
    parts: list[str] = []
    if report is not None:
        listed = "".join(f"\n{test.outcome:8} {test.id}" for test in report.tests)
        found = "".join(
            f"\nguard: {finding.capability} ({finding.event}) {finding.detail}"
            for finding in report.guard
        )
        parts.append(_block("tests", blocks.add(report.summary + listed + found), open_=False))
    if grade is not None:
        parts.append(_block(f"graded {grade.resolution}", blocks.add(_graded(grade)), open_=False))
    return "\n".join(parts)


def _output(output: str, truncated: bool, blocks: TextBlocks, note: str = "") -> str:
    cut = " (cut by the sandbox at the seed's output limit)" if truncated else ""
    label = f"test output{cut}{note}"
    return _block(label, blocks.add(output or "(none)", keep="both"), open_=False, kind="log")


def _graded(grade: Grade) -> str:
    """Every listed test and how it ended, list by list."""
    lines = [grade.counts]
    for name, tests in (("fail_to_pass", grade.fail_to_pass), ("pass_to_pass", grade.pass_to_pass)):
        for how in ("passed", "failed", "missing"):
            lines.extend(f"{name} {how:8} {test}" for test in getattr(tests, how))
    if grade.missing_reason is not None:
        lines.append(f"missing: {grade.missing_reason}")
    if grade.report_problem is not None:
        lines.append(f"not counted: {grade.report_problem}")
    return "\n".join(lines)


def _block(label: str, html: str, *, open_: bool, kind: str = "") -> str:
    opened = " open" if open_ else ""
    cls = f' class="{kind}"' if kind else ""
    return f"<details{opened}><summary>{text(label)}</summary><pre{cls}>{html}</pre></details>"


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"

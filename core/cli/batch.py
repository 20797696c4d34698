"""``agent batch``: run a file of tasks with bounded concurrency, one result line per task."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from .options import (
    DebugOption,
    MaxCostOption,
    MaxPlannerCallsOption,
    MaxTokensOption,
    PricesOption,
    checked_model,
    ledger_for,
)

if TYPE_CHECKING:
    from ..batches.batch import TaskLine, TaskResult

#: What ``--resume --retry-errors`` runs again: errors that say nothing of the patch.
RETRIED_STATUSES = ("provider-error", "sandbox-error")

#: The longest reason a progress line gives for a task that ended in an error.
MAX_REASON_CHARS = 160

_LABELS = {
    "passed": "passed",
    "failed": "failed",
    "rejected": "rejected",
    "budget": "stopped by budget",
    "no-submission": "no submission",
    "provider-error": "provider errors",
    "sandbox-error": "sandbox errors",
    "usage-error": "usage errors",
    "internal-error": "internal errors",
}


def batch(
    tasks: Annotated[
        Path,
        typer.Argument(
            metavar="TASKS",
            help="Tasks file: one JSON object per line, each with a seed and optionally an id, "
            "prompt, attempts, candidates, planner, runner and model.",
            dir_okay=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="FILE",
            help="Results file: one JSON line per finished task, written as each finishes.",
            dir_okay=False,
        ),
    ],
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=64,
            metavar="J",
            help="Tasks run at once (default: 4; with --executor ray, as many as the "
            "cluster's CPUs hold).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Skip the tasks whose result is already in --out."),
    ] = False,
    retry_errors: Annotated[
        bool,
        typer.Option(
            "--retry-errors",
            help="With --resume: run again the tasks whose result is a provider or sandbox "
            "error (never one that reached a verdict).",
        ),
    ] = False,
    events: Annotated[
        str | None,
        typer.Option(
            "--events",
            metavar="FILE",
            help="Write one JSON line per event (task started, plan received, policy verdict, "
            "sandbox started and ended, attempt and task done, budget, interrupt) to FILE, "
            "appended, or to stdout with - (the summary then goes to stderr).",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            metavar="I/N",
            help="Run only shard I of N: the tasks whose ID hashes to it. N shards together "
            "run every task once; give each its own --out.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Model to ask the planner for in the tasks that name none "
            "(default: CODING_AGENT_MODEL).",
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            metavar="NAME",
            help="Where the tasks run: local (this machine) or ray (the nodes of a Ray "
            "cluster, each task with the local sandbox of its node; needs the extra "
            "sandboxed-coding-agent[ray]).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            metavar="ADDR",
            help="With --executor ray: the cluster's head, HOST:PORT (default: RAY_ADDRESS, "
            "or the cluster `ray start` started on this machine).",
        ),
    ] = None,
    ray_cpus: Annotated[
        float,
        typer.Option(
            "--ray-cpus",
            min=0.01,
            max=1024,
            metavar="N",
            help="With --executor ray: the CPUs each task reserves on its node.",
        ),
    ] = 1.0,
    max_planner_calls: MaxPlannerCallsOption = None,
    max_tokens: MaxTokensOption = None,
    max_cost: MaxCostOption = None,
    prices: PricesOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as one JSON object on stdout.")
    ] = False,
    debug: DebugOption = False,
) -> None:
    """Run a file of tasks, a few at once, one result line per task; resumable.

    A budget (--max-planner-calls, --max-tokens, --max-cost) bounds the whole batch:
    once it is reached no planner call starts, running sandboxes finish, and the tasks
    it stopped or never started end as `budget`; --resume runs them again within what
    is left of the budget, counting what the results file already spent.
    """
    from ..batches import batch as batching
    from ..batches.shards import parse_shard, shard_of
    from ..errors import EXIT_CODES, Interrupted, UsageError
    from ..plans.budget import Budget
    from ..runs.events import EventLog, no_events
    from . import terminal

    with terminal.reporting(as_json, debug):
        model = checked_model(model)
        if events == "-" and as_json:
            raise UsageError("--events - and --json both write to stdout; give --events a file")
        if retry_errors and not resume:
            raise UsageError("--retry-errors goes with --resume: it runs again what --out holds")
        on_ray = _executor(executor, ray_address, ray_cpus)
        part = parse_shard(shard) if shard is not None else None
        lines = batching.read_task_lines(tasks)
        todo, invalid = batching.read_tasks(lines, batching.supported_run_options())
        host = terminal.load_plugins()
        # Every task's names are checked before any starts, and before --out is touched.
        unknown = batching.unknown_names(
            todo, {"seed": host.seeds, "planner": host.planners, "runner": host.runners}
        )
        if part is not None:
            index, count = part
            todo = [t for t in todo if shard_of(t.task_id, count) == index]
            terminal.say(f"shard {index}/{count}: {len(todo)} tasks of this file")
        for problem in invalid:
            terminal.say(
                batching.blank_key(
                    f"{tasks} line {problem.line}: {problem.message}; the line was skipped"
                )
            )
        if unknown is not None:
            raise UsageError(batching.blank_key(f"{tasks}: {unknown}"))
        results = batching.ResultsFile(out, resume=resume, tasks_file=tasks)
        try:
            ledger = ledger_for(
                max_planner_calls=max_planner_calls,
                max_tokens=max_tokens,
                max_cost=max_cost,
                prices=prices,
                models={task_line.task.model or model for task_line in todo},
                environ=os.environ,
                spent=results.spent,
            )
            plugins = host.plugin_infos()
            # A task a budget stopped has no verdict: a resumed batch runs it again, and
            # with --retry-errors one that ended in a provider or sandbox error too.
            again = {"budget", *(RETRIED_STATUSES if retry_errors else ())}
            waiting = [
                t
                for t in todo
                if t.task_id not in results.done or results.done[t.task_id].status in again
            ]
            if resume and len(waiting) < len(todo):
                terminal.say(f"{len(todo) - len(waiting)} tasks already have results in {out}")
            progress = _Progress(len(todo), len(todo) - len(waiting))
            clock = time.monotonic()
            log = EventLog(events) if events is not None else None
            emit = log.emit if log is not None else no_events
            emit(
                "batch-started",
                {
                    "tasks": len(waiting),
                    "jobs": jobs or (None if on_ray else 4),
                    "shard": shard,
                    "resumed": resume,
                    "executor": executor,
                },
            )
            budget_said = threading.Event()

            def started(task_line: TaskLine) -> None:
                emit(
                    "task-started",
                    {
                        "task": task_line.task_id,
                        "line": task_line.line,
                        "seed": task_line.task.seed,
                        "model": task_line.task.model or model,
                    },
                )
                progress.started(task_line)

            def finished(result: TaskResult) -> None:
                written = results.append(result)  # as written: the key blanked
                if written.status == "budget" and not budget_said.is_set():
                    budget_said.set()
                    emit("budget-reached", {"task": written.id, "reason": ledger.reached()})
                spend = written.spend
                emit(
                    "task-done",
                    {
                        "task": written.id,
                        "status": written.status,
                        "seconds": written.seconds,
                        "run_id": written.run_id,
                        "tokens": written.tokens,
                        "cost": spend.cost if spend is not None else None,
                    },
                )
                progress.finished(written)

            stop = batching.StopRequest()

            def run_here(task_line: TaskLine) -> TaskResult:
                return batching.run_task(
                    task_line,
                    host,
                    plugins=plugins,
                    model=model,
                    ledger=ledger,
                    stop=stop,
                    events=log,
                )

            try:
                if on_ray:
                    from ..batches.on_ray import run_on_ray
                    from ..plugins import disabled_from_environment

                    run_on_ray(
                        waiting,
                        address=ray_address,
                        cpus=ray_cpus,
                        jobs=jobs,
                        model=model,
                        ledger=ledger,
                        disabled=[
                            *disabled_from_environment(),
                            *terminal.state["disabled_plugins"],
                        ],
                        run_here=run_here,
                        started=started,
                        finished=finished,
                        interrupted=progress.interrupted,
                        gave_up=progress.gave_up,
                    )
                else:
                    batching.run_tasks(
                        waiting,
                        run_here,
                        jobs=jobs or 4,
                        started=started,
                        finished=finished,
                        interrupted=progress.interrupted,
                        stop=stop,
                        gave_up=progress.gave_up,
                    )
            except KeyboardInterrupt:
                progress.close()
                emit("interrupted", {"running": progress.stopped})
                took = round(time.monotonic() - clock, 3)
                emit("batch-done", {"tasks": progress.done, "seconds": took, "interrupted": True})
                raise Interrupted(progress.after_interrupt(tasks, out)) from None
            finally:
                progress.close()
            wall = time.monotonic() - clock
        finally:
            results.close()
        summary = _summary(list(results.done.values()), len(invalid), len(waiting), wall)
        summary["budget"] = ledger.reached() if ledger.budget != Budget() else None
        emit(
            "batch-done",
            {
                "counts": summary["counts"],
                "tasks": summary["tasks"],
                "seconds": round(wall, 3),
                "interrupted": False,
            },
        )
        if log is not None:
            log.close()
        if as_json:
            terminal.print_json(summary, indent=2)
        else:
            _print_summary(summary, err=events == "-")
    all_passed = not invalid and summary["counts"]["passed"] == len(todo)
    if summary["counts"]["budget"]:
        raise typer.Exit(EXIT_CODES["budget"])
    raise typer.Exit(0 if all_passed else 1)


def _executor(executor: str, ray_address: str | None, ray_cpus: float) -> bool:
    """Whether the batch runs on Ray; a usage error for an unknown executor, for a Ray
    option without it, and for Ray not installed (saying how to install it)."""
    from ..batches.on_ray import EXECUTORS, import_ray
    from ..errors import UsageError

    if executor not in EXECUTORS:
        raise UsageError(
            f"unknown executor {executor!r}; the executors are: {', '.join(EXECUTORS)}"
        )
    if executor != "ray":
        if ray_address is not None or ray_cpus != 1.0:
            raise UsageError("--ray-address and --ray-cpus go with --executor ray")
        return False
    import_ray()
    return True


class _Progress:
    """One updating line on a terminal; otherwise one plain line on stderr per finished task."""

    def __init__(self, total: int, done: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total, self.done, self.running = total, done, 0
        self.counts: dict[str, int] = {}
        self.stopped = self.given_up = 0
        self.clock = time.monotonic()
        self.lock = threading.Lock()
        self._draw()

    def started(self, _: TaskLine) -> None:
        with self.lock:
            self.running += 1
            self._draw()

    def finished(self, result: TaskResult) -> None:
        from . import terminal

        with self.lock:
            self.running -= 1
            self.done += 1
            self.counts[result.status] = self.counts.get(result.status, 0) + 1
            if not self.tty:
                record = f" (run {result.run_id})" if result.run_id else ""
                graded = f" ({result.resolution})" if result.resolution else ""
                terminal.say(
                    f"[{self.done}/{self.total}] task {result.id} (line {result.line}, seed "
                    f"{result.seed}): {result.status}{graded} in {result.seconds:.1f} s{record}"
                    + _reason(result)
                )
            elif result.error is not None:  # a terminal: the bar, and above it what went wrong
                self._clear()
                said = f"task {result.id} (line {result.line}): {result.status}{_reason(result)}"
                terminal.say(said)
            self._draw()

    def interrupted(self, running: int) -> None:
        from . import terminal

        with self.lock:
            self._clear()
            self.stopped = running
            terminal.say(
                f"interrupted: no further task, planner call or sandbox starts; stopping the "
                f"sandboxes of {running} running task(s) (Ctrl-C again to end at once)"
            )
            self._draw()

    def gave_up(self, running: int) -> None:
        with self.lock:
            self.given_up = running

    def after_interrupt(self, tasks: Path, out: Path) -> str:
        """What the interrupted batch says last: what was stopped, what was kept."""
        from ..runs.task_pool import GRACE_SECONDS

        with self.lock:
            given_up = (
                f"; {self.given_up} of them had not ended after {GRACE_SECONDS:g} s (waiting "
                "on the planner, or on a runner that cannot be stopped) and were abandoned"
                if self.given_up
                else ""
            )
            return (
                f"interrupted: no further task, planner call or sandbox was started, and the "
                f"sandboxes of {self.stopped} running task(s) were stopped{given_up}; those "
                f"tasks have no result. {self.done} of {self.total} tasks have a result in "
                f"{out}; `agent batch {tasks} --out {out} --resume` runs the rest"
            )

    def _draw(self) -> None:
        if not self.tty:
            return
        width = 24
        filled = width * self.done // self.total if self.total else width
        errors = sum(n for status, n in self.counts.items() if status.endswith("-error"))
        line = (
            f"[{'#' * filled}{'-' * (width - filled)}] {self.done}/{self.total}  "
            f"passed {self.counts.get('passed', 0)}  failed {self.counts.get('failed', 0)}  "
            f"rejected {self.counts.get('rejected', 0)}  errors {errors}  "
            f"running {self.running}  {time.monotonic() - self.clock:.0f} s"
        )
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()

    def _clear(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _reason(result: TaskResult) -> str:
    """Why a task ended as it did, when it ended in an error: its message, on one line and
    cut to :data:`MAX_REASON_CHARS` (the results file holds the whole of it)."""
    from .terminal import one_line

    if result.error is None:
        return ""
    message = one_line(result.error.message)
    if len(message) > MAX_REASON_CHARS:
        message = message[: MAX_REASON_CHARS - 3] + "..."
    return f": {message}"


def _summary(results: list[TaskResult], invalid: int, ran: int, wall: float) -> dict[str, Any]:
    from ..batches.batch import STATUSES, per_model, total_spend
    from ..serialization import to_jsonable
    from ..verdicts.grading import RESOLUTIONS

    counts = {status: sum(1 for r in results if r.status == status) for status in STATUSES}
    resolutions = {name: sum(1 for r in results if r.resolution == name) for name in RESOLUTIONS}
    return {
        "tasks": len(results),
        "counts": counts,
        # The tasks of graded seeds (fail_to_pass, pass_to_pass), by resolution.
        "resolutions": resolutions,
        "invalid_lines": invalid,
        "tokens": sum(r.tokens for r in results),
        # What every planner call of these tasks spent: calls, tokens, cost (with --prices).
        "spend": to_jsonable(total_spend(results)),
        # Tasks that asked for more than one model: how each model did (else empty).
        "models": [
            {
                "model": tally.model,
                "tasks": tally.tasks,
                "passed": tally.passed,
                "pass_rate": round(tally.pass_rate, 4),
                "tokens": tally.tokens,
                "cost": tally.cost,
            }
            for tally in per_model(results)
        ],
        "task_seconds": round(sum(r.seconds for r in results), 3),
        "ran": ran,
        "wall_seconds": round(wall, 3),
        "tasks_per_second": round(ran / wall, 3) if wall > 0 else None,
    }


def _print_summary(summary: dict[str, Any], *, err: bool = False) -> None:
    rows = [(_LABELS[status], f"{n:,}") for status, n in summary["counts"].items()]
    if any(summary["resolutions"].values()):  # only a batch with graded seeds
        rows += [(f"resolved {name}", f"{n:,}") for name, n in summary["resolutions"].items()]
    for tally in summary["models"]:  # only a batch whose tasks asked for several models
        name = tally["model"] if tally["model"] is not None else "(default model)"
        rows.append(
            (
                f"model {name}",
                f"{tally['passed']:,}/{tally['tasks']:,} passed "
                f"({100 * tally['pass_rate']:.1f}%), {tally['tokens']:,} tokens"
                + (f", ${tally['cost']:,.4f}" if tally["cost"] is not None else ""),
            )
        )
    rows += [
        ("invalid lines", f"{summary['invalid_lines']:,}"),
        ("tasks with results", f"{summary['tasks']:,}"),
        ("tokens", f"{summary['tokens']:,}"),
        ("spent", _spent(summary["spend"])),
        ("task time", f"{summary['task_seconds']:.1f} s"),
        (
            "wall time",
            f"{summary['wall_seconds']:.1f} s for {summary['ran']} tasks run now"
            + (f" ({summary['tasks_per_second']:.2f}/s)" if summary["ran"] else ""),
        ),
    ]
    if summary["budget"] is not None:
        rows.append(("budget", f"reached: {summary['budget']}; --resume continues within it"))
    width = max(len(label) for label, _ in rows)
    typer.echo("\n".join(f"{label:<{width}}  {value:>8}" for label, value in rows), err=err)


def _spent(spend: dict[str, Any]) -> str:
    from ..plans.budget import Spend
    from ..serialization import structure

    return str(structure(spend, Spend).describe())

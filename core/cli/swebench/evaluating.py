"""``agent swebench evaluate``: predictions tested in the sandbox and graded, one results
line as each ends, and SWE-bench's report."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from ..options import DEFAULT_RUNNER, DebugOption, JsonOption
from ..terminal import echo, load_plugins, print_json, reporting, say
from .shared import (
    FrameworkOption,
    ProjectOption,
    PythonOption,
    ReposOption,
    RequirementOption,
    SpecsOption,
    import_options,
    refuse_same_file,
)

if TYPE_CHECKING:
    from ...swebench.evaluation import Evaluation, InstanceResult


class _ResultsFile:
    """The evaluation's results file: created empty (never one holding anything), one line
    appended and synced as each instance ends."""

    def __init__(self, path: Path) -> None:
        from ...errors import UsageError

        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UsageError(
                    f"{str(path)!r} is a symbolic link; name the file itself"
                ) from None
            raise UsageError(f"cannot write {str(path)!r}: {error.strerror}") from None
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size:
            os.close(fd)
            held = "is not a regular file" if not stat.S_ISREG(status.st_mode) else "is not empty"
            raise UsageError(f"{str(path)!r} {held}; name a new results file")
        self._stream: IO[str] = open(fd, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()

    def append(self, result: InstanceResult) -> None:
        from ...serialization import to_json

        with self._lock:
            self._stream.write(to_json(result) + "\n")
            self._stream.flush()
            os.fsync(self._stream.fileno())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.close()


def evaluate(
    predictions_file: Annotated[
        Path,
        typer.Argument(
            metavar="PREDS",
            help="Predictions, one JSON object per line (instance_id, model_name_or_path, "
            "model_patch), from any tool.",
            dir_okay=False,
        ),
    ],
    tasks: Annotated[
        Path,
        typer.Option(
            "--tasks", metavar="TASKS", help="The SWE-bench task instances.", dir_okay=False
        ),
    ],
    repos: ReposOption,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="RESULTS",
            help="Results file to create: one JSON line per prediction, as each ends.",
            dir_okay=False,
        ),
    ],
    jobs: Annotated[
        int, typer.Option(min=1, max=64, metavar="J", help="Predictions evaluated at once.")
    ] = 4,
    report_file: Annotated[
        Path | None,
        typer.Option(
            "--report",
            metavar="REPORT",
            help="Write SWE-bench's run report (JSON) here.",
            dir_okay=False,
        ),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Write a self-contained HTML report here.",
            dir_okay=False,
        ),
    ] = None,
    runner: Annotated[
        str, typer.Option(metavar="NAME", help="The runner that tests each prediction.")
    ] = DEFAULT_RUNNER,
    framework: FrameworkOption = "pytest",
    requirement: RequirementOption = None,
    project: ProjectOption = None,
    python: PythonOption = None,
    specs: SpecsOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Test predictions in the sandbox and grade them on FAIL_TO_PASS and PASS_TO_PASS."""
    from ...errors import UsageError
    from ...records import planner_calls
    from ...report import render_html
    from ...swebench import evaluation
    from ...swebench.specs import Specs, read_specs
    from ...swebench.tasks import read_predictions, read_tasks

    finished: list[InstanceResult] = []
    refused = 0
    with reporting(as_json, debug):
        options = import_options(None, False, framework, requirement, project, python)
        settings = read_specs(specs) if specs is not None else Specs()
        known, bad_tasks = read_tasks(tasks)
        for problem in bad_tasks:
            say(f"{tasks} {problem.message}; that instance cannot be evaluated")
        given, bad_predictions = read_predictions(predictions_file)
        for problem in bad_predictions:
            say(f"{predictions_file} {problem.message}; the line was skipped")
        by_id = {task.instance_id: task for task in known}
        todo: list[Evaluation] = []
        for prediction in given:
            task = by_id.get(prediction.instance_id)
            if task is None:
                say(
                    f"{predictions_file} line {prediction.line}: instance_id: "
                    f"{prediction.instance_id!r} is no task of {tasks}; the line was skipped"
                )
                refused += 1
                continue
            todo.append(evaluation.Evaluation(task, prediction))
        refused += len(bad_predictions) + len(bad_tasks)
        refuse_same_file(out, predictions_file, tasks)
        for extra in (report_file, html):
            if extra is not None:
                refuse_same_file(extra, predictions_file, tasks, out)
        host = load_plugins()
        host.runner(runner)  # an unknown runner is a usage error before anything runs
        results = _ResultsFile(out)
        progress = _Progress(len(todo))

        def done(result: InstanceResult) -> None:
            results.append(result)
            finished.append(result)
            progress.finished(result)

        try:
            with tempfile.TemporaryDirectory(prefix="agent-swebench-") as scratch:
                evaluation.evaluate(
                    todo,
                    repos=repos.absolute(),
                    scratch=Path(scratch),
                    host=host,
                    runner=runner,
                    options=options,
                    specs=settings,
                    parallel=jobs,
                    started=lambda _: None,
                    finished=done,
                    interrupted=progress.interrupted,
                )
        finally:
            results.close()
        summary = evaluation.report(known, [job.prediction.instance_id for job in todo], finished)
        try:
            if report_file is not None:
                planner_calls.write_private_file(report_file, json.dumps(summary, indent=4) + "\n")
            if html is not None:
                page = render_html(
                    [evaluation.as_task_result(result) for result in finished],
                    title=f"SWE-bench evaluation of {predictions_file.name}",
                )
                planner_calls.write_private_file(html, page)
        except OSError as error:
            raise UsageError(f"cannot write the report: {error.strerror}") from None
        if as_json:
            print_json(summary, indent=2)
        else:
            _print_summary(summary)
    all_resolved = not refused and all(r.outcome == "resolved" for r in finished)
    raise typer.Exit(0 if all_resolved else 1)


class _Progress:
    """One line on stderr per finished prediction."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.lock = threading.Lock()

    def finished(self, result: InstanceResult) -> None:
        with self.lock:
            self.done += 1
            said = result.outcome
            if result.outcome in ("resolved", "unresolved") and result.resolution:
                said += f" ({result.resolution})"
            if result.reason and result.outcome != "resolved":
                said += f": {result.reason}"
            say(
                f"[{self.done}/{self.total}] {result.instance_id}: {said} in {result.seconds:.1f} s"
            )

    def interrupted(self, running: int) -> None:
        say(
            f"interrupted: no further prediction starts; waiting for {running} running "
            "to end their sandboxes (their results are kept)"
        )


def _print_summary(summary: dict[str, Any]) -> None:
    rows = [
        ("total instances", summary["total_instances"]),
        ("submitted", summary["submitted_instances"]),
        ("completed", summary["completed_instances"]),
        ("resolved", summary["resolved_instances"]),
        ("unresolved", summary["unresolved_instances"]),
        ("empty patches", summary["empty_patch_instances"]),
        ("errors", summary["error_instances"]),
    ]
    width = max(len(label) for label, _ in rows)
    echo("\n".join(f"{label:<{width}}  {value:>6,}" for label, value in rows))

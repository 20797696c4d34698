"""``agent swebench``: SWE-bench task instances in as seeds, predictions out, predictions evaluated.

Exit codes: ``import`` and ``predictions`` exit 0 when every line became a seed
(a prediction), and 2 when a line was refused (the others are written all the
same, and each refused line is named on stderr); ``evaluate`` exits 0 when every
prediction resolved its instance, 1 when one did not (unresolved, empty, an
error, or a line refused), and 2 when it could not evaluate at all.
"""

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

from .options import DEFAULT_RUNNER, DebugOption, JsonOption, group
from .terminal import echo, load_plugins, print_json, reporting, say

if TYPE_CHECKING:
    from ..swebench.evaluation import Evaluation, InstanceResult
    from ..swebench.seeds import ImportOptions

app = group("SWE-bench task instances in as seeds, predictions out, predictions evaluated.")

ReposOption = Annotated[
    Path,
    typer.Option(
        "--repos",
        metavar="DIR",
        help="Folder of local clones: DIR/owner__name (or DIR/owner/name, or DIR/name), "
        "each a clone of the task's repository; nothing is fetched from the internet.",
        file_okay=False,
    ),
]
FrameworkOption = Annotated[
    str,
    typer.Option(
        "--framework",
        metavar="pytest|unittest",
        help="What the test command runs the test files with.",
    ),
]
RequirementOption = Annotated[
    list[str] | None,
    typer.Option(
        "--requirement",
        metavar="REQ",
        help="A package of the seed's runtime (repeatable); default: pytest for pytest, "
        "none for unittest.",
    ),
]
ProjectOption = Annotated[
    bool | None,
    typer.Option(
        "--project/--no-project",
        help="Install the project's own dependencies and put it on sys.path in the sandbox; "
        "default: when its pyproject.toml has a [project] table.",
    ),
]
PythonOption = Annotated[
    str | None,
    typer.Option("--python", metavar="3.X", help="The runtime's Python; default: the agent's."),
]


def _import_options(
    editable: list[str] | None,
    hidden_tests: bool,
    framework: str,
    requirement: list[str] | None,
    project: bool | None,
    python: str | None,
) -> ImportOptions:
    from ..errors import UsageError
    from ..patterns import pattern_problem
    from ..swebench.seeds import FRAMEWORKS, ORACLE, ImportOptions

    if framework not in FRAMEWORKS:
        raise UsageError(f"--framework must be one of {', '.join(FRAMEWORKS)}, not {framework!r}")
    patterns = [] if editable in (None, [ORACLE]) else list(editable or [])
    if ORACLE in patterns:
        raise UsageError("--editable oracle cannot be combined with patterns")
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem:
            raise UsageError(f"--editable {pattern!r}: {problem}")
    if python is not None and not (python.startswith("3.") and python[2:].isdigit()):
        raise UsageError(f'--python must be a version such as "3.12", not {python!r}')
    return ImportOptions(
        editable=tuple(patterns),
        hidden_tests=hidden_tests,
        framework=framework,
        requirements=None if requirement is None else tuple(requirement),
        project=project,
        python=python,
    )


@app.command("import")
def import_tasks(
    tasks: Annotated[
        Path,
        typer.Argument(help="SWE-bench task instances, one JSON object per line.", dir_okay=False),
    ],
    repos: ReposOption,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="SEEDS_DIR",
            help="Folder for the seeds: one folder per instance, and batch.jsonl, a tasks "
            "file for `agent batch`.",
            file_okay=False,
        ),
    ],
    editable: Annotated[
        list[str] | None,
        typer.Option(
            "--editable",
            metavar="oracle|PATTERN",
            help="The files a plan may replace: `oracle` (the default), the files the "
            "reference fix changes, which tells the planner where the fix goes; or patterns "
            "(repeatable).",
        ),
    ] = None,
    hidden_tests: Annotated[
        bool,
        typer.Option(
            "--hidden-tests/--visible-tests",
            help="Whether the task's test files are hidden tests, which the planner never "
            "sees (SWE-bench's setting, the default), or shown to it.",
        ),
    ] = True,
    framework: FrameworkOption = "pytest",
    requirement: RequirementOption = None,
    project: ProjectOption = None,
    python: PythonOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Make a git seed of each SWE-bench task instance, from local clones."""
    from ..errors import EXIT_CODES
    from ..swebench import seeds as seeding
    from ..swebench.tasks import BadLine, read_tasks

    refused: list[BadLine] = []
    with reporting(as_json, debug):
        options = _import_options(editable, hidden_tests, framework, requirement, project, python)
        found, refused = read_tasks(tasks)
        written: list[seeding.ImportedSeed] = []
        for task in found:
            try:
                written.append(seeding.import_task(task, repos.absolute(), out, options))
            except BadLine as refusal:
                refused.append(refusal)
        refused.sort(key=lambda bad: bad.line)
        for bad in refused:
            say(f"{tasks} {bad.message}; no seed was written for it")
        batch_file = seeding.write_batch_file(out, written) if written else None
        if as_json:
            print_json(
                {
                    "seeds": [_seed_row(seed) for seed in written],
                    "batch_file": str(batch_file) if batch_file else None,
                    "refused": [
                        {"line": p.line, "field": p.field, "message": p.problem} for p in refused
                    ],
                },
                indent=2,
            )
        else:
            for seed in written:
                _print_seed(seed)
            tail = f"; agent batch {batch_file} --out RESULTS.jsonl" if batch_file else ""
            echo(f"{len(written)} seeds written to {out}, {len(refused)} lines refused{tail}")
    if refused:
        raise typer.Exit(EXIT_CODES["usage"])


def _editable_label(seed: Any) -> str:
    if seed.oracle:
        return f"oracle (the files the reference fix changes): {', '.join(seed.editable)}"
    return ", ".join(seed.editable)


def _seed_row(seed: Any) -> dict[str, Any]:
    return {
        "instance_id": seed.instance_id,
        "seed": seed.name,
        "folder": str(seed.folder),
        "editable": list(seed.editable),
        "editable_from": "oracle" if seed.oracle else "patterns",
        "tests": list(seed.tests),
        "hidden_tests": seed.hidden,
        "notes": list(seed.notes),
    }


def _print_seed(seed: Any) -> None:
    tests = "hidden" if seed.hidden else "shown"
    echo(f"{seed.instance_id}: {seed.folder}")
    echo(f"  editable: {_editable_label(seed)}")
    echo(f"  tests ({tests} to the planner): {', '.join(seed.tests)}")
    for note in seed.notes:
        echo(f"  note: {note}")


@app.command("predictions")
def predictions(
    results: Annotated[
        Path, typer.Argument(help="A results file written by `agent batch`.", dir_okay=False)
    ],
    model_name: Annotated[
        str,
        typer.Option(
            "--model-name", metavar="NAME", help="model_name_or_path of every prediction."
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="PREDS", help="Predictions file to write (JSON Lines).", dir_okay=False
        ),
    ],
    include_failed: Annotated[
        bool,
        typer.Option(
            "--include-failed",
            help="Also give the patch of a run whose tests did not pass (by default its "
            "model_patch is empty).",
        ),
    ] = False,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Write SWE-bench predictions from a batch's results: each instance's chosen patch."""
    from .. import records
    from ..batch import read_results, without_key
    from ..errors import EXIT_CODES, UsageError
    from ..patterns import has_control_character
    from ..swebench import predictions as predicting

    damaged: list[Any] = []
    with reporting(as_json, debug):
        if not model_name.strip() or has_control_character(model_name) or len(model_name) > 256:
            raise UsageError("--model-name must be 1 to 256 characters, no control characters")
        if not results.exists():
            raise UsageError(f"there is no results file {str(results)!r}")
        found, damaged, _ = read_results(results)
        for line in damaged:
            say(f"{results} line {line.line} is not a result ({line.message}); it was skipped")
        _refuse_same_file(out, results)
        made, problems = predicting.predictions(
            [without_key(result) for result in found], model_name, include_failed=include_failed
        )
        for problem in problems:
            say(problem)
        text = "".join(json.dumps(p.line(), ensure_ascii=False) + "\n" for p in made)
        try:
            records.write_private_file(out, text)
        except OSError as error:
            raise UsageError(f"cannot write {str(out)!r}: {error.strerror}") from None
        with_patch = sum(1 for p in made if p.model_patch)
        if as_json:
            print_json(
                {
                    "predictions": len(made),
                    "with_patch": with_patch,
                    "out": str(out),
                    "damaged_lines": [line.line for line in damaged],
                },
                indent=2,
            )
        else:
            echo(f"wrote {out}: {len(made)} predictions, {with_patch} with a patch")
    if damaged:
        raise typer.Exit(EXIT_CODES["usage"])


def _refuse_same_file(out: Path, *inputs: Path) -> None:
    from ..errors import UsageError

    try:
        own = os.stat(out)
    except OSError:
        return
    for given in inputs:
        with contextlib.suppress(OSError):
            found = os.stat(given)
            if (found.st_dev, found.st_ino) == (own.st_dev, own.st_ino):
                raise UsageError(f"{str(out)!r} is {str(given)!r}; name another file")


class _ResultsFile:
    """The evaluation's results file: created empty (never one holding anything), one line
    appended and synced as each instance ends."""

    def __init__(self, path: Path) -> None:
        from ..errors import UsageError

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
        from ..serialization import to_json

        with self._lock:
            self._stream.write(to_json(result) + "\n")
            self._stream.flush()
            os.fsync(self._stream.fileno())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.close()


@app.command("evaluate")
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
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Test predictions in the sandbox and grade them on FAIL_TO_PASS and PASS_TO_PASS."""
    from .. import records
    from ..errors import UsageError
    from ..report import render_html
    from ..swebench import evaluation
    from ..swebench.tasks import read_predictions, read_tasks

    finished: list[InstanceResult] = []
    refused = 0
    with reporting(as_json, debug):
        options = _import_options(None, False, framework, requirement, project, python)
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
        _refuse_same_file(out, predictions_file, tasks)
        for extra in (report_file, html):
            if extra is not None:
                _refuse_same_file(extra, predictions_file, tasks, out)
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
                records.write_private_file(report_file, json.dumps(summary, indent=4) + "\n")
            if html is not None:
                page = render_html(
                    [evaluation.as_task_result(result) for result in finished],
                    title=f"SWE-bench evaluation of {predictions_file.name}",
                )
                records.write_private_file(html, page)
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

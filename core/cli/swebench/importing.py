"""``agent swebench import``: a git seed of each SWE-bench task instance, from local clones."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..options import DebugOption, JsonOption
from ..terminal import echo, print_json, reporting, say
from .shared import (
    FrameworkOption,
    ProjectOption,
    PythonOption,
    ReposOption,
    RequirementOption,
    SpecsOption,
    import_options,
)


def import_tasks(
    tasks: Annotated[
        Path,
        typer.Argument(
            metavar="TASKS",
            help="SWE-bench task instances, one JSON object per line.",
            dir_okay=False,
        ),
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
    specs: SpecsOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Make a git seed of each SWE-bench task instance, from local clones."""
    from ...errors import EXIT_CODES
    from ...swebench import seeds as seeding
    from ...swebench.specs import Specs, read_specs
    from ...swebench.tasks import BadLine, read_tasks

    refused: list[BadLine] = []
    with reporting(as_json, debug):
        options = import_options(editable, hidden_tests, framework, requirement, project, python)
        settings = read_specs(specs) if specs is not None else Specs()
        found, refused = read_tasks(tasks)
        written: list[seeding.ImportedSeed] = []
        for task in found:
            try:
                chosen = settings.options(options, task.repo, task.version)
                written.append(seeding.import_task(task, repos.absolute(), out, chosen))
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

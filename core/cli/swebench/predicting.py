"""``agent swebench predictions``: SWE-bench predictions from a batch's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..options import DebugOption, JsonOption
from ..terminal import echo, print_json, reporting, say
from .shared import refuse_same_file


def predictions(
    results: Annotated[
        Path,
        typer.Argument(
            metavar="RESULTS", help="A results file written by `agent batch`.", dir_okay=False
        ),
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
            "--include-failed/--only-passed",
            help="Give the patch of every run that changed something, passed or not, as the "
            "official harness grades them all (the default); --only-passed leaves the "
            "model_patch of a run that did not pass empty.",
        ),
    ] = True,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Write SWE-bench predictions from a batch's results: each instance's chosen patch."""
    from ...batches.batch import read_results, without_key
    from ...errors import EXIT_CODES, UsageError
    from ...records import planner_calls
    from ...seeds.patterns import has_control_character
    from ...swebench import predictions as predicting

    damaged: list[Any] = []
    with reporting(as_json, debug):
        if not model_name.strip() or has_control_character(model_name) or len(model_name) > 256:
            raise UsageError("--model-name must be 1 to 256 characters, no control characters")
        if not results.exists():
            raise UsageError(f"there is no results file {str(results)!r}")
        found, damaged, _ = read_results(results)
        for line in damaged:
            say(f"{results} line {line.line} is not a result ({line.message}); it was skipped")
        refuse_same_file(out, results)
        made, problems = predicting.predictions(
            [without_key(result) for result in found], model_name, include_failed=include_failed
        )
        for problem in problems:
            say(problem)
        text = "".join(json.dumps(p.line(), ensure_ascii=False) + "\n" for p in made)
        try:
            planner_calls.write_private_file(out, text)
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

"""``agent run``: plan a change to a seed project and test it in a sandbox."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import EXIT_TESTS_FAILED, EXIT_TESTS_PASSED, PlanRejected, Rejection, UsageError
from ..model import (
    CANDIDATE_TEMPERATURE,
    LIMIT_CEILINGS,
    MAX_ATTEMPTS,
    MAX_CANDIDATES,
    MAX_JOBS,
    MAX_STEPS,
    PlannerOptions,
)
from ..verdicts import output_tests
from .options import (
    DEFAULT_PLANNER,
    DEFAULT_RUNNER,
    DebugOption,
    JsonOption,
    MaxCostOption,
    MaxPlannerCallsOption,
    MaxTokensOption,
    NoPolicyOption,
    PolicyOption,
    PolicyParamOption,
    PricesOption,
    SeedOption,
    checked_edit_format,
    checked_model,
    ledger_for,
)
from .terminal import echo, has_record, load_plugins, print_json, reporting, say

if TYPE_CHECKING:
    from ..model import Attempt, PatchPlan, RunResult, SeedLimits, SeedProject

MAX_PLAN_FILE_BYTES = 1024 * 1024


def run(
    prompt: Annotated[
        str | None,
        typer.Argument(metavar="[PROMPT]", help="What to change. Default: the seed's own prompt."),
    ] = None,
    seed: SeedOption = "calculator",
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            metavar="FILE",
            help="Test this plan (JSON file) instead of asking a provider.",
            dir_okay=False,
        ),
    ] = None,
    planner: Annotated[
        str, typer.Option(metavar="NAME", help="Planner backend (see `agent planners list`).")
    ] = DEFAULT_PLANNER,
    runner: Annotated[
        str,
        typer.Option(metavar="NAME", help="Test runner, the sandbox (see `agent runners list`)."),
    ] = DEFAULT_RUNNER,
    test_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            min=0.1,
            max=LIMIT_CEILINGS["test_timeout_seconds"],
            help="Seconds the test may run (default: the seed's, 60).",
        ),
    ] = None,
    memory_mb: Annotated[
        int | None,
        typer.Option(
            metavar="MIB",
            min=32,
            max=LIMIT_CEILINGS["memory_mb"],
            help="MiB of memory the test may use (default: the seed's, 512).",
        ),
    ] = None,
    max_processes: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=8,
            max=LIMIT_CEILINGS["max_processes"],
            help="Processes the sandbox may hold (default: the seed's, 256).",
        ),
    ] = None,
    cpu_seconds: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            min=0.1,
            max=LIMIT_CEILINGS["cpu_seconds"],
            help="CPU seconds per test process (default: the seed's, 60).",
        ),
    ] = None,
    max_file_mb: Annotated[
        int | None,
        typer.Option(
            metavar="MIB",
            min=1,
            max=LIMIT_CEILINGS["max_file_mb"],
            help="Largest file the test may write, MiB (default: the seed's, 64).",
        ),
    ] = None,
    disk_mb: Annotated[
        int | None,
        typer.Option(
            metavar="MIB",
            min=1,
            max=LIMIT_CEILINGS["disk_mb"],
            help="MiB the test may write, per folder (default: the seed's, 128).",
        ),
    ] = None,
    provider_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            min=0.1,
            max=3600,
            help="Seconds to wait for the provider to connect, and for each part of its answer.",
        ),
    ] = PlannerOptions().timeout_seconds,
    provider_retries: Annotated[
        int,
        typer.Option(
            metavar="N",
            min=0,
            max=10,
            help="Further attempts after a rate limit, a server error or a lost connection.",
        ),
    ] = PlannerOptions().max_retries,
    structured_output: Annotated[
        bool,
        typer.Option(
            "--structured-output",
            help="Ask for the plan's JSON Schema (response_format json_schema).",
        ),
    ] = False,
    attempts: Annotated[
        int,
        typer.Option(
            metavar="N",
            min=1,
            max=MAX_ATTEMPTS,
            help="Planner calls per candidate: after a failed test or a refused plan, ask "
            "again with the previous plan and the test's output (or the reasons) as feedback.",
        ),
    ] = 1,
    candidates: Annotated[
        int,
        typer.Option(
            metavar="K",
            min=1,
            max=MAX_CANDIDATES,
            help="Independent plans to ask for and test at once; the result is the one that "
            "passed in the fewest attempts, then with the smallest diff.",
        ),
    ] = 1,
    jobs: Annotated[
        int | None,
        typer.Option(
            metavar="J",
            min=1,
            max=MAX_JOBS,
            help="Sandboxes at once with --candidates (default: the CPU count).",
        ),
    ] = None,
    first_pass: Annotated[
        bool,
        typer.Option(
            "--first-pass",
            help="With --candidates: stop the other candidates as soon as one passes.",
        ),
    ] = False,
    max_planner_calls: MaxPlannerCallsOption = None,
    max_tokens: MaxTokensOption = None,
    max_cost: MaxCostOption = None,
    prices: PricesOption = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            metavar="T",
            min=0.0,
            max=2.0,
            help=f"Sampling temperature (default: 0, or {CANDIDATE_TEMPERATURE} with "
            "--candidates above 1 so that the candidates differ).",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Model to ask the planner for, in place of CODING_AGENT_MODEL (not with --plan).",
        ),
    ] = None,
    edit_format: Annotated[
        str | None,
        typer.Option(
            metavar="FORMAT",
            help="How the model writes its plan: whole (files, the default), search-replace "
            "(edits) or udiff (a unified diff); not with --plan.",
        ),
    ] = None,
    max_steps: Annotated[
        int,
        typer.Option(
            metavar="N",
            min=1,
            max=MAX_STEPS,
            help="With --planner explore: the model's turns per attempt before it must "
            "submit (its commands, its submissions and its mistakes each count).",
        ),
    ] = PlannerOptions().max_steps,
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = None,
    policy_param: PolicyParamOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Plan a change to a seed project and test it in a sandbox.

    The default planner, openai, asks an OpenAI-compatible provider that three
    environment variables name: CODING_AGENT_BASE_URL (https, or plain http for a
    server on this machine; requests go to its /chat/completions, such as
    https://api.openai.com/v1/chat/completions), CODING_AGENT_MODEL and
    CODING_AGENT_API_KEY (--model names another model for one run). With --plan
    FILE no provider is needed: FILE holds JSON whole files, search/replace edits
    or a diff, or a unified diff as `git diff` writes it. `agent doctor` checks them.
    """
    from ..plans import contract, policy_parameters
    from ..runs import recording
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        if plan_file is not None and prompt is not None:
            raise UsageError("give either a PROMPT or --plan, not both")
        if plan_file is not None and edit_format is not None:
            raise UsageError(
                "--edit-format needs a planner: a plan file is read in whichever format it has"
            )
        chosen_format = checked_edit_format(edit_format)
        if prompt is not None and not contract.is_utf8(prompt):
            raise UsageError(
                "the PROMPT is not valid UTF-8 text (check the terminal's or the script's "
                "encoding); it was not sent"
            )
        budget_given = [
            name
            for name, value in (
                ("--max-planner-calls", max_planner_calls),
                ("--max-tokens", max_tokens),
                ("--max-cost", max_cost),
            )
            if value is not None
        ]
        if plan_file is not None and budget_given:
            raise UsageError(
                f"{budget_given[0]} needs a planner: a plan file makes no planner call"
            )
        ledger = ledger_for(
            max_planner_calls=max_planner_calls,
            max_tokens=max_tokens,
            max_cost=max_cost,
            prices=prices,
            models=[checked_model(model)],
            environ=os.environ,
        )
        parameters = policy_parameters.parse_assignments(policy_param or ())
        host = load_plugins()
        seed_project = host.seed(seed)
        test_runner = host.runner(runner)
        chosen_planner = host.planner(planner) if plan_file is None else None
        given_plan = read_plan_file(plan_file, seed_project) if plan_file is not None else None
        result = recording.run_recorded(
            seed_project,
            plugins=host.plugin_infos(),
            runner=test_runner,
            policies=host.policies_for(
                seed_project,
                switch_on=policy or (),
                switch_off=no_policy or (),
                parameters=parameters,
            ),
            planner=chosen_planner,
            plan=given_plan,
            instruction=prompt,
            limits=_limits_with(
                seed_project.limits,
                test_timeout_seconds=test_timeout,
                memory_mb=memory_mb,
                max_processes=max_processes,
                cpu_seconds=cpu_seconds,
                max_file_mb=max_file_mb,
                disk_mb=disk_mb,
            ),
            planner_options=PlannerOptions(
                timeout_seconds=provider_timeout,
                max_retries=provider_retries,
                structured_output=structured_output,
                temperature=(
                    temperature
                    if temperature is not None
                    else (CANDIDATE_TEMPERATURE if candidates > 1 else 0.0)
                ),
                model=checked_model(model),
                edit_format=chosen_format,
                max_steps=max_steps,
            ),
            progress=say,
            attempts=attempts,
            candidates=candidates,
            jobs=jobs,
            first_pass=first_pass,
            ledger=ledger,
        )
        if as_json:
            print_json(to_jsonable(result))
        else:
            _print_summary(result)
    raise typer.Exit(EXIT_TESTS_PASSED if result.tests_passed else EXIT_TESTS_FAILED)


def read_plan_file(path: Path, seed: SeedProject | None = None) -> PatchPlan:
    """The plan in a file, checked against the patch contract's JSON rules: JSON whole
    files, or, given the seed whose files they change, JSON search/replace edits, a JSON
    ``{"diff": ...}`` or a unified diff as ``git diff`` writes it (see :mod:`..edits`).

    :raises UsageError: the file cannot be read, or is neither JSON nor a unified diff (exit 2).
    :raises PlanRejected: the file is not a plan, or its edits do not apply (exit 4).
    """
    from ..plans import contract

    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PLAN_FILE_BYTES + 1)
    except OSError as error:
        raise UsageError(f"cannot read plan file {str(path)!r}: {error.strerror}") from None
    if len(data) > MAX_PLAN_FILE_BYTES:
        raise PlanRejected(
            [
                Rejection(
                    policy=contract.POLICY,
                    rule="plan-json",
                    message=f"the plan file is larger than {MAX_PLAN_FILE_BYTES} bytes",
                )
            ]
        )
    from ..plans.edits import neither_json_nor_diff

    problem = neither_json_nor_diff(data)
    if problem is not None:
        raise UsageError(
            f"plan file {str(path)!r} is neither a plan's JSON nor a unified diff ({problem})"
        )
    if seed is None:
        return contract.parse_plan(data)
    from ..plans.edits import plan_from_plan_file
    from ..plans.plan_requests import ShownFiles

    return plan_from_plan_file(data, ShownFiles(seed), limits=seed.limits)


def _limits_with(limits: SeedLimits, **overrides: Any) -> SeedLimits:
    """The seed's limits with the ones given on the command line instead."""
    import attrs

    from ..model import LimitError

    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        return attrs.evolve(limits, **given)
    except LimitError as error:  # the options' own ranges should leave nothing here
        raise UsageError(str(error)) from None


def _print_summary(result: RunResult) -> None:
    if result.test_timed_out:
        verdict = typer.style("tests TIMED OUT", fg="red", bold=True)
    elif result.limit_hit is not None:
        verdict = typer.style(f"tests STOPPED by the {result.limit_hit} limit", fg="red", bold=True)
    elif result.tests_passed:
        verdict = typer.style("tests passed", fg="green", bold=True)
    else:
        verdict = typer.style("tests FAILED", fg="red", bold=True)
    code = "none (killed)" if result.test_exit_code is None else str(result.test_exit_code)
    lines = [
        f"{verdict} (test exit code: {code})",
        f"seed:            {result.seed}",
        f"changed files:   {', '.join(result.changed_files) or 'none'}",
        f"planner task ID: {result.planner_task_id or 'none (plan file)'}",
        f"sandbox ID:      {result.sandbox_id} (terminated)",
    ]
    report = result.test_report
    if report is not None:
        # A graded run's listed tests decide, not every test of the report.
        said = report.reported if result.grade is not None else report.summary
        if report.needed is not None:
            listed = "test" if report.needed == 1 else "tests"
            said += f" ({report.needed} {listed} needed, from the unpatched seed's run)"
        tier = f"{result.evidence}: " if result.evidence is not None else ""
        lines.append(f"evidence:        {tier}{said}")
    if result.grade is not None:
        lines.append(f"graded:          {result.grade.summary}")
    if result.output_tests:
        lines.append(f"output tests:    {output_tests.summary(result.output_tests)}")
    if result.usage is not None:
        lines.append(
            f"tokens:          {result.usage.prompt_tokens} prompt, "
            f"{result.usage.completion_tokens} completion"
        )
    if result.spend is not None and (
        result.spend.planner_calls > 1 or result.spend.cost is not None
    ):
        lines.append(f"spent:           {result.spend.describe()}")
    if result.planner_task_id is not None:
        took = "?" if result.planner_seconds is None else f"{result.planner_seconds:.2f} s"
        lines.append(
            f"provider call:   {took}, response {result.response_id or '(no ID)'} "
            f"from {result.model or 'an unnamed model'}"
            + (
                f" (asked for {result.requested_model})"
                if result.requested_model not in (None, result.model)
                else ""
            )
        )
        if has_record(result.planner_task_id):
            lines.append(f"record:          agent logs {result.planner_task_id}")
    if result.run_id is not None:
        lines.append(f"run ID:          {result.run_id} (agent logs / agent replay / agent diff)")
        if result.tests_passed:
            lines.append(f"apply it:        agent apply {result.run_id}")
    if len(result.attempts) > 1:
        lines.append(f"attempts:        {_describe_attempts(result.attempts)}")
    if result.candidates:
        lines.append(f"candidates:      {_describe_candidates(result)}")
    typer.echo(lines[0])
    echo("\n".join(lines[1:]))
    echo("\ndiff:")
    echo(result.diff.rstrip("\n") or "(no change)")
    echo("\ntest output:")
    echo(result.test_output.rstrip("\n") or "(none)")


def _describe_attempts(attempts: Sequence[Attempt]) -> str:
    """``1 failed (exit 1), 2 rejected, 3 passed``."""
    described = []
    for attempt in attempts:
        detail = ""
        if attempt.test_timed_out:
            detail = " (timeout)"
        elif attempt.limit_hit is not None:
            detail = f" ({attempt.limit_hit} limit)"
        elif attempt.verdict == "failed" and attempt.grade is not None:
            detail = f" ({attempt.grade.resolution})"  # the exit status does not matter
        elif attempt.verdict == "failed":
            code = attempt.test_exit_code
            detail = f" (exit {'none' if code is None else code})"
        described.append(f"{attempt.number} {attempt.verdict}{detail}")
    return ", ".join(described)


def _describe_candidates(result: RunResult) -> str:
    """``#1 passed after 2 attempts (chosen); #2 failed; #3 stopped``."""
    described = []
    for candidate in result.candidates:
        if candidate.passed:
            text = "passed"
        elif candidate.stopped:
            text = "stopped"
        elif candidate.attempts and candidate.attempts[-1].verdict == "rejected":
            text = "rejected"
        else:
            text = "failed"
        if len(candidate.attempts) > 1:
            text += f" after {len(candidate.attempts)} attempts"
        if candidate.number == result.chosen_candidate:
            text += " (chosen)"
        described.append(f"#{candidate.number} {text}")
    return "; ".join(described)

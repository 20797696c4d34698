"""The ``agent`` command: translates between the terminal and ``core``, nothing more.

Exit codes (also in the README):

* 0 the test passed; 1 the test ran and failed, timed out or hit a sandbox limit;
* 2 usage or configuration error; 3 provider error; 4 plan rejected by a policy;
* 5 sandbox error; 70 unexpected internal error; 130 interrupted (Ctrl-C or SIGTERM).

``agent doctor`` exits 0 when every required item is OK, 2 when one is not.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn, TextIO

import attrs
import typer
from typer.core import TyperGroup

from . import (
    cli_batch,
    cli_diff,
    cli_replay,
    cli_report,
    contract,
    orchestrator,
    records,
    run_records,
)
from .doctor import EXIT_NOT_READY, INSTALLATION_CHECKS, ready, run_checks
from .errors import (
    EXIT_CODES,
    EXIT_TESTS_FAILED,
    EXIT_TESTS_PASSED,
    AgentError,
    AgentWarning,
    Interrupted,
    PlanRejected,
    Rejection,
    UsageError,
)
from .model import (
    CANDIDATE_TEMPERATURE,
    LIMIT_CEILINGS,
    Attempt,
    Finding,
    LimitError,
    PatchPlan,
    PlannerOptions,
    RunResult,
    SeedLimits,
)
from .plugins import PluginHost, disabled_from_environment
from .serialization import to_jsonable

EXIT_INTERRUPTED = EXIT_CODES["interrupted"]
MAX_PLAN_FILE_BYTES = 1024 * 1024
#: Bounds of ``agent run --attempts``, ``--candidates`` and ``--jobs``: each planner call
#: costs money, each sandbox memory.
MAX_ATTEMPTS = 10
MAX_CANDIDATES = 16
MAX_JOBS = 64
_INTERRUPTED = "interrupted; the sandbox (if any) was terminated and its workspace removed"


def _asks_for_json(args: Sequence[str]) -> bool:
    options = list(args)
    if "--" in options:
        options = options[: options.index("--")]
    return "--json" in options


class _AgentCommands(TyperGroup):
    """The ``agent`` command group: with ``--json``, even a usage error is a JSON error object.

    Click reports a bad option, a bad value or a missing argument itself (exit 2),
    before any command runs; this prints the JSON object a script reading stdout
    expects, and leaves click's message on stderr as it is.
    """

    # Contexts are typed loosely: typer versions differ in where their click comes from.
    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        as_json = _asks_for_json(args)
        with _usage_error_as_json(as_json):
            ctx = super().make_context(info_name, args, parent, **extra)
        ctx.meta["agent.json"] = as_json
        return ctx

    def invoke(self, ctx: Any) -> Any:
        with _usage_error_as_json(bool(ctx.meta.get("agent.json"))):
            return super().invoke(ctx)


@contextmanager
def _usage_error_as_json(as_json: bool) -> Iterator[None]:
    try:
        yield
    except Exception as error:
        message = _usage_message(error) if as_json else None
        if message is not None:
            ctx = getattr(error, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            _print_json(_error_json(UsageError(message.rstrip(".") + hint)))
        raise


def _usage_message(error: Exception) -> str | None:
    """What click says about a usage error, or ``None`` if ``error`` is not one.

    Told by shape rather than class, as typer itself does: some typer versions
    vendor their own click. A bare ``agent`` (help, not an error) is not one.
    """
    format_message = getattr(error, "format_message", None)
    if (
        type(error).__name__ == "NoArgsIsHelpError"
        or not callable(format_message)
        or not isinstance(getattr(error, "exit_code", None), int)
    ):
        return None
    return str(format_message())


app = typer.Typer(
    cls=_AgentCommands,
    help="Let a language model propose a code change and prove it in a network-blocked sandbox.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
seeds_app = typer.Typer(help="Seed projects a run can use.", no_args_is_help=True)
plugins_app = typer.Typer(help="Installed plugins.", no_args_is_help=True)
policies_app = typer.Typer(help="Policies that check plans before a sandbox.", no_args_is_help=True)
app.add_typer(seeds_app, name="seeds")
app.add_typer(plugins_app, name="plugins")
app.add_typer(policies_app, name="policies")

_state = {"debug": False}
_disabled_plugins: list[str] = []

DebugOption = Annotated[bool, typer.Option("--debug", help="Show the traceback of any error.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
SeedOption = Annotated[
    str,
    typer.Option(
        help="Seed project: a name from `agent seeds list`, or a folder with a seed.toml "
        "(write ./NAME for a folder in the current directory)."
    ),
]
PolicyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--policy",
        metavar="NAME",
        help="Switch on a policy that is off by default (repeatable; see `agent policies list`).",
    ),
]
NoPolicyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--no-policy",
        metavar="NAME",
        help="Switch off a policy, even one the seed switches on (repeatable). "
        "The patch contract cannot be switched off.",
    ),
]


# Control characters in text the agent does not write itself (a hostile test's output,
# a model's answer, a seed's description) could move the cursor and overwrite what a
# person reads, the verdict included; they are shown escaped instead. Newline and tab
# stay, and so does the carriage return of a CRLF line end.
_TERMINAL_CONTROL = re.compile(r"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _for_terminal(text: str) -> str:
    return _TERMINAL_CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


def _echo(text: str, err: bool = False) -> None:
    """Print text meant for a person, with control characters shown escaped."""
    typer.echo(_for_terminal(text), err=err)


def _say(message: str) -> None:
    _echo(f"agent: {message}", err=True)


def _print_json(value: object, indent: int | None = None) -> None:
    """Print ``value`` as JSON on stdout: always valid UTF-8, whatever text it holds.

    A file name that is not UTF-8 reaches Python as lone surrogates; written raw,
    they would make stdout undecodable, so such text is written with JSON escapes.
    """
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, indent=indent, ensure_ascii=True)
    typer.echo(text, file=_json_stdout[-1] if _json_stdout else None)


#: The real stdout while a ``--json`` command works with file descriptor 1 on stderr.
_json_stdout: list[TextIO] = []


@contextmanager
def _stdout_for_json_only(as_json: bool) -> Iterator[None]:
    """With ``--json``, let nothing but the JSON reach stdout.

    While the command works, file descriptor 1 points at stderr, so whatever a
    plugin prints, or a process it starts, lands there; the JSON is written to
    the real stdout, kept aside.
    """
    if not as_json:
        yield
        return
    sys.stdout.flush()
    try:
        kept = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no stdout or no stderr to begin with: nothing to keep apart
        yield
        return
    stream = os.fdopen(kept, "w", encoding="utf-8")
    _json_stdout.append(stream)
    try:
        yield
    finally:
        _json_stdout.pop()
        with contextlib.suppress(OSError):
            sys.stdout.flush()
        os.dup2(kept, 1)
        with contextlib.suppress(OSError):  # a full disk was reported already
            stream.close()


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    # What a plugin warns the user about is one line on stderr, never on stdout.
    if issubclass(category, AgentWarning):
        _say(f"warning: {message}")
    else:
        _original_showwarning(message, category, filename, lineno, file, line)


_original_showwarning = warnings.showwarning


def _load_plugins() -> PluginHost:
    host = PluginHost(disabled=[*disabled_from_environment(), *_disabled_plugins])
    for problem in host.problems:
        _say(f"warning: {problem}")
    return host


def _error_json(error: AgentError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": error.kind,
        "message": error.message,
        "planner_task_id": error.planner_task_id,
        "sandbox_id": error.sandbox_id,
    }
    if isinstance(error, PlanRejected):
        body["rejections"] = to_jsonable(list(error.rejections))
    # What a run with --attempts or --candidates made before the error ended it.
    if error.attempts:
        body["attempts"] = to_jsonable(list(error.attempts))
    if error.candidates:
        body["candidates"] = to_jsonable(list(error.candidates))
    return {"error": body}


@contextmanager
def _reporting(as_json: bool, debug: bool) -> Iterator[None]:
    """Turn every failure into one message and its documented exit code.

    With ``--json`` the failure is also the one JSON object on stdout. ``--debug``
    adds the traceback on stderr and changes nothing else, exit code included.
    """
    debug = debug or _state["debug"]
    with _stdout_for_json_only(as_json):
        try:
            yield
        except (typer.Exit, typer.Abort, BrokenPipeError):
            raise  # typer ends a command whose reader went away (`agent ... | head`) quietly
        except KeyboardInterrupt:
            _fail(Interrupted(_INTERRUPTED), as_json)
        except AgentError as error:
            _fail(error, as_json, show_traceback=error if debug else None)
        except Exception as error:
            hint = "" if debug else " (rerun with --debug for details)"
            internal = AgentError(f"{type(error).__name__}: {error}{hint}")
            _fail(internal, as_json, show_traceback=error if debug else None)


def _fail(
    error: AgentError, as_json: bool, show_traceback: BaseException | None = None
) -> NoReturn:
    if show_traceback is not None:
        # Escaped like every other message: a traceback quotes the input that caused it.
        sys.stderr.write(_for_terminal("".join(traceback.format_exception(show_traceback))))
    if as_json:
        # When stdout itself failed (a full disk), the message on stderr has to do.
        with contextlib.suppress(OSError):
            _print_json(_error_json(error))
    if isinstance(error, Interrupted):
        _say(error.message)
        raise typer.Exit(EXIT_CODES[error.kind])
    ids = [
        f"{label} {value}"
        for label, value in (
            ("planner task", error.planner_task_id),
            ("sandbox", error.sandbox_id),
        )
        if value
    ]
    _say(f"{error.kind} error: {error.message}" + (f" ({', '.join(ids)})" if ids else ""))
    if error.planner_task_id and _has_record(error.planner_task_id):
        _say(f"every attempt is recorded: agent logs {error.planner_task_id}")
    raise typer.Exit(EXIT_CODES[error.kind])


def _read_plan_file(path: Path) -> PatchPlan:
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
    return contract.parse_plan(data)


def _limits_with(limits: SeedLimits, **overrides: Any) -> SeedLimits:
    """The seed's limits with the ones given on the command line instead."""
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        return attrs.evolve(limits, **given)
    except LimitError as error:  # the options' own ranges should leave nothing here
        raise UsageError(str(error)) from None


def _has_record(task_id: str) -> bool:
    try:
        return records.record_path(task_id).is_file()
    except UsageError:
        return False


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
    if result.usage is not None:
        lines.append(
            f"tokens:          {result.usage.prompt_tokens} prompt, "
            f"{result.usage.completion_tokens} completion"
        )
    if result.planner_task_id is not None:
        took = "?" if result.planner_seconds is None else f"{result.planner_seconds:.2f} s"
        lines.append(
            f"provider call:   {took}, response {result.response_id or '(no ID)'} "
            f"from {result.model or 'an unnamed model'}"
        )
        if _has_record(result.planner_task_id):
            lines.append(f"record:          agent logs {result.planner_task_id}")
    if result.run_id is not None:
        lines.append(f"run ID:          {result.run_id} (agent replay / agent diff)")
    if len(result.attempts) > 1:
        lines.append(f"attempts:        {_describe_attempts(result.attempts)}")
    if result.candidates:
        lines.append(f"candidates:      {_describe_candidates(result)}")
    typer.echo(lines[0])
    _echo("\n".join(lines[1:]))
    _echo("\ndiff:")
    _echo(result.diff.rstrip("\n") or "(no change)")
    _echo("\ntest output:")
    _echo(result.test_output.rstrip("\n") or "(none)")


def _describe_attempts(attempts: Sequence[Attempt]) -> str:
    """``1 failed (exit 1), 2 rejected, 3 passed``."""
    described = []
    for attempt in attempts:
        detail = ""
        if attempt.test_timed_out:
            detail = " (timeout)"
        elif attempt.limit_hit is not None:
            detail = f" ({attempt.limit_hit} limit)"
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


@app.callback()
def _main(
    debug: DebugOption = False,
    disable_plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--disable-plugin",
            metavar="NAME",
            help="Run without this plugin (repeatable; see `agent plugins list`). "
            "Also SANDBOXED_CODING_AGENT_DISABLE_PLUGINS=name,...",
        ),
    ] = None,
) -> None:
    _state["debug"] = debug
    _disabled_plugins[:] = disable_plugin or []


@app.command()
def run(
    prompt: Annotated[
        str | None,
        typer.Argument(help="What to change. Default: the seed's own prompt."),
    ] = None,
    seed: SeedOption = "calculator",
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="Test this plan (JSON file) instead of asking a provider.",
            dir_okay=False,
        ),
    ] = None,
    planner: Annotated[str, typer.Option(help="Planner backend.")] = "openai",
    runner: Annotated[str, typer.Option(help="Test runner (sandbox).")] = "local",
    test_timeout: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            max=LIMIT_CEILINGS["test_timeout_seconds"],
            help="Seconds the test may run (default: the seed's, 60).",
        ),
    ] = None,
    memory_mb: Annotated[
        int | None,
        typer.Option(
            min=32,
            max=LIMIT_CEILINGS["memory_mb"],
            help="MiB of memory the test may use (default: the seed's, 512).",
        ),
    ] = None,
    max_processes: Annotated[
        int | None,
        typer.Option(
            min=8,
            max=LIMIT_CEILINGS["max_processes"],
            help="Processes the sandbox may hold (default: the seed's, 256).",
        ),
    ] = None,
    cpu_seconds: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            max=LIMIT_CEILINGS["cpu_seconds"],
            help="CPU seconds per test process (default: the seed's, 60).",
        ),
    ] = None,
    max_file_mb: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=LIMIT_CEILINGS["max_file_mb"],
            help="Largest file the test may write, MiB (default: the seed's, 64).",
        ),
    ] = None,
    disk_mb: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=LIMIT_CEILINGS["disk_mb"],
            help="MiB the test may write, per folder (default: the seed's, 128).",
        ),
    ] = None,
    provider_timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            max=3600,
            help="Seconds to wait for the provider to connect, and for each part of its answer.",
        ),
    ] = PlannerOptions().timeout_seconds,
    provider_retries: Annotated[
        int,
        typer.Option(
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
            min=1,
            max=MAX_ATTEMPTS,
            help="Planner calls per candidate: after a failed test or a refused plan, ask "
            "again with the previous plan and the test's output (or the reasons) as feedback.",
        ),
    ] = 1,
    candidates: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_CANDIDATES,
            help="Independent plans to ask for and test at once; the result is the one that "
            "passed in the fewest attempts, then with the smallest diff.",
        ),
    ] = 1,
    jobs: Annotated[
        int | None,
        typer.Option(
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
    temperature: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=2.0,
            help=f"Sampling temperature (default: 0, or {CANDIDATE_TEMPERATURE} with "
            "--candidates above 1 so that the candidates differ).",
        ),
    ] = None,
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Plan a change to a seed project and test it in a sandbox."""
    with _reporting(as_json, debug):
        if plan_file is not None and prompt is not None:
            raise UsageError("give either a PROMPT or --plan, not both")
        if prompt is not None and not contract.is_utf8(prompt):
            raise UsageError(
                "the PROMPT is not valid UTF-8 text (check the terminal's or the script's "
                "encoding); it was not sent"
            )
        host = _load_plugins()
        seed_project = host.seed(seed)
        test_runner = host.runner(runner)
        chosen_planner = host.planner(planner) if plan_file is None else None
        given_plan = _read_plan_file(plan_file) if plan_file is not None else None
        result = run_records.run_recorded(
            seed_project,
            plugins=host.plugin_infos(),
            runner=test_runner,
            policies=host.policies_for(
                seed_project, switch_on=policy or (), switch_off=no_policy or ()
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
            ),
            progress=_say,
            attempts=attempts,
            candidates=candidates,
            jobs=jobs,
            first_pass=first_pass,
        )
        if as_json:
            _print_json(to_jsonable(result))
        else:
            _print_summary(result)
    raise typer.Exit(EXIT_TESTS_PASSED if result.tests_passed else EXIT_TESTS_FAILED)


@app.command()
def validate(
    plans: Annotated[list[Path], typer.Argument(help="Plan files (JSON) to check.")],
    seed: SeedOption = "calculator",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Check plan files against a seed's policies without running anything."""
    all_ok = True
    with _reporting(as_json, debug):
        host = _load_plugins()
        seed_project = host.seed(seed)
        policies = host.policies_for(
            seed_project, switch_on=policy or (), switch_off=no_policy or ()
        )
        for path in plans:
            try:
                rejections = orchestrator.check_plan(_read_plan_file(path), seed_project, policies)
            except PlanRejected as error:
                rejections = list(error.rejections)
            except UsageError as error:
                rejections = [Rejection(policy="agent", rule="plan-file", message=error.message)]
            all_ok = all_ok and not rejections
            if as_json:
                verdict = {
                    "file": str(path),
                    "ok": not rejections,
                    "rejections": to_jsonable(rejections),
                }
                _print_json(verdict)
            elif rejections:
                _echo(f"rejected {path}:")
                for rejection in rejections:
                    _echo(f"  {rejection.describe()}")
            else:
                _echo(f"ok {path}")
    raise typer.Exit(EXIT_TESTS_PASSED if all_ok else EXIT_CODES["policy"])


@app.command()
def logs(
    planner_task_id: Annotated[
        str, typer.Argument(help="The planner task ID a run printed (plan-...).")
    ],
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show the record of a planner call: each attempt's status and timing, the answer or error."""
    with _reporting(as_json, debug):
        record = records.read_record(planner_task_id)
        if as_json:
            _print_json(to_jsonable(record), indent=2)
        else:
            _echo(records.render(record))


def _seed_row(host: PluginHost, name: str) -> dict[str, Any]:
    seed = host.seed(name)
    return {
        "name": seed.name,
        "source": host.seed_source(name),
        "description": seed.description,
        "root": str(seed.root),
        "files": list(seed.files),
        "editable_paths": list(seed.editable_paths),
        "editable_files": list(seed.editable_files),
        "test_files": list(seed.test_files),
        "hidden_test_paths": list(seed.hidden_test_paths),
        "hidden_test_files": list(seed.hidden_files),
        "test_command": list(seed.test_command),
        "default_prompt": seed.default_prompt,
        "limits": to_jsonable(seed.limits),
        "policies": {policy: dict(parameters) for policy, parameters in seed.policies.items()},
        "runtime": to_jsonable(seed.runtime),
    }


@seeds_app.command("list")
def seeds_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List the seed projects, where each comes from, what may change and how it is tested."""
    with _reporting(as_json, debug):
        host = _load_plugins()
        rows = [_seed_row(host, name) for name in sorted(host.seeds)]
        if as_json:
            _print_json(rows, indent=2)
            return
        for row in rows:
            _echo(f"{row['name']}  ({row['source']})")
            _echo(f"  {row['description']}")
            _echo(f"  editable: {', '.join(row['editable_paths'])}")
            _echo(f"  test:     {' '.join(row['test_command'])}")
        typer.echo("\nA folder with a seed.toml is a seed too: agent run --seed ./path/to/folder")


@seeds_app.command("show")
def seeds_show(
    name: Annotated[str, typer.Argument(help="A seed name, or a folder with a seed.toml.")],
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show everything about one seed: source, files, editable and test files, policies."""
    with _reporting(as_json, debug):
        row = _seed_row(_load_plugins(), name)
        if as_json:
            _print_json(row, indent=2)
            return
        limits = ", ".join(f"{key} {value}" for key, value in row["limits"].items())
        policies = [
            f"{policy} {json.dumps(parameters, ensure_ascii=False) if parameters else ''}".strip()
            for policy, parameters in row["policies"].items()
        ]
        lines = [
            f"{row['name']}: {row['description']}",
            f"source:         {row['source']}",
            f"root:           {row['root']}",
            f"files:          {', '.join(row['files'])}",
            f"editable:       {', '.join(row['editable_paths'])}",
            f"editable files: {', '.join(row['editable_files'])}",
            f"test files:     {', '.join(row['test_files']) or 'none'}",
            f"hidden tests:   {_describe_hidden(row['hidden_test_files'])}",
            f"test command:   {' '.join(row['test_command'])}",
            f"default prompt: {row['default_prompt']}",
            f"limits:         {limits}",
            f"runtime:        {_describe_runtime(row['runtime'])}",
            f"policies:       {'; '.join(policies) or 'none switched on by the seed'}",
        ]
        _echo("\n".join(lines))


def _describe_hidden(files: list[str]) -> str:
    if not files:
        return "none"
    return f"{', '.join(files)} (run in the sandbox, never sent to a planner)"


def _describe_runtime(runtime: dict[str, Any] | None) -> str:
    if runtime is None:
        return "the agent's own Python, standard library only"
    python = f"Python {runtime['python']}" if runtime["python"] else "the agent's own Python"
    return f"{python} with {', '.join(runtime['requirements']) or 'no requirements'}"


@policies_app.command("list")
def policies_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List policies: name, when they run (always, on or off by default), plugin."""
    with _reporting(as_json, debug):
        host = _load_plugins()
        rows = [
            {
                "name": name,
                "activation": registered.item.activation,
                "plugin": registered.plugin,
                "description": registered.item.description,
            }
            for name, registered in host.policies.items()
        ]
        if as_json:
            _print_json(rows, indent=2)
            return
        when = {"always": "always on", "on": "on by default", "off": "off by default"}
        for row in rows:
            _echo(f"{row['name']}  ({when[row['activation']]}; {host.describe(row['plugin'])})")
            _echo(f"  {row['description']}")


@app.command()
def doctor(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """Check that this machine has what a run needs: each item OK, or how to fix it."""
    with _reporting(as_json, debug):
        host = _load_plugins()
        checks = [("core", check) for check in INSTALLATION_CHECKS]
        checks += [(registered.plugin, registered.item) for registered in host.checks.values()]
        findings = run_checks(checks)
        all_ready = ready(findings)
        if as_json:
            _print_json({"ready": all_ready, "findings": to_jsonable(findings)}, indent=2)
        else:
            _print_findings(findings, all_ready)
    raise typer.Exit(EXIT_TESTS_PASSED if all_ready else EXIT_NOT_READY)


def _print_findings(findings: Sequence[Finding], all_ready: bool) -> None:
    width = max((len(f.item) for f in findings), default=0)
    colours = {"OK": "green", "WARN": "yellow", "FAIL": "red"}
    for finding in findings:
        verdict = typer.style(f"{finding.verdict:<4}", fg=colours[finding.verdict], bold=True)
        typer.echo(verdict + _for_terminal(f"  {finding.item:<{width}}  {finding.detail}"))
        if finding.fix and not finding.ok:
            _echo(f"      {'':<{width}}  fix: {finding.fix}")
    failed = sum(1 for f in findings if f.required and not f.ok)
    typer.echo(
        "\nready: every required item is OK"
        if all_ready
        else f"\nnot ready: {failed} required item(s) failed"
    )


@plugins_app.command("list")
def plugins_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List plugins: what they provide, their distribution and version, where they loaded from."""
    with _reporting(as_json, debug):
        host = _load_plugins()
        infos = host.plugin_infos()
        if as_json:
            _print_json(to_jsonable(infos), indent=2)
            return
        for info in infos:
            source = f"{info.distribution} {info.version}".strip()
            provides = ", ".join(info.kinds) or "nothing registered"
            status = "" if info.status == "loaded" else f" {info.status.upper()}"
            _echo(f"{info.name}  [{provides}]{status}")
            _echo(f"  from {source}: {info.location}")
            if info.problem:
                _echo(f"  problem: {info.problem}")


# Commands of their own modules: each module is light to import and imports its work when run.
app.command("batch")(cli_batch.batch)
app.command("report")(cli_report.report)
app.command("replay")(cli_replay.replay)
app.command("diff")(cli_diff.diff)


def _terminate(signum: int, _: FrameType | None) -> NoReturn:
    # Unwind like Ctrl-C so every `finally` (sandbox kill, workspace removal) runs.
    raise KeyboardInterrupt


def main() -> None:
    """Entry point of the ``agent`` console script."""
    signal.signal(signal.SIGTERM, _terminate)
    warnings.showwarning = _show_warning
    # Plugins' command groups (register_commands), only when the command line may name one.
    from .commands import mount_plugin_commands

    mount_plugin_commands(app, sys.argv[1:])
    app(prog_name="agent")


if __name__ == "__main__":
    main()

"""``agent seeds``: the seed projects a run can use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .options import DebugOption, JsonOption, group
from .terminal import echo, load_plugins, one_line, print_json, reporting

if TYPE_CHECKING:
    from ..model import SeedProject
    from ..plugins import PluginHost

app = group("Seed projects a run can use.")


def _seed_row(host: PluginHost, name: str) -> dict[str, Any]:
    from ..serialization import to_jsonable

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
        **_applied_policies(host, seed),
        "runtime": to_jsonable(seed.runtime),
        "verdict": _verdict_basis(seed),
        "guard_allow": list(seed.guard_allow),
        "tree": to_jsonable(seed.source),
        "added_files": list(seed.added_files),
        "fail_to_pass": list(seed.fail_to_pass),
        "pass_to_pass": list(seed.pass_to_pass),
        "context": list(seed.context_paths),
        "context_budget_bytes": seed.context_budget_bytes,
        "output_command": list(seed.output_command),
        # How each runs, never what it must give: that stays with the agent.
        "output_tests": [
            {"name": test.name, "hidden": test.hidden, "call": test.call, "argv": test.argv}
            for test in seed.output_tests
        ],
    }


def _verdict_basis(seed: SeedProject) -> str:
    """What a pass of this seed rests on, for ``seeds show``."""
    count = len(seed.output_tests)
    if not seed.test_command:
        return f"its {count} output tests alone, compared by the agent outside the sandbox"
    basis = _command_basis(seed)
    if count:
        basis += f"; and its {count} output tests, compared by the agent outside the sandbox"
    return basis


def _command_basis(seed: SeedProject) -> str:
    from ..verdicts.verdict import seed_framework

    try:
        framework = seed_framework(seed, seed.read_files())
    except Exception:  # a seed that cannot be read is reported elsewhere
        framework = None
    if framework is None:
        return "the test command's exit status alone (no framework report)"
    if seed.fail_to_pass or seed.pass_to_pass:
        return f"{framework}'s report of each listed test (graded; the exit status aside)"
    return (
        f"{framework}'s report of each test, and exit status 0; every test of the unpatched "
        "seed's run must pass (agent seeds tests)"
    )


def _applied_policies(host: PluginHost, seed: SeedProject) -> dict[str, Any]:
    """The policies a run on ``seed`` applies (without --policy and --no-policy), and why:
    ``always``, ``default`` (on by default, whichever plugin it comes from) or ``seed``."""
    from ..errors import UsageError

    try:
        applied = host.policies_for(seed)
    except UsageError as error:  # a plugin's seed naming a policy that is not installed
        return {"applied_policies": None, "applied_policies_problem": error.message}
    rows = []
    for policy in applied:
        activation = host.policies[policy.name].item.activation
        why = (
            "always"
            if activation == "always"
            else "seed"
            if policy.name in seed.policies
            else "default"
        )
        parameters = json.loads(json.dumps(seed.policies.get(policy.name, {}), default=_plain))
        rows.append({"name": policy.name, "why": why, "parameters": parameters})
    return {"applied_policies": rows, "applied_policies_problem": None}


@app.command("list")
def seeds_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List the seed projects, where each comes from, what may change and how it is tested."""
    with reporting(as_json, debug):
        host = load_plugins()
        rows = [_seed_row(host, name) for name in sorted(host.seeds)]
        if as_json:
            print_json(rows, indent=2)
            return
        for row in rows:
            echo(one_line(f"{row['name']}  ({row['source']})"))
            echo(f"  {one_line(row['description'])}")
            echo(f"  editable: {one_line(', '.join(row['editable_paths']))}")
            echo(f"  test:     {one_line(_describe_command(row))}")
        typer.echo("\nA folder with a seed.toml is a seed too: agent run --seed ./path/to/folder")


@app.command("show")
def seeds_show(
    name: Annotated[
        str,
        typer.Argument(metavar="NAME|FOLDER", help="A seed name, or a folder with a seed.toml."),
    ],
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show everything about one seed: source, files, editable and test files, policies.

    The policies are those a run on the seed applies, as the run itself chooses them,
    each with why: always, on by default (whichever plugin it comes from), or the seed's.
    """
    with reporting(as_json, debug):
        row = _seed_row(load_plugins(), name)
        if as_json:
            print_json(row, indent=2)
            return
        limits = ", ".join(f"{key} {value}" for key, value in row["limits"].items())
        policies = [
            f"{policy['name']} ({policy['why']})"
            + (
                f" {json.dumps(policy['parameters'], ensure_ascii=False)}"
                if policy["parameters"]
                else ""
            )
            for policy in row["applied_policies"] or ()
        ]
        lines = [
            f"{row['name']}: {row['description']}",
            f"source:         {row['source']}",
            f"root:           {row['root']}",
            f"tree:           {_describe_tree(row)}",
            f"files:          {_describe_files(row)}",
            *_describe_editable(row),
            f"test files:     {', '.join(row['test_files']) or 'none'}",
            f"hidden tests:   {_describe_hidden(row['hidden_test_files'])}",
            f"test command:   {_describe_command(row)}",
            f"output tests:   {_describe_output_tests(row)}",
            f"default prompt: {row['default_prompt']}",
            f"limits:         {limits}",
            f"runtime:        {_describe_runtime(row['runtime'])}",
            f"policies:       {'; '.join(policies) or row['applied_policies_problem']}",
            f"verdict:        {row['verdict']}",
            f"guard allows:   {', '.join(row['guard_allow']) or 'nothing'}",
            f"graded:         {_describe_grading(row)}",
        ]
        echo("\n".join(map(one_line, lines)))


def _plain(value: object) -> object:
    """A TOML value JSON does not know: a (read-only) table as a dict, a date as its text."""
    return dict(value) if isinstance(value, Mapping) else str(value)


def _describe_editable(row: dict[str, Any]) -> list[str]:
    """The editable files; and the patterns they come from, when those are not the files."""
    files = ", ".join(row["editable_files"]) or "none"
    if row["editable_paths"] == row["editable_files"]:
        return [f"editable:       {files}"]
    return [
        f"editable:       {', '.join(row['editable_paths'])} (as the seed gives them)",
        f"editable files: {files}",
    ]


def _describe_tree(row: dict[str, Any]) -> str:
    if row["tree"] is None:
        return "none (a folder seed: every file is in its folder)"
    return f"commit {row['tree']['commit']} of {row['tree']['repository']}"


def _describe_files(row: dict[str, Any]) -> str:
    if row["tree"] is None:
        return ", ".join(row["files"])
    added = ", ".join(row["added_files"]) or "none"
    return f"{len(row['files'])} (the tree's, and the seed's own: {added})"


def _describe_grading(row: dict[str, Any]) -> str:
    if not row["fail_to_pass"] and not row["pass_to_pass"]:
        return "no (the verdict above decides)"
    return (
        f"test by test: {len(row['fail_to_pass'])} fail_to_pass, "
        f"{len(row['pass_to_pass'])} pass_to_pass must all pass"
    )


def _describe_hidden(files: list[str]) -> str:
    if not files:
        return "none"
    return f"{', '.join(files)} (run in the sandbox, never sent to a planner)"


def _describe_runtime(runtime: dict[str, Any] | None) -> str:
    if runtime is None:
        return "the agent's own Python, standard library only"
    python = f"Python {runtime['python']}" if runtime["python"] else "the agent's own Python"
    described = f"{python} with {', '.join(runtime['requirements']) or 'no requirements'}"
    if runtime.get("project"):
        described += ", and the project's own dependencies, its folder on sys.path"
    return described


@app.command("tests")
def seeds_tests(
    name: Annotated[
        str,
        typer.Argument(metavar="NAME|FOLDER", help="A seed name, or a folder with a seed.toml."),
    ],
    runner: Annotated[
        str, typer.Option(metavar="NAME", help="Runner of the unpatched seed's sandbox.")
    ] = "local",
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Run the unpatched seed again, not the cached list.")
    ] = False,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List the tests a pass of the seed needs, each with its outcome in the unpatched seed.

    The list comes from running the unpatched seed's test command in a sandbox (cached by
    the seed's content); a pass needs every test on it reported passed, except that one the
    unpatched seed skipped or expected to fail may stay so. A graded seed's list is its
    fail_to_pass and pass_to_pass tests; a test command of no known framework has none.
    """
    with reporting(as_json, debug):
        host = load_plugins()
        seed = host.seed(name)
        row = _test_list_row(seed, host.runner(runner), fresh, as_json)
        if as_json:
            print_json(row, indent=2)
            return
        echo(one_line(f"{seed.name}: {row['basis']}"))
        for test in row["tests"]:
            echo(one_line(f"  {test['id']}  {test['unpatched']}"))
        if row["partial"]:
            echo(one_line(f"partial: {row['partial']}"))


def _tests(count: int) -> str:
    return f"{count} test" if count == 1 else f"{count} tests"


def _test_list_row(seed: SeedProject, runner: Any, fresh: bool, quiet: bool) -> dict[str, Any]:
    from ..verdicts.trusted_tests import list_tests, needs_list

    files = seed.read_files()
    listed = [*({"id": t, "unpatched": "fail_to_pass"} for t in seed.fail_to_pass)]
    listed += [{"id": t, "unpatched": "pass_to_pass"} for t in seed.pass_to_pass]
    if listed:
        return {
            "seed": seed.name,
            "basis": "graded: every listed test must pass",
            "source": "graded",
            "tests": listed,
            "partial": None,
        }
    if not needs_list(seed, files):
        return {
            "seed": seed.name,
            "basis": "no list: the test command's exit status alone decides",
            "source": None,
            "tests": [],
            "partial": None,
        }
    progress = None if quiet else (lambda message: typer.echo(f"agent: {message}", err=True))
    found = list_tests(seed, files, runner, progress=progress, cached=not fresh, prepare=True)
    return {
        "seed": seed.name,
        "basis": f"{_tests(len(found.tests))} from the unpatched seed's {found.framework} run",
        "source": "unpatched-seed",
        "tests": [{"id": t.id, "unpatched": t.unpatched} for t in found.tests],
        "partial": found.partial,
        "sandbox_id": found.sandbox_id,
    }


def _describe_command(row: dict[str, Any]) -> str:
    if row["test_command"]:
        return " ".join(row["test_command"])
    return f"none: {len(row['output_tests'])} output tests"


def _describe_output_tests(row: dict[str, Any]) -> str:
    tests = row["output_tests"]
    if not tests:
        return "none"
    hidden = sum(test["hidden"] for test in tests)
    names = ", ".join(test["name"] + (" (hidden)" if test["hidden"] else "") for test in tests)
    return f"{len(tests)} ({hidden} hidden): {names}"

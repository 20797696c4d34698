"""The options ``agent swebench`` commands share, and the checks of their values."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ...swebench.seeds import ImportOptions

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
        "default: when the project names itself in pyproject.toml, setup.cfg or setup.py.",
    ),
]
SpecsOption = Annotated[
    Path | None,
    typer.Option(
        "--specs",
        metavar="FILE",
        help="Settings by repository and version (TOML, or JSON): python, requirements, "
        "project, framework, allow, test_command; an entry's settings replace the options' "
        "for its tasks (docs: Real repositories).",
        dir_okay=False,
    ),
]
PythonOption = Annotated[
    str | None,
    typer.Option("--python", metavar="3.X", help="The runtime's Python; default: the agent's."),
]


def import_options(
    editable: list[str] | None,
    hidden_tests: bool,
    framework: str,
    requirement: list[str] | None,
    project: bool | None,
    python: str | None,
) -> ImportOptions:
    from ...errors import UsageError
    from ...seeds.patterns import pattern_problem
    from ...swebench.seeds import FRAMEWORKS, ORACLE, ImportOptions

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


def refuse_same_file(out: Path, *inputs: Path) -> None:
    from ...errors import UsageError

    try:
        own = os.stat(out)
    except OSError:
        return
    for given in inputs:
        with contextlib.suppress(OSError):
            found = os.stat(given)
            if (found.st_dev, found.st_ino) == (own.st_dev, own.st_ino):
                raise UsageError(f"{str(out)!r} is {str(given)!r}; name another file")

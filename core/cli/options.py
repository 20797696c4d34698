"""Options that several commands take, typed once."""

from __future__ import annotations

from typing import Annotated

import typer

#: What ``agent run`` uses without ``--planner`` and ``--runner``; ``agent doctor`` checks for them.
DEFAULT_PLANNER = "openai"
DEFAULT_RUNNER = "local"

DebugOption = Annotated[bool, typer.Option("--debug", help="Show the traceback of any error.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
SeedOption = Annotated[
    str,
    typer.Option(
        metavar="NAME|FOLDER",
        help="Seed project: a name from `agent seeds list`, or a folder with a seed.toml "
        "(write ./NAME for a folder in the current directory).",
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
PolicyParamOption = Annotated[
    list[str] | None,
    typer.Option(
        "--policy-param",
        metavar="NAME.KEY=VALUE",
        help="Give policy NAME the parameter KEY, over the seed's, and switch the policy on "
        '(repeatable; see `agent policies list`). VALUE is TOML: 40, true, "text", ["a", "b"].',
    ),
]


def group(help_text: str) -> typer.Typer:
    """A command group (``agent seeds``, ``agent plugins``, ...) formatted like ``agent``."""
    return typer.Typer(
        help=help_text, no_args_is_help=True, add_completion=False, rich_markup_mode=None
    )

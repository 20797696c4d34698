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


def checked_model(name: str | None) -> str | None:
    """``--model``, checked as ``CODING_AGENT_MODEL`` is."""
    from ..errors import UsageError
    from ..model import LimitError, check_model_name

    try:
        return None if name is None else check_model_name(name, "--model")
    except LimitError as error:
        raise UsageError(str(error)) from None


def group(help_text: str) -> typer.Typer:
    """A command group (``agent seeds``, ``agent plugins``, ...) formatted like ``agent``."""
    return typer.Typer(
        help=help_text, no_args_is_help=True, add_completion=False, rich_markup_mode=None
    )

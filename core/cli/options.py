"""Options that several commands take, typed once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ..plans.budget import Ledger, Spend

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


def checked_edit_format(name: str | None) -> str:
    """``--edit-format``: one of the edit formats; ``whole`` when not given."""
    from ..errors import UsageError
    from ..model import LimitError, check_edit_format

    try:
        return "whole" if name is None else check_edit_format(name, "--edit-format")
    except LimitError as error:
        raise UsageError(str(error)) from None


def group(help_text: str) -> typer.Typer:
    """A command group (``agent seeds``, ``agent plugins``, ...) formatted like ``agent``."""
    return typer.Typer(
        help=help_text, no_args_is_help=True, add_completion=False, rich_markup_mode=None
    )


MaxPlannerCallsOption = Annotated[
    int | None,
    typer.Option(
        "--max-planner-calls",
        metavar="N",
        min=1,
        help="Budget: start no planner call after N (every attempt and candidate counts).",
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        metavar="N",
        min=1,
        help="Budget: start no planner call once N tokens (prompt + completion) are spent.",
    ),
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        metavar="USD",
        min=0.0,
        help="Budget: start no planner call once this many US dollars are spent (needs --prices).",
    ),
]
PricesOption = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        metavar="FILE",
        dir_okay=False,
        help='Price table (TOML: [models."NAME"] input_per_mtok, output_per_mtok, USD per '
        "million tokens), for the cost in the summary and --max-cost.",
    ),
]


def ledger_for(
    *,
    max_planner_calls: int | None,
    max_tokens: int | None,
    max_cost: float | None,
    prices: Path | None,
    models: Iterable[str | None],
    environ: Mapping[str, str],
    spent: Spend | None = None,
) -> Ledger:
    """The ledger a run or a batch counts its spending in, held to the budget given.

    :param models: the models the run or batch will ask for (``None``: the planner's
        default, which ``CODING_AGENT_MODEL`` names); with ``--max-cost`` each must be
        in the price table, so that the cost can be known.
    :raises UsageError: ``--max-cost`` without ``--prices``, a price table that cannot
        be read, or a model it does not price.
    """
    from ..errors import UsageError
    from ..plans.budget import Budget, Ledger, read_prices
    from ..provider import MODEL_ENV

    if max_cost is not None and prices is None:
        raise UsageError(
            "--max-cost needs --prices FILE: the cost of a call is known only from a price table"
        )
    table = read_prices(prices) if prices is not None else None
    if max_cost is not None and table is not None:
        asked = sorted({model or environ.get(MODEL_ENV) or "" for model in models})
        for model in asked:
            if model and model not in table.models:
                raise UsageError(
                    f"--max-cost: the price table {table.source!r} has no price for model "
                    f"{model!r} (it prices {', '.join(map(repr, sorted(table.models)))})"
                )
    budget = Budget(max_planner_calls, max_tokens, max_cost)
    return Ledger(budget, table, spent)

"""Budgets: what a run or a batch may spend on planner calls, and what it spent.

A :class:`Budget` bounds the planner calls, the tokens (prompt and completion) and,
with a price table (:class:`Prices`, ``--prices FILE``), the cost in US dollars. A
:class:`Ledger` keeps what was spent and is asked before every planner call
(:meth:`Ledger.begin_call`): once a bound is reached no further call starts and
:class:`BudgetReached` is raised instead. Calls already waiting on the provider and
sandboxes already testing a plan finish, so tokens and cost may pass their bound by
what those calls use; the number of calls never does.

A batch keeps one ledger and each of its runs a child of it (:meth:`Ledger.child`),
which adds what the run spends to the batch's; ``--resume`` starts the batch's ledger
at what its results already spent, so the resumed batch continues within what is left.
"""

from __future__ import annotations

import math
import threading
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from ..errors import BudgetReached as BudgetReached
from ..errors import UsageError

if TYPE_CHECKING:  # the data model holds a Spend; this module needs only the name
    from .planning import TokenUsage

#: The largest price table read, and the most models it may name.
MAX_PRICES_FILE_BYTES = 1024 * 1024
MAX_PRICED_MODELS = 10_000
#: The highest price per million tokens a table may give (no model costs more).
MAX_PRICE_PER_MTOK = 100_000.0


def _price(_: object, attribute: Any, value: float) -> None:
    if isinstance(value, bool) or not math.isfinite(value) or not 0 <= value <= MAX_PRICE_PER_MTOK:
        raise ValueError(
            f"{attribute.name!r} must be a number of US dollars from 0 to "
            f"{MAX_PRICE_PER_MTOK:,.0f}, not {value!r}"
        )


@attrs.frozen
class ModelPrice:
    """What one model costs, in US dollars per million tokens.

    :ivar input_per_mtok: per million prompt tokens.
    :ivar output_per_mtok: per million completion tokens.
    """

    input_per_mtok: float = attrs.field(converter=float, validator=_price)
    output_per_mtok: float = attrs.field(converter=float, validator=_price)

    def cost(self, usage: TokenUsage) -> float:
        prompt, completion = usage.prompt_tokens or 0, usage.completion_tokens or 0
        return (prompt * self.input_per_mtok + completion * self.output_per_mtok) / 1_000_000


def _frozen(models: Mapping[str, ModelPrice]) -> Mapping[str, ModelPrice]:
    return MappingProxyType(dict(models))


@attrs.frozen
class Prices:
    """A price table: each model's :class:`ModelPrice`, by the name a run asks for it by.

    :ivar source: where it was read (for messages).
    """

    models: Mapping[str, ModelPrice] = attrs.field(factory=dict, converter=_frozen)
    source: str = "the price table"

    def find(self, names: Iterable[str | None]) -> tuple[str, ModelPrice] | None:
        """The first of ``names`` the table prices, with its price."""
        for name in names:
            if name is not None and name in self.models:
                return name, self.models[name]
        return None


def read_prices(path: Path) -> Prices:
    """The price table in a TOML file: a table ``[models."NAME"]`` per model, with
    ``input_per_mtok`` and ``output_per_mtok``, US dollars per million tokens.

    :raises UsageError: the file cannot be read, is not TOML, or is not a price table;
        the message names the file and the model or key at fault.
    """
    name = str(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PRICES_FILE_BYTES + 1)
    except OSError as error:
        raise UsageError(f"cannot read price table {name!r}: {error.strerror}") from None
    if len(data) > MAX_PRICES_FILE_BYTES:
        raise UsageError(f"price table {name!r} is larger than {MAX_PRICES_FILE_BYTES:,} bytes")
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"price table {name!r} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"price table {name!r} is not valid TOML: {error}") from None
    extra = sorted(set(table) - {"models"})
    if extra:
        raise UsageError(
            f'price table {name!r} has {", ".join(map(repr, extra))}; it holds only [models."NAME"]'
        )
    models = table.get("models", {})
    if not isinstance(models, dict) or not models:
        raise UsageError(f'price table {name!r} prices no model; add [models."NAME"] tables')
    if len(models) > MAX_PRICED_MODELS:
        raise UsageError(f"price table {name!r} names more than {MAX_PRICED_MODELS:,} models")
    prices: dict[str, ModelPrice] = {}
    for model, entry in models.items():
        where = f'price table {name!r}, [models."{model}"]'
        if not isinstance(entry, dict):
            raise UsageError(f"{where} is not a table of input_per_mtok and output_per_mtok")
        keys = set(entry)
        wanted = {"input_per_mtok", "output_per_mtok"}
        if keys != wanted:
            missing, unknown = sorted(wanted - keys), sorted(keys - wanted)
            said = [f"lacks {', '.join(missing)}"] if missing else []
            said += [f"has unknown {', '.join(map(repr, unknown))}"] if unknown else []
            raise UsageError(f"{where} {' and '.join(said)}")
        try:
            prices[model] = ModelPrice(**entry)
        except (TypeError, ValueError) as error:
            raise UsageError(f"{where}: {error}") from None
    return Prices(prices, source=name)


def _at_least(low: float) -> Any:
    def check(_: object, attribute: Any, value: float | None) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not math.isfinite(value) or value < low:
            raise ValueError(f"{attribute.name!r} must be at least {low:g}, not {value!r}")

    return check


@attrs.frozen
class Budget:
    """The most a run (or a batch) may spend; ``None`` bounds nothing.

    :ivar max_planner_calls: planner calls (``--max-planner-calls``), counted as each starts.
    :ivar max_tokens: prompt and completion tokens together (``--max-tokens``).
    :ivar max_cost: US dollars, priced by a :class:`Prices` table (``--max-cost``).
    """

    max_planner_calls: int | None = attrs.field(default=None, validator=_at_least(1))
    max_tokens: int | None = attrs.field(default=None, validator=_at_least(1))
    max_cost: float | None = attrs.field(default=None, validator=_at_least(0.0))


@attrs.frozen
class Spend:
    """What planner calls spent: a run's (every attempt of every candidate) or a batch's.

    :ivar planner_calls: calls started, whatever became of them.
    :ivar prompt_tokens: prompt tokens the provider reported.
    :ivar completion_tokens: completion tokens the provider reported.
    :ivar cost: US dollars, for the calls the price table prices; ``None`` without a table.
    :ivar unreported: calls whose tokens the provider did not report (counted as none).
    :ivar unpriced: calls the price table has no price for (counted as costing nothing).
    """

    planner_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    unreported: int = 0
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: Spend) -> Spend:
        cost = (
            None
            if self.cost is None and other.cost is None
            else ((self.cost or 0.0) + (other.cost or 0.0))
        )
        return Spend(
            planner_calls=self.planner_calls + other.planner_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=cost,
            unreported=self.unreported + other.unreported,
            unpriced=self.unpriced + other.unpriced,
        )

    def describe(self) -> str:
        """``3 planner calls, 1,234 prompt + 56 completion tokens, $0.0042``."""
        calls = f"{self.planner_calls:,} planner call{'' if self.planner_calls == 1 else 's'}"
        tokens = f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens"
        said = [calls, tokens]
        if self.cost is not None:
            said.append(f"${self.cost:,.4f}")
        if self.unreported:
            said.append(f"{self.unreported} without token counts")
        if self.unpriced:
            said.append(f"{self.unpriced} unpriced")
        return ", ".join(said)


class Ledger:
    """What a run or a batch spent, and the budget it is held to; safe across threads.

    :param budget: the bounds; held at the top ledger (a child's are its parent's).
    :param prices: how to price a call; ``None``: costs are not known.
    :param spent: what was spent before (a resumed batch's results).
    """

    def __init__(
        self,
        budget: Budget | None = None,
        prices: Prices | None = None,
        spent: Spend | None = None,
        *,
        parent: Ledger | None = None,
    ) -> None:
        self.budget = budget or Budget()
        self.prices = prices
        self.parent = parent
        self._spent = spent or Spend(cost=0.0 if prices is not None else None)
        self._lock: threading.RLock = parent._lock if parent is not None else threading.RLock()

    def child(self) -> Ledger:
        """A ledger for one run of a batch: its own totals, added to this one's too."""
        return Ledger(self.budget, self.prices, parent=self)

    @property
    def spent(self) -> Spend:
        with self._lock:
            return self._spent

    @property
    def root(self) -> Ledger:
        return self if self.parent is None else self.parent.root

    def reached(self, extra: Spend | None = None) -> str | None:
        """Which bound the spending reached, in words; ``None`` while within all of them.

        :param extra: spent besides what the ledger holds (a planner call still under way).
        """
        top = self.root
        budget, spent = top.budget, top.spent
        if extra is not None:
            spent = spent.plus(extra)
        if budget.max_planner_calls is not None and spent.planner_calls >= budget.max_planner_calls:
            return (
                f"{spent.planner_calls:,} of {budget.max_planner_calls:,} planner calls "
                "(--max-planner-calls)"
            )
        if budget.max_tokens is not None and spent.tokens >= budget.max_tokens:
            return f"{spent.tokens:,} of {budget.max_tokens:,} tokens (--max-tokens)"
        if budget.max_cost is not None:
            if spent.unpriced:
                return (
                    f"the cost is not known: a planner call's model has no price in "
                    f"{top.prices.source if top.prices else 'the price table'} (--max-cost)"
                )
            if (spent.cost or 0.0) >= budget.max_cost:
                return f"${spent.cost or 0.0:,.4f} of ${budget.max_cost:,.4f} (--max-cost)"
        return None

    def begin_call(self) -> None:
        """Count a planner call about to start, or refuse it once a bound is reached.

        :raises BudgetReached: a bound is reached; the call is not counted.
        """
        with self._lock:
            reason = self.reached()
            if reason is not None:
                raise BudgetReached(
                    f"the budget is spent: {reason}; no further planner call was made"
                )
            self._add(Spend(planner_calls=1))

    def add_usage(self, usage: TokenUsage | None, models: Iterable[str | None]) -> float | None:
        """Add a finished call's tokens, priced as the first of ``models`` the table knows.

        :returns: the call's cost in US dollars; ``None`` when it is not known.
        """
        with self._lock:
            if usage is None:
                self._add(Spend(unreported=1))
                return None
            cost: float | None = None
            unpriced = 0
            if self.prices is not None:
                found = self.prices.find(models)
                if found is None:
                    unpriced = 1
                else:
                    cost = found[1].cost(usage)
            self._add(
                Spend(
                    prompt_tokens=usage.prompt_tokens or 0,
                    completion_tokens=usage.completion_tokens or 0,
                    cost=cost,
                    unpriced=unpriced,
                )
            )
            return cost

    def add(self, spend: Spend) -> None:
        """Add what was spent elsewhere (a batch's task run on another machine)."""
        with self._lock:
            self._add(spend)

    def _add(self, spend: Spend) -> None:
        ledger: Ledger | None = self
        while ledger is not None:
            ledger._spent = ledger._spent.plus(spend)
            ledger = ledger.parent

"""What the orchestration gives a planner that explores, besides its request and session.

A :class:`~sandboxed_coding_agent.core.protocols.SessionPlanner` makes many provider
calls in one planner call. It keeps each step in the call's trajectory as it is
made (:meth:`Journal.keep`), and asks before each provider call whether the run's
budget allows it (:meth:`Journal.budget_reached`), counting what the call has
spent so far.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable, Mapping

from ..errors import AgentWarning
from ..model import SandboxJob, SandboxOutcome, SeedProject, TokenUsage
from ..plans.budget import Ledger, Spend
from ..protocols import Runner
from ..records import trajectories
from ..records.trajectories import TrajectoryStep
from .sessions import Session

Slot = Callable[[], contextlib.AbstractContextManager[None]]


def open_session(runner: Runner, seed: SeedProject, slot: Slot) -> Session:
    """A session on ``seed`` in ``runner``, each command holding a ``slot`` of the run's
    sandboxes while it runs (so a session's commands count among ``--jobs``, and stop
    when the run stops). A command may run as long as the seed's test may."""
    return Session(_Slotted(runner, slot), seed, command_seconds=seed.limits.test_timeout_seconds)


class _Slotted:
    """``runner``, each of whose sandboxes holds a slot."""

    def __init__(self, runner: Runner, slot: Slot) -> None:
        self.runner = runner
        self.slot = slot
        self.name = runner.name
        self.description = runner.description

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        with self.slot():
            return self.runner.run_test(job)


class Journal:
    """Where a planner that explores keeps its steps, and asks about the run's budget.

    :param ledger: the run's ledger (what was spent before this call).
    :param models: the names a call is priced by (the model asked for, first).
    :param run_id: the recorded run the call is part of, which notes the call as its
        first step is kept (so ``agent logs RUN_ID`` finds the steps of a killed run).
    """

    def __init__(
        self,
        ledger: Ledger | None = None,
        models: Iterable[str | None] = (),
        environ: Mapping[str, str] = os.environ,
        run_id: str | None = None,
    ) -> None:
        self.ledger = ledger or Ledger()
        self.models = tuple(models)
        self.environ = environ
        self.run_id = run_id
        self._noted: set[str] = set()
        self._warned = False

    def keep(self, task_id: str, step: TrajectoryStep) -> None:
        """Append ``step`` to the trajectory of planner task ``task_id``; a step that
        cannot be written is one warning for the call, and the run goes on."""
        try:
            if self.run_id is not None and task_id not in self._noted:
                trajectories.note_call(self.run_id, task_id, self.environ)
                self._noted.add(task_id)
            trajectories.append_step(task_id, step, self.environ)
        except (OSError, ValueError) as problem:
            if not self._warned:
                self._warned = True
                reason = getattr(problem, "strerror", None) or str(problem)
                warnings.warn(
                    f"the steps of planner task {task_id} could not be kept ({reason}); "
                    "`agent logs` will not show them",
                    AgentWarning,
                    stacklevel=2,
                )

    def budget_reached(self, usage: TokenUsage | None, model: str | None = None) -> str | None:
        """Which bound of the run's budget is reached once ``usage`` (what the call has
        spent so far) is counted, in words; ``None`` while within all of them."""
        prompt = usage.prompt_tokens or 0 if usage else 0
        completion = usage.completion_tokens or 0 if usage else 0
        cost: float | None = None
        unpriced = 0
        prices = self.ledger.root.prices
        if prices is not None and usage is not None:
            found = prices.find((*self.models, model))
            if found is None:
                unpriced = 1
            else:
                cost = found[1].cost(usage)
        extra = Spend(
            prompt_tokens=prompt, completion_tokens=completion, cost=cost, unpriced=unpriced
        )
        return self.ledger.reached(extra)


__all__ = ["Journal", "TrajectoryStep", "open_session"]

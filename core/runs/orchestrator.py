"""One run: plan (or take a given plan), check it with every policy, test it in a sandbox.

The seed's files are read once into memory and never written: the runner gets
a copy with the replacement applied. A run may make several attempts (each
after the first told what became of the one before) and several independent
candidates at once (each in a thread, its sandbox among at most ``jobs``).

:func:`run` is the whole of it; the parts are modules of their own, and their
names are importable from here too: :mod:`.policy_checks` (a plan put to every
policy), :mod:`.diffs` (what a plan changes), :mod:`.plan_requests` (what the
planner is sent, feedback included) and :mod:`.search` (the candidates and their
attempts, and the one chosen).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence

import attrs

from ..errors import AgentError, UsageError
from ..model import Attempt, PatchPlan, PlannerOptions, RunResult, SeedLimits, SeedProject
from ..plans.budget import Ledger
from ..plans.context import planner_context
from ..plans.diffs import unified_diff
from ..plans.plan_requests import (
    HIDDEN_TEST_FAILED,
    OUTPUT_WITHHELD,
    feedback_on,
    plan_request,
    prompt_summary,
)
from ..plans.policy_checks import check_plan
from ..protocols import PatchPolicy, Planner, Runner
from .attempts import Progress, Sandboxes, Search, choose
from .events import Emit, no_events
from .task_pool import StopRequest

__all__ = [
    "HIDDEN_TEST_FAILED",
    "OUTPUT_WITHHELD",
    "Progress",
    "check_plan",
    "choose",
    "feedback_on",
    "plan_request",
    "prompt_summary",
    "run",
    "unified_diff",
]


def _silent(_: str) -> None:
    pass


def run(
    seed: SeedProject,
    *,
    runner: Runner,
    policies: Sequence[PatchPolicy],
    planner: Planner | None = None,
    plan: PatchPlan | None = None,
    instruction: str | None = None,
    planner_options: PlannerOptions | None = None,
    progress: Progress = _silent,
    limits: SeedLimits | None = None,
    attempts: int = 1,
    candidates: int = 1,
    jobs: int | None = None,
    first_pass: bool = False,
    environ: Mapping[str, str] = os.environ,
    ledger: Ledger | None = None,
    stop: StopRequest | None = None,
    events: Emit | None = None,
    made: dict[int, list[Attempt]] | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Plan with ``planner`` (or use ``plan``), check it, and test it in a fresh sandbox.

    ``limits`` replaces the seed's limits for this run (for example
    ``attrs.evolve(seed.limits, memory_mb=1024)``).

    Every planner call is recorded for ``agent logs`` (see
    :func:`~sandboxed_coding_agent.core.records.call_planner`) in the state
    directory ``environ`` names (``XDG_STATE_HOME``, ``HOME``), with the key it
    holds blanked.

    With ``attempts`` above 1, a plan whose test fails or that a policy refuses is
    followed by another planner call whose request carries :class:`Feedback` on it,
    until one passes or ``attempts`` were made. With ``candidates`` above 1, that
    many such tries run at once, in threads, with at most ``jobs`` sandboxes at a
    time (default: the CPU count; planner calls, which wait on the network, are not
    bounded); ``first_pass`` stops the others (their sandboxes are terminated, their
    planner calls abandoned) as soon as one passes.

    ``ledger`` counts what the planner calls spend (every attempt of every candidate,
    in the result's ``spend``) and holds them to its budget: before each call, a budget
    reached stops that candidate (its running sandboxes finish), and a run in which
    nothing passed then ends in :class:`~.budget.BudgetReached`. Default: a ledger of
    this run alone, with no budget.

    ``stop`` is a stop request the run listens to (a batch's, on Ctrl-C or SIGTERM):
    once it is made, the run starts no planner call, attempt or sandbox, its running
    sandboxes are stopped (with a :class:`~.protocols.StoppableRunner`; another
    runner's test runs to its end), and unless an attempt passed it ends in
    :class:`~.errors.Interrupted`.

    ``events`` receives the run's events (a plan received, a policy's verdict, a
    sandbox started and ended, an attempt done; see :mod:`~.events`).

    ``made``, when given, is filled as the run goes with every attempt of every
    candidate (by candidate number), those refused before any sandbox included, whatever
    the run ends in: what its record keeps.

    ``run_id`` names the recorded run this is: a planner that explores notes its calls
    under it as it keeps their steps, so they are found by it before its record is.

    :raises BudgetReached: a budget was reached and no attempt passed; the error's
        ``attempts`` (and ``candidates``) hold what was made before it.
    :raises ProviderError: a planner call failed; no further sandbox is created, and
        the error's ``attempts`` (and ``candidates``) hold what was made before it.
    :raises PlanRejected: no plan of the chosen candidate reached a sandbox: the last
        one was refused.
    :raises SandboxError: a sandbox failed for a reason other than the test.
    """
    if (planner is None) == (plan is None):
        raise ValueError("give exactly one of planner and plan")
    if attempts < 1 or candidates < 1:
        raise ValueError("attempts and candidates are at least 1")
    if plan is not None and (attempts > 1 or candidates > 1):
        raise UsageError(
            "--attempts and --candidates need a planner: a plan file is the same plan every time"
        )
    options = planner_options or PlannerOptions()
    if plan is not None and options.model is not None:
        raise UsageError("--model needs a planner: a plan file names no model")
    if limits is not None:
        seed = attrs.evolve(seed, limits=limits)
    files = seed.read_files()
    context = None
    if planner is not None:  # chosen once: every attempt and candidate is shown the same
        context = planner_context(seed, files, environ=environ, progress=progress)
        if context.repository_map is not None:
            progress(context.describe())
    ledger = ledger or Ledger()
    search = Search(
        seed=seed,
        runner=runner,
        policies=tuple(policies),
        planner=planner,
        plan=plan,
        instruction=instruction or seed.default_prompt,
        files=files,
        context=context,
        options=options,
        progress=progress,
        attempts=attempts,
        parallel=candidates > 1,
        first_pass=first_pass,
        sandboxes=Sandboxes(jobs or os.cpu_count() or 1),
        environ=environ,
        ledger=ledger,
        interrupt=stop,
        emit=events or no_events,
        made={} if made is None else made,
        run_id=run_id,
    )
    listening = stop.listen(search.sandboxes.stop) if stop is not None else contextlib.nullcontext()
    try:
        with listening:
            # One candidate runs in this thread, so that Ctrl-C reaches its sandbox as always.
            found = search.in_parallel(candidates) if candidates > 1 else [search.candidate(1)]
        result = search.result(found)
    except AgentError as error:
        error.spend = ledger.spent if planner is not None else None
        raise
    if planner is None:
        result = attrs.evolve(result, spend=None)  # a plan file costs nothing to count
    return attrs.evolve(result, requested_model=options.model)

"""The errors a run can end in, each carrying what the user needs to act on it.

The CLI maps each kind to one documented exit code (see :data:`EXIT_CODES`);
nothing else in the project decides exit codes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs


@attrs.frozen
class Rejection:
    """One reason a policy gives for refusing a plan.

    :ivar policy: name of the policy that refused it.
    :ivar rule: short, stable name of the rule that was broken.
    :ivar message: what is wrong, for a person.
    :ivar path: the plan file concerned, or ``None`` when the rule is about the whole plan.
    """

    policy: str
    rule: str
    message: str
    path: str | None = None

    def describe(self) -> str:
        where = f" ({self.path})" if self.path is not None else ""
        return f"[{self.policy}:{self.rule}]{where} {self.message}"


class AgentError(Exception):
    """Base of every error the agent reports to its user instead of a traceback.

    :ivar attempts: when a run with ``--attempts`` or ``--candidates`` ends in this
        error, the :class:`~sandboxed_coding_agent.core.model.Attempt` objects its
        candidate made before it; empty otherwise.
    :ivar candidates: likewise, every :class:`~sandboxed_coding_agent.core.model.Candidate`
        of a run with ``--candidates`` above 1, as far as each got.
    :ivar details: for an error a planner raises, what it adds to the record of its
        call (``agent logs TASK_ID``), as
        :attr:`PlannerResult.details <sandboxed_coding_agent.core.model.PlannerResult.details>`
        does for a plan: a JSON object, such as each attempt's status and timing.
    """

    kind = "internal"
    attempts: tuple[Any, ...] = ()
    candidates: tuple[Any, ...] = ()
    #: What the run's planner calls spent before the error (a
    #: :class:`~sandboxed_coding_agent.core.plans.budget.Spend`); ``None`` when not known.
    spend: Any = None
    #: The tokens of the planner call the error ended, when the provider reported them
    #: (a :class:`~sandboxed_coding_agent.core.model.TokenUsage`), so a budget counts them.
    usage: Any = None

    def __init__(
        self,
        message: str,
        *,
        planner_task_id: str | None = None,
        sandbox_id: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.planner_task_id = planner_task_id
        self.sandbox_id = sandbox_id
        self.details: dict[str, Any] = dict(details or {})


class UsageError(AgentError):
    """The command line, a file it names, or the configuration is wrong."""

    kind = "usage"


class ConfigurationError(UsageError):
    """A setting (usually an environment variable) is missing or invalid."""

    kind = "configuration"


class ProviderError(AgentError):
    """The model provider could not be reached or gave an unusable answer."""

    kind = "provider"


class RemoteError(AgentError):
    """A remote service the agent drives for the user (LazyCloud's control plane, say) could
    not be reached or refused an operation outside a run: a deploy, a listing, a secret.

    Within a run, a planner's remote failure is a :class:`ProviderError` and a runner's a
    :class:`SandboxError`, as any other failure of theirs.
    """

    kind = "remote"


class PlanRejected(AgentError):
    """One or more policies refused the plan; every reason is kept.

    :ivar answer: for a planner's answer it refused itself, that answer as its backend
        wrote it (see :attr:`PlannerResult.answer
        <sandboxed_coding_agent.core.model.PlannerResult.answer>`), so that the repair
        attempt's conversation can show the model what it said; ``None`` otherwise.
    """

    kind = "policy"

    def __init__(
        self,
        rejections: Sequence[Rejection],
        *,
        planner_task_id: str | None = None,
        details: Mapping[str, Any] | None = None,
        answer: str | None = None,
    ) -> None:
        self.rejections = tuple(rejections)
        self.answer = answer
        lines = "\n".join(f"  {r.describe()}" for r in self.rejections)
        count = len(self.rejections)
        noun = "reason" if count == 1 else "reasons"
        super().__init__(
            f"the plan was rejected ({count} {noun}):\n{lines}",
            planner_task_id=planner_task_id,
            details=details,
        )


class SandboxError(AgentError):
    """The sandbox could not be created or failed for a reason other than the test."""

    kind = "sandbox"


class BudgetReached(AgentError):
    """A budget (``--max-planner-calls``, ``--max-tokens``, ``--max-cost``) was reached
    before the run passed: no further planner call was made.

    Its ``attempts`` and ``candidates`` hold what the run made before, as for any
    error of a run with ``--attempts`` or ``--candidates``; ``spend`` what it spent.
    The budgets are in ``sandboxed_coding_agent.core.plans.budget``.
    """

    kind = "budget"


class StepsSpent(AgentError):
    """A planner that explores (``--planner explore``) made its last step (``--max-steps``)
    without submitting a change; its steps are kept for ``agent logs``."""

    kind = "steps"


class FormatErrors(AgentError):
    """A planner that explores stopped because the model answered three times in a row
    with no usable function call (none, an unknown function, or arguments that are not
    the function's JSON)."""

    kind = "format"


class Interrupted(AgentError):
    """The user stopped the run (Ctrl-C or SIGTERM); every sandbox was terminated first."""

    kind = "interrupted"


class AgentWarning(UserWarning):
    """Something the user should know that does not stop the run (a record not kept, say).

    Plugins issue it with :func:`warnings.warn`; the CLI prints each one once, on
    stderr, so it never mixes with the JSON on stdout.
    """


#: Exit codes of the ``agent`` command, by error kind. 0 and 1 are the test's verdict.
EXIT_TESTS_PASSED = 0
EXIT_TESTS_FAILED = 1
#: The reader of stdout (or stderr) went away before everything was written (``agent ... |
#: head``): the command stops quietly with the status a shell shows for a tool SIGPIPE ended.
EXIT_OUTPUT_CLOSED = 141
EXIT_CODES: dict[str, int] = {
    "usage": 2,
    "configuration": 2,
    "provider": 3,
    "remote": 3,
    "policy": 4,
    "sandbox": 5,
    "budget": 6,
    "steps": 7,
    "format": 7,
    "internal": 70,
    "interrupted": 130,
}

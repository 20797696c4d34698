"""What a plugin's planner, policy, runner and check objects look like.

These are structural types: any object with these attributes and methods
works; there is nothing to inherit from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from .errors import Rejection
from .model import (
    Finding,
    PatchPlan,
    PlannerResult,
    PlanRequest,
    SandboxJob,
    SandboxOutcome,
    SeedProject,
)


@runtime_checkable
class Planner(Protocol):
    """Asks a model (or anything else) for a plan.

    ``plan`` must give every call a new planner task ID, put it in the result
    and in every :class:`~sandboxed_coding_agent.core.errors.ProviderError` it
    raises, and check its plan with
    :func:`sandboxed_coding_agent.core.contract.validate_plan` before returning.
    It may do its work in another process or on another machine: the request
    and the result are plain data.
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def plan(self, request: PlanRequest) -> PlannerResult: ...


@runtime_checkable
class PatchPolicy(Protocol):
    """Decides whether a plan may be tested.

    ``check`` returns (or yields) one :class:`Rejection` per reason to refuse
    the plan and nothing if the plan is acceptable. Every active policy is
    asked, and all their reasons are reported together. It must not change
    anything, and must not raise for a bad plan: a bad plan is a rejection
    (a policy that raises rejects the plan with rule ``policy-failed``).
    Give your rejections ``policy=self.name`` and a short, stable ``rule``.

    ``activation`` says when the policy runs:

    * ``"always"``: on every plan; nobody can switch it off (the patch contract).
    * ``"on"``: unless the user passes ``--no-policy NAME``.
    * ``"off"``: only when the seed switches it on (its ``policies``, in
      ``seed.toml`` a ``[policies.NAME]`` table) or the user passes ``--policy NAME``.

    A user's ``--no-policy NAME`` also wins over a seed that switches the policy on.

    ``configure`` receives the parameters a seed gives the policy (the keys of
    its ``[policies.NAME]`` table, as TOML values) and returns the policy to use
    for that seed; the registered object itself is left as it is. It is called
    only when there are parameters, before any plan is checked. Raise
    :class:`ValueError` or :class:`TypeError` naming the bad parameter and the
    user sees your message; a policy with no parameters simply raises.
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def activation(self) -> str: ...

    def configure(self, parameters: Mapping[str, Any]) -> PatchPolicy: ...

    def check(self, plan: PatchPlan, seed: SeedProject) -> Iterable[Rejection]: ...


@runtime_checkable
class Runner(Protocol):
    """Runs a seed's test on patched files in a sandbox, and terminates the sandbox.

    ``run_test`` must create a new sandbox holding only ``job.files``, run
    ``job.test_command`` in it within ``job.timeout_seconds``, and terminate
    the sandbox before returning or raising, whatever happened. A test that
    fails or times out is a normal outcome; a sandbox that cannot be created
    or fails for its own reasons raises
    :class:`~sandboxed_coding_agent.core.errors.SandboxError` with its ID.
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def run_test(self, job: SandboxJob) -> SandboxOutcome: ...


@runtime_checkable
class PreparingRunner(Protocol):
    """A runner that also has slow, one-time work to do before a sandbox starts.

    If a runner has ``prepare``, the orchestrator calls it before ``run_test``,
    outside any sandbox, with the run's ``progress`` callback (one line of text
    per call), for work such as building ``job.runtime`` with network access.
    ``run_test`` must still work without it (preparing then, silently). It
    raises :class:`~sandboxed_coding_agent.core.errors.SandboxError` when the
    preparation fails.
    """

    def prepare(self, job: SandboxJob, progress: Callable[[str], None]) -> None: ...


@runtime_checkable
class Check(Protocol):
    """Checks, for ``agent doctor``, something a plugin needs on this machine.

    ``run`` returns (or yields) one
    :class:`~sandboxed_coding_agent.core.model.Finding` per item it checks: OK,
    or what is wrong and the fix. It should try the thing for real (start a
    process, import a module) rather than guess, take a few seconds at most,
    never show a secret, and not raise for a problem it finds: a problem is a
    finding (a check that raises becomes a failed item naming its plugin).
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def run(self) -> Iterable[Finding]: ...

"""Replay: re-test a run record's plans in fresh sandboxes, without any provider.

Each recorded test is run again as ``agent run --plan`` would run it: checked by
the patch contract and the record's policies, then tested in a new sandbox
with the limits it had. Its verdict (passed or not) is compared with the
recorded one. The seed must still hold the content it had (same hash) unless
the caller forces a replay against changed files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from . import orchestrator, run_records
from .errors import PlanRejected, UsageError
from .model import SeedProject
from .plugins import PluginHost
from .protocols import PatchPolicy, Runner
from .run_records import RunRecord, seed_hash


@attrs.frozen
class ReplayedTest:
    """One recorded test, run again.

    :ivar number: its place in the record's tests, from 1.
    :ivar paths: the files its plan replaces.
    :ivar recorded_passed: whether it passed when recorded.
    :ivar passed: whether it passed now; ``None`` when a policy now refuses the plan.
    :ivar sandbox_id: the new sandbox, when one ran.
    :ivar test_exit_code: the test's exit code now.
    :ivar problem: why it was not tested now (the rejections).
    :ivar chosen: whether the run's verdict rested on it.
    """

    number: int
    paths: tuple[str, ...]
    recorded_passed: bool
    passed: bool | None
    sandbox_id: str | None = None
    test_exit_code: int | None = None
    problem: str | None = None
    chosen: bool = False

    @property
    def matches(self) -> bool:
        return self.passed is not None and self.passed == self.recorded_passed


def replay_seed(host: PluginHost, record: RunRecord, seed: str | None, force: bool) -> SeedProject:
    """The seed to replay ``record`` on: ``seed`` if given, else the recorded one (by name
    when a plugin provides it, otherwise the folder it was read from).

    :raises UsageError: its files differ from the recorded ones and ``force`` is not set.
    """
    project = recorded_seed(host, record, seed)
    found = seed_hash(project.read_files())
    # A record without a hash cannot show that the seed is unchanged, so it counts as changed.
    if found != record.seed.sha256 and not force:
        recorded = (
            f"the record's to {record.seed.sha256[:12]}..."
            if record.seed.sha256 is not None
            else "the record holds no hash of them"
        )
        raise UsageError(
            f"seed {project.name!r} ({project.root}) has changed since run {record.run_id}: "
            f"its files hash to {found[:12]}..., {recorded}; "
            "a replay would not test what was recorded (--force replays it anyway)"
        )
    return project


def recorded_seed(host: PluginHost, record: RunRecord, seed: str | None = None) -> SeedProject:
    """``seed`` if given, else the seed ``record`` was run on: by name when a plugin
    provides it, otherwise the folder it was read from.

    :raises UsageError: there is no such seed.
    """
    if seed is not None:
        return host.seed(seed)
    if record.seed.name in host.seeds:
        return host.seed(record.seed.name)
    return host.seed(record.seed.root)


def replay_policies(host: PluginHost, record: RunRecord, seed: SeedProject) -> list[PatchPolicy]:
    """Every policy a run on ``seed`` would apply today (``always`` and ``on`` ones, and
    those the seed switches on, with its parameters), and each recorded policy as well,
    with its recorded parameters: a record can add checks, never take one away.

    :raises UsageError: a recorded policy is not installed, or does not take its
        recorded parameters.
    """
    today = host.policies_for(seed)
    applied = {(a.name, _canonical(a.parameters)) for a in map(run_records.applied, today)}
    chosen = list(today)
    for recorded in record.policies:
        if (recorded.name, _canonical(recorded.parameters)) in applied:
            continue
        chosen.append(_rebuilt(host.policy(recorded.name), recorded.parameters, record.run_id))
        applied.add((recorded.name, _canonical(recorded.parameters)))
    return chosen


def _canonical(parameters: Mapping[str, Any]) -> str:
    return json.dumps(parameters, sort_keys=True)


def _rebuilt(policy: PatchPolicy, parameters: Mapping[str, Any], run_id: str) -> PatchPolicy:
    """``policy`` with the field values the record kept (JSON arrays back as tuples)."""
    if not parameters:
        return policy
    problem = "it keeps no fields"
    if attrs.has(type(policy)):
        try:
            return attrs.evolve(  # type: ignore[misc]
                policy, **{key: _tuples(value) for key, value in parameters.items()}
            )
        except (TypeError, ValueError) as error:
            problem = str(error)
    raise UsageError(
        f"run {run_id} recorded policy {policy.name!r} with parameters it does not take ({problem})"
    )


def _tuples(value: object) -> object:
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    return value


def replay(
    record: RunRecord,
    seed: SeedProject,
    *,
    runner: Runner,
    policies: Sequence[PatchPolicy],
    progress: Callable[[str], None],
) -> list[ReplayedTest]:
    """Re-test every recorded test's plan; one :class:`ReplayedTest` each, in order.

    :raises UsageError: the record holds no test.
    :raises SandboxError: a sandbox failed for a reason other than the test.
    """
    if not record.tests:
        problem = f"it ended in a {record.error.kind} error" if record.error else "none ran"
        raise UsageError(
            f"run {record.run_id} tested no plan, so there is nothing to replay: {problem}"
        )
    replayed: list[ReplayedTest] = []
    for number, test in enumerate(record.tests, start=1):
        progress(f"replaying test {number} of {len(record.tests)}: {', '.join(test.plan.paths)}")
        recorded_passed, chosen = test.outcome.tests_passed, record.chosen_test == number - 1
        try:
            result = orchestrator.run(
                seed,
                runner=runner,
                policies=policies,
                plan=test.plan,
                instruction=record.instruction,
                limits=test.limits,
                progress=progress,
            )
        except PlanRejected as rejected:
            replayed.append(
                ReplayedTest(
                    number, test.plan.paths, recorded_passed, None,
                    problem=rejected.message, chosen=chosen,
                )
            )  # fmt: skip
            continue
        replayed.append(
            ReplayedTest(
                number,
                test.plan.paths,
                recorded_passed,
                result.tests_passed,
                sandbox_id=result.sandbox_id,
                test_exit_code=result.test_exit_code,
                chosen=chosen,
            )
        )
    return replayed

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

from ..errors import PlanRejected, UsageError
from ..model import SeedProject
from ..plugins import PluginHost, declared_parameters
from ..protocols import PatchPolicy, Runner
from ..records.run_records import RunRecord, seed_hash
from ..seeds.git_source import SourceTree
from ..verdicts.grading import Grade
from . import orchestrator, recording


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
    :ivar recorded_grade: for a graded seed, its grade when recorded.
    :ivar grade: its grade now.
    :ivar candidate: the candidate it tested a plan of, when the record's result says.
    :ivar attempt: that candidate's attempt, when the record's result says.
    """

    number: int
    paths: tuple[str, ...]
    recorded_passed: bool
    passed: bool | None
    sandbox_id: str | None = None
    test_exit_code: int | None = None
    problem: str | None = None
    chosen: bool = False
    recorded_grade: Grade | None = None
    grade: Grade | None = None
    candidate: int | None = None
    attempt: int | None = None

    @property
    def matches(self) -> bool:
        """The same verdict, and for a graded seed the same resolution from the same tests."""
        if self.passed is None or self.passed != self.recorded_passed:
            return False
        if self.recorded_grade is None:
            return self.grade is None
        return self.recorded_grade.agrees_with(self.grade)


def replay_seed(host: PluginHost, record: RunRecord, seed: str | None, force: bool) -> SeedProject:
    """The seed to replay ``record`` on: ``seed`` if given, else the recorded one (by name
    when a plugin provides it, otherwise the folder it was read from).

    :raises UsageError: its files differ from the recorded ones and ``force`` is not set.
    """
    project = recorded_seed(host, record, seed)
    if project.source != record.seed.source and not force:
        raise UsageError(
            f"seed {project.name!r} ({project.root}) now names {_tree(project.source)}, and "
            f"run {record.run_id} was made at {_tree(record.seed.source)}; "
            "a replay would not test what was recorded (--force replays it anyway)"
        )
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


def _tree(source: SourceTree | None) -> str:
    if source is None:
        return "no git commit (a folder seed)"
    return f"commit {source.commit} of {source.repository}"


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
    configured as the run configured it: a record can add checks, never take one away.

    :raises UsageError: a recorded policy is not installed, is recorded twice, or its
        recorded fields do not pass the checks a seed's parameters for it would (see
        :func:`_rebuilt`).
    """
    today = host.policies_for(seed)
    applied = {(a.name, _canonical(a.parameters)) for a in map(recording.applied, today)}
    chosen = list(today)
    recorded_names: set[str] = set()
    for recorded in record.policies:
        policy = host.policy(recorded.name)
        # A run applies each installed policy once: more would only make every check slower.
        if recorded.name in recorded_names:
            raise UsageError(
                f"run {record.run_id} recorded policy {recorded.name!r} twice; "
                "a run applies each policy once"
            )
        recorded_names.add(recorded.name)
        if (recorded.name, _canonical(recorded.parameters)) not in applied:
            chosen.append(_rebuilt(host, policy, recorded.parameters, record.run_id))
    return chosen


def _canonical(parameters: object) -> str:
    return json.dumps(parameters, sort_keys=True)


#: What every policy has and a record leaves out (see :func:`.recording.applied`).
_NOT_RECORDED = frozenset({"name", "description", "activation"})
#: Fields a built-in policy keeps under another name than the parameter that sets them:
#: python-ast keeps the names its ``forbid`` parameter gives as ``forbidden`` (``also_forbid``
#: and ``allow`` only change that list, so ``forbid`` alone gives it back).
_PARAMETER_OF_FIELD: Mapping[str, Mapping[str, str]] = {"python-ast": {"forbidden": "forbid"}}
_SHOWN_CHARS = 80


def _rebuilt(
    host: PluginHost, policy: PatchPolicy, fields: Mapping[str, Any], run_id: str
) -> PatchPolicy:
    """``policy`` configured with what the record kept, through the checks a seed's
    ``[policies.NAME]`` table goes through: the declared parameters' types, then
    ``configure()``. Anyone can hand over a record, so it is trusted no further than a seed.

    A record keeps a policy's fields (what ``configure()`` made of its parameters), so each
    field is given as the parameter of its name (python-ast's ``forbidden`` as ``forbid``);
    a field no parameter sets must hold the policy's own value. The configured policy must
    then have every recorded field, or the replay would not check what the run checked.

    :raises UsageError: one line naming the run, the policy and the problem.
    """
    if not fields:
        return policy

    def refuse(problem: str) -> UsageError:
        return UsageError(
            f"run {run_id} recorded policy {policy.name!r} with parameters it does not take "
            f"({problem})"
        )

    if not attrs.has(type(policy)):
        raise refuse("it keeps no fields")
    all_fields = attrs.fields(type(policy))  # type: ignore[arg-type]
    known = {field.name for field in all_fields} - _NOT_RECORDED
    own = recording.applied(policy).parameters
    declared = declared_parameters(policy)
    takes = None if declared is None else {parameter.name for parameter in declared}
    renamed = _PARAMETER_OF_FIELD.get(policy.name, {})
    parameters: dict[str, Any] = {}
    for key, value in fields.items():
        if key not in known:
            raise refuse(f"it has no field {_shown(key)}")
        parameter = renamed.get(key, key)
        if takes is not None and parameter not in takes:
            if _canonical(value) == _canonical(own.get(key)):
                continue  # its own value: nothing to configure
            raise refuse(f"its field {key!r} differs from its own, and no parameter sets it")
        if takes is None and _canonical(value) == _canonical(own.get(key)):
            continue  # undeclared parameters: configure() sees only what the run changed
        if parameter in parameters:
            raise refuse(f"two of its fields would both be its parameter {parameter!r}")
        parameters[parameter] = value
    try:
        configured = host._configured(policy, parameters)
    except UsageError as error:
        problem = _problem(error.message, policy.name)
        for key, parameter in renamed.items():
            if key in fields and parameter in problem:
                problem += f"; the record's field {key!r} is its parameter {parameter!r}"
        raise refuse(problem) from None
    kept = recording.applied(configured).parameters
    for key, value in fields.items():
        if key not in kept or _canonical(kept[key]) != _canonical(value):
            raise refuse(
                f"its parameters do not give back the recorded field {key!r}, so a replay "
                "would not check what the run checked"
            )
    return configured


def _problem(message: str, name: str) -> str:
    """A message of the seed's checks, without the policy's name the caller gives first."""
    for prefix in (f"policy {name!r} refused its parameters: ", f"policy {name!r}: "):
        if message.startswith(prefix):
            return message.removeprefix(prefix)
    if message.startswith(f"policy {name!r} "):
        # "has no parameter ...", "needs parameter ...; give it in the seed's ...".
        return "it " + message.removeprefix(f"policy {name!r} ").split("; give it in ")[0]
    return message


def _shown(text: str) -> str:
    """A key from the record, quoted and bounded for a one-line message."""
    return repr(text[:_SHOWN_CHARS]) + ("..." if len(text) > _SHOWN_CHARS else "")


def replay(
    record: RunRecord,
    seed: SeedProject,
    *,
    runner: Runner,
    policies: Sequence[PatchPolicy],
    progress: Callable[[str], None],
) -> list[ReplayedTest]:
    """Re-test every recorded test's plan; one :class:`ReplayedTest` each.

    In the order of candidates and their attempts when the record's result says which
    test was which (the sandboxes of parallel candidates end in any order), else in
    the order the tests ended.

    :raises UsageError: the record holds no test.
    :raises SandboxError: a sandbox failed for a reason other than the test.
    """
    if not record.tests:
        problem = f"it ended in a {record.error.kind} error" if record.error else "none ran"
        raise UsageError(
            f"run {record.run_id} tested no plan, so there is nothing to replay: {problem}"
        )
    replayed: list[ReplayedTest] = []
    places = _places(record)
    order = sorted(
        range(len(record.tests)),
        key=lambda index: tuple(
            number or 0 for number in places.get(record.tests[index].outcome.sandbox_id, (0, 0))
        ),
    )
    for number, index in enumerate(order, start=1):
        test = record.tests[index]
        candidate, attempt = places.get(test.outcome.sandbox_id, (None, None))
        progress(f"replaying test {number} of {len(record.tests)}: {', '.join(test.plan.paths)}")
        recorded_passed, chosen = test.outcome.tests_passed, record.chosen_test == index
        recorded_grade = test.outcome.grade
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
                    problem=rejected.message, chosen=chosen, recorded_grade=recorded_grade,
                    candidate=candidate, attempt=attempt,
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
                recorded_grade=recorded_grade,
                grade=result.grade,
                candidate=candidate,
                attempt=attempt,
            )
        )
    return replayed


def _places(record: RunRecord) -> dict[str, tuple[int | None, int | None]]:
    """Each recorded sandbox's candidate and attempt, as the record's result gives them:
    ``(None, attempt)`` for a run of one candidate; empty without a result, or for a
    run of one attempt (there is nothing to tell apart)."""
    result = record.result
    if result is None or (not result.candidates and len(result.attempts) < 2):
        return {}
    if result.candidates:
        return {
            attempt.sandbox_id: (candidate.number, attempt.number)
            for candidate in result.candidates
            for attempt in candidate.attempts
            if attempt.sandbox_id
        }
    return {a.sandbox_id: (None, a.number) for a in result.attempts if a.sandbox_id}

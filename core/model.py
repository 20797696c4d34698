"""The data every part of a run exchanges: plans, seeds, jobs and results.

All of it is attrs classes, frozen and validated at construction, and all of it
(except :class:`SeedProject`, which names local files) round-trips through the
cattrs converter in :mod:`sandboxed_coding_agent.core.serialization`, so a
planner or a runner may live in another process or on another machine.

The seeds (:class:`SeedProject`, :class:`SeedLimits`, :class:`SeedRuntime` and
their constants) are defined in :mod:`sandboxed_coding_agent.core.seeds` and
importable from here, as every other name of the data model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs
from attrs import validators as v

from .budget import Spend
from .errors import Rejection
from .evidence import TestHarness, TestReport
from .git_source import SourceTree
from .grading import Grade
from .seeds import ALWAYS_TEST_PATHS as ALWAYS_TEST_PATHS
from .seeds import LIMIT_CEILINGS as LIMIT_CEILINGS
from .seeds import LimitError as LimitError
from .seeds import SeedLimits as SeedLimits
from .seeds import SeedProject as SeedProject
from .seeds import SeedRuntime as SeedRuntime
from .seeds import _as_tuple


def _frozen_mapping(value: Mapping[str, bytes]) -> Mapping[str, bytes]:
    return MappingProxyType(dict(value))


@attrs.frozen
class PatchFile:
    """One complete replacement of a file of the seed project.

    :ivar path: the file's path relative to the project root, ``/``-separated.
    :ivar content: the file's whole new text.
    """

    path: str = attrs.field(validator=v.instance_of(str))
    content: str = attrs.field(validator=v.instance_of(str))


def _as_files(files: Iterable[PatchFile]) -> tuple[PatchFile, ...]:
    # A typed converter, so that mypy --strict accepts PatchPlan([PatchFile(...)]).
    return tuple(files)


@attrs.frozen
class PatchPlan:
    """What a planner proposes: whole-file replacements, never a partial edit.

    :ivar files: the replacements, in the plan's order (a list is turned into a tuple).
    """

    files: tuple[PatchFile, ...] = attrs.field(
        converter=_as_files,
        validator=v.deep_iterable(v.instance_of(PatchFile)),
    )

    @property
    def paths(self) -> tuple[str, ...]:
        """The path of each file, in order."""
        return tuple(f.path for f in self.files)


def check_model_name(name: str, what: str) -> str:
    """Return ``name`` if it can name a model, as ``CODING_AGENT_MODEL`` is checked: not
    blank, UTF-8 text of at most ``MAX_MODEL_CHARS`` characters, no control characters.

    :param what: how messages name the value (``--model``, ``'model'``).
    :raises LimitError: it cannot.
    """
    from .provider import CONTROL, MAX_MODEL_CHARS  # provider imports this module

    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise LimitError(f"{what} is not valid UTF-8 text") from None
    if not name.strip() or len(name) > MAX_MODEL_CHARS or CONTROL.search(name):
        raise LimitError(
            f"{what} must be a model name of 1 to {MAX_MODEL_CHARS} characters with no "
            f"control characters, not {name[:MAX_MODEL_CHARS]!r}"
        )
    return name


def model_name(_: object, attribute: Any, value: str | None) -> None:
    """A validator: ``None``, or a name :func:`check_model_name` accepts."""
    if value is not None:
        check_model_name(value, repr(attribute.name))


def check_edit_format(value: object, what: str) -> str:
    """Return ``value`` if it is one of :data:`~.edits.EDIT_FORMATS`.

    :param what: how messages name the value (``--edit-format``, ``'edit_format'``).
    :raises LimitError: it is not.
    """
    from .edits import EDIT_FORMATS  # edits imports this module

    if not isinstance(value, str) or value not in EDIT_FORMATS:
        raise LimitError(f"{what} must be one of {', '.join(EDIT_FORMATS)}, not {value!r}")
    return value


def edit_format_name(_: object, attribute: Any, value: str) -> None:
    """A validator: a name :func:`check_edit_format` accepts."""
    check_edit_format(value, repr(attribute.name))


@attrs.frozen
class PlannerOptions:
    """Per-run choices about how the planner talks to its provider, set from the command line.

    Plain data, so a planner running in another process or on another machine gets them too.

    :ivar timeout_seconds: how long to wait to connect, and for each part of the answer.
    :ivar max_retries: further attempts after a rate limit, a server error or a lost
        connection (never after a timeout or a 4xx answer).
    :ivar structured_output: send the plan's JSON Schema as
        ``response_format: {"type": "json_schema", ...}`` instead of asking for any JSON object.
    :ivar temperature: the sampling temperature to ask for, 0 to 2. 0 (the default) asks
        for the most likely answer; ``agent run --candidates K`` with K above 1 asks for
        :data:`CANDIDATE_TEMPERATURE` unless ``--temperature`` says otherwise, so that the
        candidates differ.
    :ivar model: the model to ask for (``agent run --model``, a batch task's ``model``)
        instead of the planner's own default (``CODING_AGENT_MODEL`` for the built-in
        planner); ``None`` for that default. A planner that has no choice of model
        ignores it.
    :ivar edit_format: how to ask the model to write its plan (``agent run
        --edit-format``, a batch task's ``edit_format``): one of ``EDIT_FORMATS`` in
        ``sandboxed_coding_agent.core.edits``, ``"whole"`` files (the default),
        ``"search-replace"`` edits or a ``"udiff"``, which that module applies. The plan
        is whole files whatever the answer's format. A planner that cannot ask for a
        format ignores it.
    """

    timeout_seconds: float = attrs.field(default=90.0, converter=float, validator=v.gt(0))
    max_retries: int = attrs.field(default=3, validator=[v.ge(0), v.le(10)])
    structured_output: bool = False
    temperature: float = attrs.field(default=0.0, validator=[v.ge(0.0), v.le(2.0)])
    model: str | None = attrs.field(default=None, validator=model_name)
    edit_format: str = attrs.field(default="whole", validator=edit_format_name)


#: The temperature parallel candidates ask for unless told otherwise: above 0, so that
#: K calls with the same prompt can give K different plans.
CANDIDATE_TEMPERATURE = 0.7

#: Bounds of a run's attempts, candidates and sandboxes at once (``agent run --attempts``,
#: ``--candidates``, ``--jobs``, a batch task's fields): each planner call costs money,
#: each sandbox memory.
MAX_ATTEMPTS = 10
MAX_CANDIDATES = 16
MAX_JOBS = 64

#: How much of a failed test's output a repair attempt's feedback carries: its last characters.
FEEDBACK_OUTPUT_CHARS = 6000


@attrs.frozen
class Feedback:
    """What became of the previous attempt of a run, for the planner's next try.

    Sent in :attr:`PlanRequest.feedback` by ``agent run --attempts N`` after an
    attempt that did not pass. It never holds a hidden test file, nor output
    that could quote one: for a seed with hidden tests, the test's output is
    withheld and :attr:`note` says what failed.

    :ivar attempt: the number (from 1) of the attempt it describes.
    :ivar files: the replacements that attempt's plan proposed; empty when the
        planner's answer was refused before it was a plan.
    :ivar rejections: why a policy refused that plan; empty when it was tested.
    :ivar test_exit_code: the test's exit code; ``None`` when killed or not tested.
    :ivar test_timed_out: whether the test hit its wall-clock limit.
    :ivar limit_hit: the sandbox limit that stopped the test, if any.
    :ivar test_output: the end of the test's output (at most
        :data:`FEEDBACK_OUTPUT_CHARS` characters); ``None`` when not tested or withheld.
    :ivar note: what the agent says about the test instead of (or besides) its output,
        such as ``"a hidden test failed"``.
    :ivar answer: that attempt's answer as the planner's backend wrote it (the model's
        text, in whatever edit format it was asked for), when the planner kept it
        (:attr:`PlannerResult.answer`); the built-in planner sends it back as the
        assistant's turn of the conversation, and ``files`` when it is ``None``.
    """

    attempt: int
    files: tuple[PatchFile, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    test_exit_code: int | None = None
    test_timed_out: bool = False
    limit_hit: str | None = None
    test_output: str | None = None
    note: str | None = None
    answer: str | None = None


@attrs.frozen
class PlanRequest:
    """What a planner receives: everything it may show the model, and the bounds of the answer.

    :ivar seed: name of the seed project.
    :ivar instruction: what the user asked for.
    :ivar files: the seed files' text by path, tests included (read-only): every file
        of a small folder seed; of a repository (a git seed, or a seed with ``context``
        patterns), the editable files, then the context files that fit the seed's
        budget (:mod:`~sandboxed_coding_agent.core.context`).
    :ivar editable_paths: the paths the plan may replace.
    :ivar limits: bounds the plan must respect.
    :ivar options: how to talk to the provider for this run.
    :ivar feedback: for a repair attempt, what became of the previous one (its plan and
        the test's output, or why it was refused); ``None`` on a first attempt.
    :ivar repository_map: when ``files`` is only part of the seed, a map of all of it:
        one line per file, a Python file's top-level classes and functions after its
        path, ending with what was left out for room, if anything; ``None`` when
        ``files`` is the whole seed.
    :ivar left_out: context files not in ``files`` for want of room, in order (the
        first :data:`~sandboxed_coding_agent.core.context.MAX_LEFT_OUT_LISTED`).
    :ivar left_out_count: how many context files were left out in all.

    Neither ``files``, the map nor ``left_out`` ever names a hidden test file
    (:attr:`SeedProject.hidden_files`).
    """

    seed: str
    instruction: str
    files: Mapping[str, str]
    editable_paths: tuple[str, ...]
    limits: SeedLimits
    options: PlannerOptions = attrs.field(factory=PlannerOptions)
    feedback: Feedback | None = None
    repository_map: str | None = None
    left_out: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    left_out_count: int = attrs.field(
        default=attrs.Factory(lambda request: len(request.left_out), takes_self=True),
        validator=v.instance_of(int),
    )

    @left_out_count.validator
    def _counts_every_listed(self, _: attrs.Attribute[object], value: int) -> None:
        if value < len(self.left_out):
            raise ValueError("left_out_count is less than the paths left_out lists")


@attrs.frozen
class TokenUsage:
    """Tokens the provider reports for one call.

    :ivar prompt_tokens: tokens of the request, when reported.
    :ivar completion_tokens: tokens of the answer, when reported.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@attrs.frozen
class PlannerResult:
    """A validated plan and how it was made.

    :ivar planner: name of the planner that made it.
    :ivar planner_task_id: identifies this planner call in logs, errors and results.
    :ivar plan: the plan, already checked against the patch contract.
    :ivar model: the model that answered, when known.
    :ivar response_id: the provider's own ID of its answer, when given.
    :ivar usage: tokens used, when reported.
    :ivar duration_seconds: wall time of the planner call.
    :ivar details: what the planner adds to the record of its call, which ``agent logs
        TASK_ID`` shows: a JSON object (text, numbers, booleans, ``None``, lists and
        objects of them) such as the endpoint, each attempt's status and timing, or
        the start of the answer. Never the key, the prompt or the seed's files.
    :ivar answer: the plan as the backend wrote it (the model's text), which a repair
        attempt sends back as the assistant's turn (:attr:`Feedback.answer`); ``None``
        when the planner does not keep it. It is not recorded: the plan is.
    """

    planner: str
    planner_task_id: str
    plan: PatchPlan
    model: str | None = None
    response_id: str | None = None
    usage: TokenUsage | None = None
    duration_seconds: float | None = None
    details: dict[str, Any] = attrs.field(factory=dict)
    answer: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class SandboxJob:
    """Everything a runner needs to test a patch, and nothing else.

    :ivar seed: name of the seed project, for labels only.
    :ivar files: the project files with the replacement applied, by path.
    :ivar test_command: argv to run in the project folder.
    :ivar limits: the seed's limits for this run; the runner enforces the sandbox ones
        (timeout, output, memory, processes, CPU, file size, disk).
    :ivar runtime: the seed's runtime, which the runner prepares; ``None``: its own Python.
    :ivar harness: how to run the test command under the harness, whose signed
        report the agent reads (see :class:`~.evidence.TestHarness`); ``None``:
        the verdict rests on the exit status alone.
    :ivar tree: for a git seed, the repository and commit whose tree is the project;
        the runner puts it in the project folder read-only and ``files`` on top of it
        (``files`` then holds only the seed's own files and the editable ones).
        ``None``: ``files`` is the whole project.
    """

    seed: str
    files: Mapping[str, bytes] = attrs.field(converter=_frozen_mapping)
    test_command: tuple[str, ...] = attrs.field(converter=_as_tuple, validator=v.min_len(1))
    limits: SeedLimits = attrs.field(factory=SeedLimits)
    runtime: SeedRuntime | None = None
    harness: TestHarness | None = None
    tree: SourceTree | None = None


#: The limits a runner may name in :attr:`SandboxOutcome.limit_hit`.
LIMITS = ("timeout", "memory", "processes", "cpu", "file-size", "disk", "output")


@attrs.frozen
class SandboxOutcome:
    """What happened in the sandbox; the sandbox itself is gone by the time this exists.

    :ivar runner: name of the runner.
    :ivar sandbox_id: identifies the (terminated) sandbox.
    :ivar exit_code: the test process's exit code; ``None`` if it was killed.
    :ivar output: the test's combined stdout and stderr, bounded.
    :ivar output_truncated: whether output was cut at the bound.
    :ivar timed_out: whether the test hit its wall-clock limit.
    :ivar duration_seconds: wall time from sandbox start to termination.
    :ivar limit_hit: the limit (one of :data:`LIMITS`) that stopped or failed the
        test, when the runner can tell; ``None`` when the test passed.
    :ivar report: what the harness wrote to its report, as the runner received
        it; ``None`` from a runner that does not run the harness. The agent
        verifies it and replaces it with ``test_report``.
    :ivar test_report: the verified evidence (set by the agent, not the runner).
    :ivar grade: for a seed with ``fail_to_pass`` or ``pass_to_pass`` tests, what became
        of each (set by the agent from ``test_report``, see :mod:`~.grading`); ``None``
        for a seed without them.
    """

    runner: str
    sandbox_id: str
    exit_code: int | None
    output: str
    output_truncated: bool = False
    timed_out: bool = False
    duration_seconds: float = 0.0
    limit_hit: str | None = attrs.field(default=None, validator=v.optional(v.in_(LIMITS)))
    report: str | None = attrs.field(default=None, repr=False)
    test_report: TestReport | None = None
    grade: Grade | None = None

    @property
    def tests_passed(self) -> bool:
        """Whether the attempt passed: the one place that decides it.

        A graded seed's attempt passes when its grade is resolved (``FULL``): the report
        is complete and trustworthy, in time and within every limit, and every listed
        test passed, whatever the exit status and the other tests. Any other seed's
        needs exit code 0, in time, no limit hit, and the framework's evidence (if any)
        to agree.
        """
        if self.grade is not None:
            return self.grade.resolved
        evidence = self.test_report is None or self.test_report.passed
        return self.exit_code == 0 and not self.timed_out and self.limit_hit is None and evidence


#: What became of an attempt: tested and passed or failed (a timeout or a limit hit is a
#: failure), refused by a policy, or stopped by the agent before its test ended (another
#: candidate passed first under ``--first-pass``).
VERDICTS = ("passed", "failed", "rejected", "stopped")


@attrs.frozen
class Attempt:
    """One planner call and what became of its plan: rejected, or tested in a sandbox.

    :ivar number: its place among its candidate's attempts, from 1.
    :ivar verdict: one of :data:`VERDICTS`.
    :ivar planner_task_id: the planner call's ID (``None`` for a plan file).
    :ivar changed_files: the paths the plan really changes.
    :ivar diff: a unified diff of those changes.
    :ivar rejections: why the policies refused the plan (verdict ``rejected``).
    :ivar sandbox_id: the (terminated) sandbox that tested it; ``None`` when not tested.
    :ivar test_exit_code: the test's exit code; ``None`` when killed or not tested.
    :ivar test_output: the test's output, bounded by the seed's ``max_output_bytes``.
    :ivar test_output_truncated: whether that output was cut.
    :ivar test_timed_out: whether the test hit its wall-clock limit.
    :ivar limit_hit: the sandbox limit that stopped the test, if any.
    :ivar model: the model that answered, when known.
    :ivar response_id: the provider's ID of its answer, when given.
    :ivar usage: tokens of this planner call, when reported.
    :ivar planner_seconds: wall time of the planner call.
    :ivar sandbox_seconds: wall time of the sandbox.
    :ivar test_report: the framework's verified report: each test's outcome, and
        what the guard refused; ``None`` when not tested.
    :ivar grade: for a graded seed (``fail_to_pass``, ``pass_to_pass``), what became of
        each listed test and the resolution; ``None`` when not graded or not tested.
    :ivar cost: the planner call's cost in US dollars, when a price table prices it.
    """

    number: int
    verdict: str = attrs.field(validator=v.in_(VERDICTS))
    planner_task_id: str | None = None
    changed_files: tuple[str, ...] = ()
    diff: str = ""
    rejections: tuple[Rejection, ...] = ()
    sandbox_id: str | None = None
    test_exit_code: int | None = None
    test_output: str = ""
    test_output_truncated: bool = False
    test_timed_out: bool = False
    limit_hit: str | None = None
    model: str | None = None
    response_id: str | None = None
    usage: TokenUsage | None = None
    planner_seconds: float | None = None
    sandbox_seconds: float | None = None
    test_report: TestReport | None = None
    grade: Grade | None = None
    cost: float | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"

    @property
    def tested(self) -> bool:
        """Whether its test ran to the end in a sandbox (passed or failed)."""
        return self.verdict in ("passed", "failed")


@attrs.frozen
class Candidate:
    """One of ``agent run --candidates K``'s independent tries: its attempts, in order.

    :ivar number: its place among the candidates, from 1.
    :ivar attempts: its attempts (more than one with ``--attempts N``); the last
        one passed, or it was the last allowed, or the run stopped it.
    :ivar stopped: the run stopped it before it finished (another candidate passed
        first under ``--first-pass``, or the run ended in an error).
    """

    number: int
    attempts: tuple[Attempt, ...] = ()
    stopped: bool = False

    @property
    def passed(self) -> bool:
        return any(attempt.passed for attempt in self.attempts)


@attrs.frozen
class RunResult:
    """The outcome of one ``agent run``: what changed and whether the seed's test passed.

    The fields up to ``limit_hit`` describe the attempt the run's verdict rests on:
    the one that passed, or else the last one tested, of the chosen candidate.

    :ivar attempts: every attempt of the chosen candidate, in order (one without
        ``--attempts``).
    :ivar passed_attempt: the number of the attempt that passed, if one did.
    :ivar candidates: with ``--candidates K`` above 1, every candidate (each with its
        attempts); empty otherwise.
    :ivar chosen_candidate: the number of the candidate the result describes: the one
        that passed in the fewest attempts, then with the smallest diff, then the
        lowest number; when none passed, the lowest-numbered one that was tested.
    :ivar run_id: the run's record (``agent replay RUN_ID``, ``agent diff RUN_ID``);
        ``None`` when the run was not recorded.
    :ivar test_report: the evidence the verdict rests on: the framework, how its
        report ended, each test's outcome and what the guard refused.
    :ivar grade: for a graded seed (``fail_to_pass``, ``pass_to_pass``), what became of
        each listed test and the resolution (``FULL``, ``PARTIAL``, ``NO``), on which
        ``tests_passed`` rests; ``None`` for a seed without those lists.
    :ivar requested_model: the model the run asked the planner for (``agent run
        --model``, a batch task's ``model``); ``None`` when it asked for the planner's
        default. ``model`` is the one the provider says answered.
    :ivar spend: what every planner call of the run spent (every attempt of every
        candidate, not only the chosen one's), with the cost when a price table was given;
        ``None`` from a run that did not count (a plan file, an older record).
    """

    seed: str
    instruction: str
    planner: str | None
    planner_task_id: str | None
    runner: str
    sandbox_id: str
    changed_files: tuple[str, ...]
    diff: str
    tests_passed: bool
    test_exit_code: int | None
    test_output: str
    test_output_truncated: bool
    test_timed_out: bool
    model: str | None = None
    usage: TokenUsage | None = None
    planner_seconds: float | None = None
    sandbox_seconds: float = 0.0
    response_id: str | None = None
    limit_hit: str | None = None
    attempts: tuple[Attempt, ...] = ()
    passed_attempt: int | None = None
    candidates: tuple[Candidate, ...] = ()
    chosen_candidate: int = 1
    run_id: str | None = None
    test_report: TestReport | None = None
    grade: Grade | None = None
    requested_model: str | None = None
    spend: Spend | None = None


@attrs.frozen
class Finding:
    """One item of ``agent doctor``: OK, or what is wrong and how to fix it.

    :ivar item: what was checked, for example ``bwrap`` or ``limit processes``.
    :ivar ok: whether it is as a run needs it.
    :ivar detail: what was found; never a secret.
    :ivar fix: what to do about it, when it is not OK.
    :ivar required: whether a run needs it; when not, a problem is only a warning.
    """

    item: str
    ok: bool
    detail: str
    fix: str | None = None
    required: bool = True

    @property
    def verdict(self) -> str:
        return "OK" if self.ok else ("FAIL" if self.required else "WARN")

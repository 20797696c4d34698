"""The data every part of a run exchanges: plans, seeds, jobs and results.

All of it is attrs classes, frozen and validated at construction, and all of it
(except :class:`SeedProject`, which names local files) round-trips through the
cattrs converter in :mod:`sandboxed_coding_agent.core.serialization`, so a
planner or a runner may live in another process or on another machine.

The seeds (:class:`SeedProject`, :class:`SeedLimits`, :class:`SeedRuntime` and
their constants) are defined in :mod:`sandboxed_coding_agent.core.seeds.project`, and the
plans and planner calls (:class:`PatchPlan`, :class:`PlanRequest`,
:class:`PlannerOptions`, :class:`PlannerResult` and their kin) in
:mod:`sandboxed_coding_agent.core.plans.planning`; both are importable from here, as
every other name of the data model.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs
from attrs import validators as v

from .errors import Rejection
from .plans.budget import Spend
from .plans.planning import CANDIDATE_TEMPERATURE as CANDIDATE_TEMPERATURE
from .plans.planning import FEEDBACK_OUTPUT_CHARS as FEEDBACK_OUTPUT_CHARS
from .plans.planning import MAX_ATTEMPTS as MAX_ATTEMPTS
from .plans.planning import MAX_CANDIDATES as MAX_CANDIDATES
from .plans.planning import MAX_JOBS as MAX_JOBS
from .plans.planning import MAX_STEPS as MAX_STEPS
from .plans.planning import Feedback as Feedback
from .plans.planning import PatchFile as PatchFile
from .plans.planning import PatchPlan as PatchPlan
from .plans.planning import PlannerOptions as PlannerOptions
from .plans.planning import PlannerResult as PlannerResult
from .plans.planning import PlanRequest as PlanRequest
from .plans.planning import TokenUsage as TokenUsage
from .plans.planning import check_edit_format as check_edit_format
from .plans.planning import check_model_name as check_model_name
from .plans.planning import edit_format_name as edit_format_name
from .plans.planning import model_name as model_name
from .seeds.git_source import SourceTree
from .seeds.project import ALWAYS_TEST_PATHS as ALWAYS_TEST_PATHS
from .seeds.project import LIMIT_CEILINGS as LIMIT_CEILINGS
from .seeds.project import LimitError as LimitError
from .seeds.project import SeedLimits as SeedLimits
from .seeds.project import SeedProject as SeedProject
from .seeds.project import SeedRuntime as SeedRuntime
from .seeds.project import _as_tuple
from .verdicts.evidence import EVIDENCE_TIERS, TestHarness, TestList, TestReport
from .verdicts.grading import Grade
from .verdicts.output_tests import OutputProbe, OutputTestResult


def _frozen_mapping(value: Mapping[str, bytes]) -> Mapping[str, bytes]:
    return MappingProxyType(dict(value))


@attrs.frozen
class SessionStep:
    """A job that is one command of a session (see :mod:`~.runs.sessions`): the runner's
    harness runs the command, ends every process it left, and hands back the project
    folder's files in its report.

    :ivar timeout_seconds: how long the command may run; the harness stops it then and
        still hands back the files (the job's own timeout leaves room for that).
    :ivar max_bytes: the most bytes of files it hands back; past that, none.
    :ivar max_files: the most files it hands back; past that, none.
    :ivar max_path_bytes: the most bytes their paths may come to, all together; past that,
        none (each path is an argument of the next sandbox's command line, which the
        kernel bounds).
    :ivar longest_path: the most bytes one file's path may have: a longer one is not
        handed back, but named as not kept (the next sandbox could not make it).
    """

    timeout_seconds: float = attrs.field(validator=v.gt(0))
    max_bytes: int = attrs.field(validator=v.gt(0))
    max_files: int = attrs.field(default=1000, validator=v.gt(0))
    max_path_bytes: int = attrs.field(default=128 * 1024, validator=v.gt(0))
    longest_path: int = attrs.field(default=2048, validator=v.gt(0))


@attrs.frozen
class CommandResult:
    """What one command of a session gave.

    :ivar command: the command, as given.
    :ivar output: its standard output and error, merged in order, as the runner bounds it.
    :ivar output_truncated: whether the output was cut at the bound.
    :ivar exit_code: its exit status (``128 + N`` when killed by signal N); ``None`` when
        it was stopped at its time limit.
    :ivar timed_out: whether it was stopped at its time limit.
    :ivar seconds: how long the step took, sandbox included.
    :ivar sandbox_id: the runner's ID of the (terminated) sandbox it ran in.
    :ivar not_kept: what the command left that a session does not carry to the next one:
        symbolic links, pipes and other files that are not regular (at most 100 named).
    """

    command: str
    output: str
    output_truncated: bool
    exit_code: int | None
    timed_out: bool
    seconds: float
    sandbox_id: str
    not_kept: tuple[str, ...] = ()


#: The most characters of the model's text, a command or an output a step keeps.
MAX_STEP_TEXT_CHARS = 20_000


def _bounded(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_STEP_TEXT_CHARS:
        return text
    cut = len(text) - MAX_STEP_TEXT_CHARS
    return text[:MAX_STEP_TEXT_CHARS] + f"\n[... {cut:,} more characters not kept]"


@attrs.frozen
class TrajectoryStep:
    """One step of an exploring planner.

    :ivar number: 1 for the first step of the conversation.
    :ivar attempt: the run's attempt it belongs to (a repair continues the conversation).
    :ivar kind: ``command`` (a ``bash`` call), ``submit``, ``format-error`` (an answer
        with no usable function call) or ``feedback`` (the verdict a repair attempt told).
    :ivar said: the model's own text in that turn, if any.
    :ivar command: the command it ran (``command`` steps).
    :ivar output: what went back to the model: the command's output as it saw it, or
        what it was told of its submission or its mistake.
    :ivar exit_code: the command's exit code; ``None`` when it timed out or ran none.
    :ivar timed_out: whether the command was stopped at its time limit.
    :ivar seconds: how long the step's command (or the provider) took.
    :ivar prompt_tokens: the provider's prompt tokens for the turn, when reported.
    :ivar completion_tokens: likewise, for the answer.
    """

    number: int
    attempt: int
    kind: str
    said: str | None = attrs.field(default=None, converter=_bounded)
    command: str | None = attrs.field(default=None, converter=_bounded)
    output: str | None = attrs.field(default=None, converter=_bounded)
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


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
    :ivar tree_hidden: paths of ``tree`` the runner leaves out of the project folder: a
        session's hidden tests, which its commands may not read (the test of a plan has
        them all).
    :ivar output_probes: how to run each of the seed's output tests (see
        :mod:`~.output_tests`): never what they must give, nor which are hidden.
    :ivar session: set when the job is one command of a session: the runner's harness
        then hands back the project's files (a runner that cannot leaves ``report``
        ``None``, and the session says it is not offered). ``None`` for a test.
    """

    seed: str
    files: Mapping[str, bytes] = attrs.field(converter=_frozen_mapping)
    test_command: tuple[str, ...] = attrs.field(converter=_as_tuple, validator=v.min_len(1))
    limits: SeedLimits = attrs.field(factory=SeedLimits)
    runtime: SeedRuntime | None = None
    harness: TestHarness | None = None
    tree: SourceTree | None = None
    tree_hidden: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    output_probes: tuple[OutputProbe, ...] = ()
    session: SessionStep | None = None


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
    :ivar output_tests: what became of each of the seed's output tests, judged by the
        agent outside the sandbox (see :mod:`~.output_tests`; set by the agent).
    :ivar output_report: the report's lines of the output tests' probes, kept (signed) when
        the rest of the report is verified and dropped, for the agent to judge them.
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
    output_tests: tuple[OutputTestResult, ...] = ()
    output_report: str | None = attrs.field(default=None, repr=False)

    @property
    def tests_passed(self) -> bool:
        """Whether the attempt passed: the one place that decides it.

        A graded seed's attempt passes when its grade is resolved (``FULL``): the report
        is complete and trustworthy, in time and within every limit, and every listed
        test passed, whatever the exit status and the other tests. Any other seed's
        needs exit code 0, in time, no limit hit, and the framework's evidence (if any)
        to agree. Every output test of the seed must pass as well.
        """
        if not all(test.passed for test in self.output_tests):
            return False
        if self.grade is not None:
            return self.grade.resolved
        evidence = self.test_report is None or self.test_report.passed
        return self.exit_code == 0 and not self.timed_out and self.limit_hit is None and evidence


#: What became of an attempt: tested and passed or failed (a timeout or a limit hit is a
#: failure), refused by a policy, or stopped by the agent before its test ended (another
#: candidate passed first under ``--first-pass``).
VERDICTS = ("passed", "failed", "rejected", "stopped")
#: The most characters of a refused answer an :class:`Attempt` keeps (its start).
MAX_ANSWER_CHARS = 20_000


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
    :ivar output_tests: what became of each of the seed's output tests; empty when the
        seed has none or the plan was not tested.
    :ivar answer: for an attempt refused before any sandbox (verdict ``rejected``), the
        planner's answer as its backend wrote it, at most :data:`MAX_ANSWER_CHARS`
        characters; ``None`` when the planner kept none, for a tested attempt (its
        ``diff`` says what it proposed), and in results older than this field. The
        planner-call record (``agent logs PLANNER_TASK_ID``) holds an excerpt too.
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
    output_tests: tuple[OutputTestResult, ...] = ()
    answer: str | None = None

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
    :ivar test_list: the tests the verdict needed, from the unpatched seed's run (see
        :mod:`~.trusted_tests`); for a graded seed whose lists hold a name cut short, the
        tests such a name may stand for (:func:`~.grading.may_be_cut`); ``None`` for a
        seed whose verdict needs no such list (a graded seed, a test command judged by its
        exit status) or when no plan was tested.
    :ivar evidence: what the verdict rests on, one of
        :data:`~.evidence.EVIDENCE_TIERS` (the weakest, when it rests on more than one):
        ``exit-status``, ``framework`` or ``output``; ``None`` in an older record.
    :ivar output_tests: what became of each of the seed's output tests in the attempt the
        verdict rests on (see :mod:`~.output_tests`).
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
    test_list: TestList | None = None
    evidence: str | None = attrs.field(default=None, validator=v.optional(v.in_(EVIDENCE_TIERS)))
    output_tests: tuple[OutputTestResult, ...] = ()


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

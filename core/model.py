"""The data every part of a run exchanges: plans, seeds, jobs and results.

All of it is attrs classes, frozen and validated at construction, and all of it
(except :class:`SeedProject`, which names local files) round-trips through the
cattrs converter in :mod:`sandboxed_coding_agent.core.serialization`, so a
planner or a runner may live in another process or on another machine.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs
from attrs import validators as v

from . import patterns, seed_files
from .errors import Rejection
from .evidence import GUARD_CAPABILITIES, TestHarness, TestReport
from .git_source import SourceTree
from .grading import Grade

#: Files that steer a test run (pytest's conftest and configuration), so they count as
#: test files in every seed: a plan that could rewrite them could fake any test result.
ALWAYS_TEST_PATHS = ("**/conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")


def _as_tuple(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("expected a sequence of strings, not a single string")
    return tuple(value)


def _frozen_mapping(value: Mapping[str, bytes]) -> Mapping[str, bytes]:
    return MappingProxyType(dict(value))


def _frozen_parameters(
    value: Mapping[str, Mapping[str, object]],
) -> Mapping[str, Mapping[str, object]]:
    return MappingProxyType({name: MappingProxyType(dict(p)) for name, p in value.items()})


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


#: The highest value a seed (folder or plugin) or a command-line option may give each
#: limit. A seed folder may come from anyone: it may tighten a limit, never lift the
#: sandbox's bounds off the machine running it.
LIMIT_CEILINGS: Mapping[str, int] = MappingProxyType(
    {
        "max_files": 50,
        "max_total_bytes": 1024 * 1024,
        "max_path_chars": 1024,
        "test_timeout_seconds": 3600,
        "max_output_bytes": 1024 * 1024,
        "memory_mb": 4096,
        "max_processes": 1024,
        "cpu_seconds": 3600,
        "max_file_mb": 1024,
        "disk_mb": 1024,
        "output_stop_bytes": 64 * 1024 * 1024,
    }
)


class LimitError(ValueError):
    """A limit that is not a finite number within its bounds; the message names it."""


def _within(low: float, *, above: bool = False) -> Callable[[object, Any, float], None]:
    """A validator: at least ``low`` (more than ``low`` when ``above``), finite, at most the
    attribute's ceiling in :data:`LIMIT_CEILINGS`."""

    def check(_: object, attribute: Any, value: float) -> None:
        ceiling = LIMIT_CEILINGS[attribute.name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{attribute.name} must be a number, not {value!r}")
        # Python will not even write out an int of 4,300 digits in this message.
        if isinstance(value, int) and value.bit_length() > 63:
            raise LimitError(f"{attribute.name} is an integer outside the 64-bit range")
        if isinstance(value, float) and not math.isfinite(value):
            raise LimitError(f"{attribute.name} = {value!r} is not a finite number")
        if value < low or (above and value == low):
            bound = f"more than {low}" if above else f"at least {low}"
            raise LimitError(f"{attribute.name} = {value!r} is too small: it must be {bound}")
        if value > ceiling:
            raise LimitError(
                f"{attribute.name} = {value!r} is above its ceiling of {ceiling}; "
                "a seed or an option may lower a limit, or raise it up to the ceiling"
            )

    return check


@attrs.frozen
class SeedLimits:
    """Bounds that apply to plans for a seed and to the sandbox that tests them.

    :ivar max_files: most files one plan may replace.
    :ivar max_total_bytes: most UTF-8 bytes of all replaced files together.
    :ivar max_path_chars: longest path a plan may name.
    :ivar test_timeout_seconds: wall-clock limit for the test command.
    :ivar max_output_bytes: how much of the test's output is kept.
    :ivar memory_mb: memory the test may use, in MiB (as the reference sandbox: 512).
    :ivar max_processes: processes and threads the sandbox may hold at once.
    :ivar cpu_seconds: CPU time each process of the test may use.
    :ivar max_file_mb: largest file the test may write, in MiB.
    :ivar disk_mb: room in the sandbox's writable folders (``/workspace``, ``/tmp``), in MiB.
    :ivar output_stop_bytes: the test is stopped once it has written this much output.

    The limits after ``max_output_bytes`` bound the sandbox; runners enforce
    what their machine allows (``agent doctor`` says which, for the local one).
    Every limit has a ceiling (:data:`LIMIT_CEILINGS`) and must be finite: a
    value above it cannot be constructed, so no seed and no option can lift
    a bound off the machine.
    """

    max_files: int = attrs.field(default=3, validator=_within(1))
    max_total_bytes: int = attrs.field(default=12_000, validator=_within(1))
    max_path_chars: int = attrs.field(default=160, validator=_within(1))
    test_timeout_seconds: float = attrs.field(default=60.0, validator=_within(0, above=True))
    max_output_bytes: int = attrs.field(default=12_000, validator=_within(256))
    memory_mb: int = attrs.field(default=512, validator=_within(32))
    max_processes: int = attrs.field(default=256, validator=_within(8))
    cpu_seconds: float = attrs.field(default=60.0, validator=_within(0, above=True))
    max_file_mb: int = attrs.field(default=64, validator=_within(1))
    disk_mb: int = attrs.field(default=128, validator=_within(1))
    output_stop_bytes: int = attrs.field(default=8 * 1024 * 1024, validator=_within(256))


#: A requirement of a package from the index: a name, then extras, versions and markers,
#: none of which needs ``/``, ``:``, ``@`` or ``\\``, which URLs and paths do.
_INDEX_REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~*+;()'\" \t]*")


def _requirement(
    _: object, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]
) -> None:
    for requirement in value:
        if not isinstance(requirement, str) or not requirement.strip():
            raise ValueError(f"{attribute.name}: a requirement must be a non-empty string")
        if requirement.lstrip().startswith("-"):
            # An installer would read it as an option (an index URL, an editable path).
            raise ValueError(f"{attribute.name}: {requirement!r} is an option, not a requirement")
        if not _INDEX_REQUIREMENT.fullmatch(requirement.strip()):
            # A URL or a path would have the installer fetch or build whatever it points to.
            raise ValueError(
                f"{attribute.name}: {requirement!r} is not a package of the index "
                "(a name with extras, versions and markers; no URL or path)"
            )


@attrs.frozen
class SeedRuntime:
    """The Python a seed's test needs beyond the standard library.

    The runner prepares it before the sandbox starts, outside it and with
    network (the local runner uses uv and caches it by a hash of its fields),
    and gives it to the sandbox read-only; the test then runs offline.

    :ivar python: the Python version, such as ``"3.12"``; ``None`` means the agent's own.
    :ivar requirements: requirement specifiers of packages from the index, such as
        ``"pytest>=8"``; never a URL or a path.
    :ivar project: the project under test's own dependencies (the ``[project]``
        ``dependencies`` of the seed's ``pyproject.toml``) are installed too, and the
        project's folder (``src`` when it has one) is put on the sandbox's ``sys.path``,
        so its tests import the patched files. Nothing of the project is built or run
        outside the sandbox.
    :ivar project_requirements: those dependencies, read from the seed's
        ``pyproject.toml`` when the seed is loaded (part of the cache key).
    """

    python: str | None = attrs.field(default=None, validator=v.optional(v.matches_re(r"3\.\d+")))
    requirements: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=_requirement
    )
    project: bool = False
    project_requirements: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=_requirement
    )


@attrs.frozen
class SeedProject:
    """A small project whose test proves a patch: its files, what may change, how to test.

    :ivar name: how users select it (``agent run --seed NAME``).
    :ivar description: one line for ``agent seeds list``.
    :ivar root: the folder holding the files; it is only ever read.
    :ivar files: every file of the project, relative to ``root``.
    :ivar editable_paths: the files a plan may replace: paths or patterns
        (:mod:`~sandboxed_coding_agent.core.patterns`), each matching at least one
        file, none matching a test file. Plans may only replace existing files.
    :ivar test_command: argv run in the project folder inside the sandbox;
        a leading ``python`` means the sandbox's Python interpreter.
    :ivar default_prompt: the instruction used when the user gives none.
    :ivar limits: bounds on plans and on the test run.
    :ivar test_paths: paths or patterns of the files that prove a patch; together with
        :data:`ALWAYS_TEST_PATHS` they are the seed's test files, which are never editable.
    :ivar policies: policies this seed switches on, by name, each with its parameters
        (an empty mapping keeps the policy's defaults).
    :ivar runtime: the Python and packages the test needs; ``None``: the agent's own
        Python and its standard library.
    :ivar hidden_test_paths: paths or patterns of test files the planner never sees
        (:attr:`hidden_files`): they are copied into the sandbox, where the test command
        can run them, but never sent to a planner, in the prompt or in a repair attempt's
        feedback, and never editable.
    :ivar untrusted: the files come from a folder of unknown origin (one named on the
        command line), so a hard-linked file, which could be any file of this machine,
        is refused too. Symbolic links, FIFOs and devices are refused for every seed.
    :ivar guard_allow: what the guard lets the code under test do all the same
        (``[guard] allow`` in ``seed.toml``; see :data:`~.evidence.GUARD_CAPABILITIES`).
    :ivar root_identity: the (device, inode) of ``root`` when the seed was read from a
        folder; the files are read only from that very folder, never from one swapped in
        at its path since.
    :ivar source: for a git seed, the repository and commit whose tree holds the
        project (:mod:`~.git_source`); ``files`` then lists the tree's files and the
        seed's own (:attr:`added_files`), which replace the tree's of the same path.
        ``None``: every file is in ``root``.
    :ivar added_files: for a git seed, the files of its own folder (``root``) that it
        adds on top of the tree (tests above all).
    :ivar context_paths: paths or patterns of files the planner reads besides the
        editable ones, within :attr:`context_budget_bytes`; for a git seed, the files a
        planner sees are the editable ones and these (plus a map of the repository).
        Empty for a folder seed: every file that is not a hidden test.
    :ivar context_budget_bytes: the most bytes of file text and repository map the
        planner is given for a git seed or a seed with ``context`` patterns.
    :ivar fail_to_pass: test IDs (pytest node IDs or unittest dotted names) that fail
        before the fix and must pass after it.
    :ivar pass_to_pass: test IDs that pass before the fix and must still pass after it.
        With either list, the run is graded test by test (:mod:`~.grading`).
    """

    name: str = attrs.field(validator=v.matches_re(r"[a-z0-9][a-z0-9._-]{0,63}"))
    description: str
    root: Path = attrs.field(converter=Path)
    files: tuple[str, ...] = attrs.field(converter=_as_tuple)
    editable_paths: tuple[str, ...] = attrs.field(converter=_as_tuple)
    test_command: tuple[str, ...] = attrs.field(converter=_as_tuple, validator=v.min_len(1))
    default_prompt: str
    limits: SeedLimits = attrs.field(factory=SeedLimits)
    test_paths: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    policies: Mapping[str, Mapping[str, object]] = attrs.field(
        factory=dict, converter=_frozen_parameters
    )
    runtime: SeedRuntime | None = None
    hidden_test_paths: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    untrusted: bool = False
    root_identity: tuple[int, int] | None = None
    guard_allow: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=v.deep_iterable(v.in_(GUARD_CAPABILITIES))
    )
    source: SourceTree | None = None
    added_files: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    context_paths: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    context_budget_bytes: int = attrs.field(
        default=64_000, validator=[v.instance_of(int), v.ge(1_000), v.le(4_000_000)]
    )
    fail_to_pass: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    pass_to_pass: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)

    @editable_paths.validator
    def _editable_paths_are_files(self, _: attrs.Attribute[object], value: tuple[str, ...]) -> None:
        for pattern in value:
            problem = patterns.pattern_problem(pattern)
            if problem:
                raise ValueError(f"editable path {pattern!r}: {problem}")
        unknown = [p for p in value if not any(patterns.matches(f, p) for f in self.files)]
        if unknown:
            raise ValueError(f"editable paths are not files of the seed: {', '.join(unknown)}")
        tests = [f for f in self.test_files if patterns.matches_any(f, value)]
        if tests:
            raise ValueError(f"editable paths match test files: {', '.join(tests)}")

    @hidden_test_paths.validator
    def _hidden_tests_are_files(self, _: attrs.Attribute[object], value: tuple[str, ...]) -> None:
        for pattern in value:
            problem = patterns.pattern_problem(pattern)
            if problem:
                raise ValueError(f"hidden test {pattern!r}: {problem}")
            if not any(patterns.matches(f, pattern) for f in self.files):
                raise ValueError(f"hidden test {pattern!r} matches none of the seed's files")

    @property
    def test_files(self) -> tuple[str, ...]:
        """The files that prove a patch and that no plan may replace (hidden ones included)."""
        marks = (*self.test_paths, *ALWAYS_TEST_PATHS, *self.hidden_test_paths)
        return tuple(f for f in self.files if patterns.matches_any(f, marks))

    @property
    def hidden_files(self) -> tuple[str, ...]:
        """The test files a planner never sees: :attr:`hidden_test_paths` expanded."""
        return tuple(f for f in self.files if patterns.matches_any(f, self.hidden_test_paths))

    @property
    def editable_files(self) -> tuple[str, ...]:
        """The files a plan may replace: :attr:`editable_paths` expanded against :attr:`files`."""
        return tuple(f for f in self.files if patterns.matches_any(f, self.editable_paths))

    @property
    def carried_files(self) -> tuple[str, ...]:
        """The files the agent reads and hands to every sandbox: all of a folder seed's;
        a git seed's own (:attr:`added_files`) and editable ones, the rest of its files
        being in the tree a runner binds (:attr:`SandboxJob.tree`)."""
        if self.source is None:
            return self.files
        return tuple(dict.fromkeys((*self.added_files, *self.editable_files)))

    def read_files(self) -> dict[str, bytes]:
        """Read :attr:`carried_files`, never following a link; nothing is ever written back.

        :raises ~sandboxed_coding_agent.core.seed_files.SeedFileError: a file is a link,
            a FIFO or a device, changed while it was read, or (when :attr:`untrusted`)
            is a hard link.
        """
        own = self.files if self.source is None else self.added_files
        found = seed_files.read_seed_files(
            self.root, own, untrusted=self.untrusted, identity=self.root_identity
        )
        if self.source is not None:
            from . import git_source

            rest = [path for path in self.carried_files if path not in found]
            found.update(git_source.read_files(self.source, rest))
        return found

    def read_tree_files(self, paths: Iterable[str]) -> dict[str, bytes]:
        """Read some of the files (context for a planner), own files first, then the tree's."""
        every = set(self.files)
        wanted = [path for path in paths if path in every]
        own = set(self.files if self.source is None else self.added_files)
        found = seed_files.read_seed_files(
            self.root,
            [p for p in wanted if p in own],
            untrusted=self.untrusted,
            identity=self.root_identity,
        )
        rest = [p for p in wanted if p not in own]
        if rest and self.source is not None:
            from . import git_source

            found.update(git_source.read_files(self.source, rest))
        return found


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
    """

    timeout_seconds: float = attrs.field(default=90.0, converter=float, validator=v.gt(0))
    max_retries: int = attrs.field(default=3, validator=[v.ge(0), v.le(10)])
    structured_output: bool = False
    temperature: float = attrs.field(default=0.0, validator=[v.ge(0.0), v.le(2.0)])


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
    """

    attempt: int
    files: tuple[PatchFile, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    test_exit_code: int | None = None
    test_timed_out: bool = False
    limit_hit: str | None = None
    test_output: str | None = None
    note: str | None = None


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
    """

    planner: str
    planner_task_id: str
    plan: PatchPlan
    model: str | None = None
    response_id: str | None = None
    usage: TokenUsage | None = None
    duration_seconds: float | None = None
    details: dict[str, Any] = attrs.field(factory=dict)


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

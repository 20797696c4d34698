"""Seed projects: what a seed is, the bounds on its plans and sandbox, the Python it needs.

:class:`SeedProject` is the project whose test proves a patch; :class:`SeedLimits`
bounds its plans and the sandbox that tests them (each limit under its ceiling in
:data:`LIMIT_CEILINGS`); :class:`SeedRuntime` is the Python and the packages its
test needs. Every name here is importable from :mod:`sandboxed_coding_agent.core.model`
too, with the rest of the data model, and that is where plugins import them from.
:class:`SeedLimits` and :class:`SeedRuntime` round-trip through the cattrs converter
(:mod:`sandboxed_coding_agent.core.serialization`); :class:`SeedProject` names local
files and never leaves this machine.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs
from attrs import validators as v

from ..verdicts.evidence import GUARD_CAPABILITIES
from ..verdicts.output_tests import MAX_OUTPUT_TESTS, OutputProbe, OutputTest
from . import patterns, seed_files
from .git_source import SourceTree
from .project_metadata import ProjectMetadata

#: Files that steer a test run (pytest's conftest and configuration), so they count as
#: test files in every seed: a plan that could rewrite them could fake any test result.
ALWAYS_TEST_PATHS = ("**/conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini")
#: What a seed's ``[guard] allow`` may name to let plans change the files that steer the
#: test framework (``core.plans.contract``); the guard in the sandbox ignores it.
TEST_INFRASTRUCTURE = "test-infrastructure"


def _as_tuple(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("expected a sequence of strings, not a single string")
    return tuple(value)


def _frozen_parameters(
    value: Mapping[str, Mapping[str, object]],
) -> Mapping[str, Mapping[str, object]]:
    return MappingProxyType({name: MappingProxyType(dict(p)) for name, p in value.items()})


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


#: The limits a git seed (``[source]``) has where its ``[limits]`` give none: a real
#: project's files are larger than a folder seed's, and a plan replaces them whole.
GIT_SEED_LIMITS: Mapping[str, int] = MappingProxyType({"max_total_bytes": 256 * 1024})


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
    :ivar memory_mb: memory the test may use, in MiB (as the reference sandbox: 512). The
        local sandbox bounds the whole sandbox by it, with ``disk_mb`` (its tmpfs pages are
        memory too), where a memory control group can; otherwise each process's address
        space (``RLIMIT_AS``), with room above it for a 2 MiB stack for each of
        ``max_processes`` threads.
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
    :ivar project: the project under test's own dependencies (from its
        ``pyproject.toml``, ``setup.cfg`` or ``setup.py``, read and never run) are
        installed too, the project's folder (``src`` when it has one) is put on the
        sandbox's ``sys.path``, so its tests import the patched files, and its metadata
        is installed as an editable install leaves it. Nothing of the project is built
        or run outside the sandbox.
    :ivar project_requirements: those dependencies, read when the seed is loaded (part
        of the cache key).
    :ivar project_metadata: the project's name, version and entry points, read when the
        seed is loaded (:mod:`.project_metadata`; part of the cache key); ``None``
        without ``project``.
    """

    python: str | None = attrs.field(default=None, validator=v.optional(v.matches_re(r"3\.[0-9]+")))
    requirements: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=_requirement
    )
    project: bool = False
    project_requirements: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, validator=_requirement
    )
    project_metadata: ProjectMetadata | None = None


@attrs.frozen
class SeedProject:
    """A small project whose test proves a patch: its files, what may change, how to test.

    :ivar name: how users select it (``agent run --seed NAME``).
    :ivar description: one line for ``agent seeds list``.
    :ivar root: the folder holding the files; it is only ever read.
    :ivar files: every file of the project, relative to ``root``.
    :ivar editable_paths: the files a plan may replace: paths or patterns
        (:mod:`~sandboxed_coding_agent.core.seeds.patterns`), each matching at least one
        file, none matching a test file. Plans may only replace existing files.
    :ivar test_command: argv run in the project folder inside the sandbox;
        a leading ``python`` means the sandbox's Python interpreter. Empty only for a
        seed with output tests, which are then its only tests.
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
        (``[guard] allow`` in ``seed.toml``; see :data:`~.evidence.GUARD_CAPABILITIES`),
        and :data:`TEST_INFRASTRUCTURE` when plans may change the test framework's files.
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
    :ivar output_command: argv of the program the output tests that give ``argv`` or
        ``stdin`` run (their arguments appended); a leading ``python`` means the sandbox's.
    :ivar output_tests: the seed's output tests, with what each must give: the agent
        keeps those and compares them outside the sandbox (:mod:`~.output_tests`). A seed
        whose output tests are its only tests has no ``test_command`` (an empty one).
    """

    name: str = attrs.field(validator=v.matches_re(r"[a-z0-9][a-z0-9._-]{0,63}"))
    description: str
    root: Path = attrs.field(converter=Path)
    files: tuple[str, ...] = attrs.field(converter=_as_tuple)
    editable_paths: tuple[str, ...] = attrs.field(converter=_as_tuple)
    test_command: tuple[str, ...] = attrs.field(converter=_as_tuple)
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
        default=(),
        converter=_as_tuple,
        validator=v.deep_iterable(v.in_((*GUARD_CAPABILITIES, TEST_INFRASTRUCTURE))),
    )
    source: SourceTree | None = None
    added_files: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    context_paths: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    context_budget_bytes: int = attrs.field(
        default=64_000, validator=[v.instance_of(int), v.ge(1_000), v.le(4_000_000)]
    )
    fail_to_pass: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    pass_to_pass: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    output_command: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    output_tests: tuple[OutputTest, ...] = attrs.field(
        default=(), validator=v.max_len(MAX_OUTPUT_TESTS)
    )

    def __attrs_post_init__(self) -> None:
        if not self.test_command and not self.output_tests:
            raise ValueError("a seed needs a test command, output tests, or both")
        programs = [t.name for t in self.output_tests if not t.is_call]
        if programs and not self.output_command:
            raise ValueError(f"output test {programs[0]!r} runs the output command: there is none")
        names = [t.name for t in self.output_tests]
        if len(set(names)) != len(names):
            raise ValueError("two output tests have the same name")

    @property
    def output_probes(self) -> tuple[OutputProbe, ...]:
        """What a sandbox receives of the output tests: how to run them, never what they
        must give nor which are hidden (see :mod:`~.output_tests`)."""
        return tuple(test.probe(self.output_command) for test in self.output_tests)

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

    @functools.cached_property
    def test_files(self) -> tuple[str, ...]:
        """The files that prove a patch and that no plan may replace (hidden ones included)."""
        marks = (*self.test_paths, *ALWAYS_TEST_PATHS, *self.hidden_test_paths)
        return tuple(f for f in self.files if patterns.matches_any(f, marks))

    @functools.cached_property
    def hidden_files(self) -> tuple[str, ...]:
        """The test files a planner never sees: :attr:`hidden_test_paths` expanded."""
        return tuple(f for f in self.files if patterns.matches_any(f, self.hidden_test_paths))

    @functools.cached_property
    def editable_files(self) -> tuple[str, ...]:
        """The files a plan may replace: :attr:`editable_paths` expanded against :attr:`files`."""
        return tuple(f for f in self.files if patterns.matches_any(f, self.editable_paths))

    @functools.cached_property
    def carried_files(self) -> tuple[str, ...]:
        """The files the agent reads and hands to every sandbox: all of a folder seed's;
        a git seed's own (:attr:`added_files`) and editable ones, the rest of its files
        being in the tree a runner binds (the job's
        :attr:`~sandboxed_coding_agent.core.model.SandboxJob.tree`)."""
        if self.source is None:
            return self.files
        return tuple(dict.fromkeys((*self.added_files, *self.editable_files)))

    def read_files(self) -> dict[str, bytes]:
        """Read :attr:`carried_files`, never following a link; nothing is ever written back.

        :raises ~sandboxed_coding_agent.core.seeds.seed_files.SeedFileError: a file is a link,
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

"""A parsed ``seed.toml`` read into a :class:`~.seeds.SeedProject`, key by key.

:class:`ManifestReader` checks every key and table the format allows
(``docs/seed-manifest.md``): the files a folder seed lists, or a git seed's
``[source]`` and the files it adds to the tree; its tests, editable files and
test command; ``[limits]``, ``[policies.NAME]``, ``[guard]`` and ``[runtime]``;
and the test IDs a graded seed lists. Each problem is a
:class:`~.manifest_errors.ManifestError` naming the key and its line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..errors import UsageError
from ..plans import contract
from ..serialization import describe_structure_error, key_hint, structure
from ..verdicts import verdict
from ..verdicts.evidence import GUARD_CAPABILITIES
from ..verdicts.output_tests import CALL, MAX_OUTPUT_TESTS, MAX_TEXT_CHARS, OutputTest
from . import git_source, patterns, seed_files, seed_folder
from .manifest_errors import ManifestError, key_lines
from .project import (
    ALWAYS_TEST_PATHS,
    GIT_SEED_LIMITS,
    TEST_INFRASTRUCTURE,
    LimitError,
    SeedLimits,
    SeedProject,
    SeedRuntime,
)
from .project_metadata import PROJECT_FILES, ProjectMetadata, ProjectMetadataError, read_project

#: A folder seed is read whole and sent to the planner: keep it small.
MAX_SEED_FILES = 500
MAX_SEED_BYTES = seed_files.MAX_SEED_BYTES
#: How many patterns one key (files, tests, editable) may list.
MAX_PATTERNS = 32
DEFAULT_FILES = ("**/*",)

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_KEYS = frozenset(
    {
        "name",
        "description",
        "files",
        "tests",
        "hidden_tests",
        "editable",
        "test_command",
        "default_prompt",
        "limits",
        "runtime",
        "policies",
        "guard",
        "source",
        "context",
        "context_budget_bytes",
        "fail_to_pass",
        "pass_to_pass",
        "output_command",
        "output_tests",
    }
)
_OUTPUT_TEST_KEYS = frozenset(
    {"name", "hidden", "argv", "stdin", "stdout", "exit_code", "call", "args", "expect"}
)
_OUTPUT_TESTS_HEADER = re.compile(r"\s*\[\[\s*output_tests\s*\]\]\s*(#.*)?")
#: The longest name of an output test, and the most arguments one appends.
MAX_OUTPUT_NAME_CHARS = 100
MAX_OUTPUT_ARGV = 256
_RUNTIME_KEYS = frozenset({"python", "requirements", "project"})
_SOURCE_KEYS = frozenset({"git", "commit"})
#: Most packages a runtime installs (its requirements, and the project's dependencies).
MAX_REQUIREMENTS = 256
#: Most test IDs in ``fail_to_pass`` and in ``pass_to_pass`` each, and their longest.
MAX_TEST_IDS = 5000
MAX_TEST_ID_CHARS = 2000

PolicyCheck = Callable[[str, Mapping[str, Any]], None]


@attrs.define
class ManifestReader:
    """Reads the parsed ``seed.toml`` of the folder open at ``root_fd`` into a seed.

    :ivar manifest: the manifest's path, for the messages.
    :ivar text: the manifest's text, where :func:`~.manifest_errors.key_lines` finds
        the line of each key.
    :ivar untrusted: the folder may come from anyone (see :func:`~.manifest.load_seed`).
    :ivar root_fd: the folder the manifest was read from, opened once: every file is
        found relative to it.
    """

    manifest: Path
    text: str
    untrusted: bool
    root_fd: int
    lines: dict[tuple[str, ...], int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.lines = key_lines(self.text)

    def fail(self, key: tuple[str, ...], problem: str) -> ManifestError:
        line = next(
            (self.lines[key[:n]] for n in range(len(key), 0, -1) if key[:n] in self.lines), None
        )
        where = f"line {line}: " if line is not None else ""
        return ManifestError(f"{self.manifest}: {where}{'.'.join(key)}: {problem}")

    def seed(self, data: dict[str, Any], check_policy: PolicyCheck | None) -> SeedProject:
        for key in data:
            if key not in _KEYS:
                raise self.fail((key,), f"unknown key {key_hint(key, _KEYS)}")
        name = self.string(data, "name")
        if not _NAME.fullmatch(name):
            raise self.fail(
                ("name",),
                "must be 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
            )
        root = self.manifest.parent.resolve()
        folder = os.fstat(self.root_fd)
        source = self.source(data.get("source"), root)
        if source is None:
            files = self.files(root, self.patterns(data, "files", DEFAULT_FILES))
            added: tuple[str, ...] = ()
        else:
            added = self.files(root, self.patterns(data, "files", DEFAULT_FILES), optional=True)
            try:
                listed = git_source.list_tree(source)
            except git_source.GitSourceError as error:
                raise self.fail(("source",), error.message) from None
            problem = _tree_clash(added, listed)
            if problem:
                raise self.fail(("files",), problem)
            tree = [entry.path for entry in listed if not entry.link]
            files = tuple(sorted({*tree, *added}))
        tests = self.patterns(data, "tests")
        hidden = self.patterns(data, "hidden_tests", ())
        editable = self.patterns(data, "editable")
        for key, given in (("tests", tests), ("hidden_tests", hidden), ("editable", editable)):
            for pattern in given:
                if not any(patterns.matches(f, pattern) for f in files):
                    raise self.fail((key,), f"{pattern!r} matches none of the seed's files")
        test_files = [
            f for f in files if patterns.matches_any(f, (*tests, *hidden, *ALWAYS_TEST_PATHS))
        ]
        clash = [f for f in test_files if patterns.matches_any(f, editable)]
        if clash:
            raise self.fail(
                ("editable",), f"matches test files, which are never editable: {', '.join(clash)}"
            )
        description = self.string(data, "description")
        output_command = self.strings(data, "output_command", ())
        if any("\0" in argument for argument in output_command):
            raise self.fail(("output_command",), "an argument contains a NUL character")
        output = self.output_tests(data.get("output_tests", []), output_command)
        test_command = self.strings(data, "test_command", () if output else None)
        if any("\0" in argument for argument in test_command):
            raise self.fail(("test_command",), "an argument contains a NUL character")
        default_prompt = self.string(data, "default_prompt")
        limits = self.limits(data.get("limits", {}), git=source is not None)
        policies = self.policies(data.get("policies", {}), check_policy)
        runtime = self.runtime(data.get("runtime"), root, source)
        guard_allow = self.guard(data.get("guard"))
        context = self.patterns(data, "context", ())
        budget = data.get("context_budget_bytes", 64_000)
        if (
            isinstance(budget, bool)
            or not isinstance(budget, int)
            or not 1_000 <= budget <= 4_000_000
        ):
            raise self.fail(("context_budget_bytes",), "must be an integer from 1000 to 4000000")
        fail_to_pass = self.test_ids(data, "fail_to_pass")
        pass_to_pass = self.test_ids(data, "pass_to_pass")
        try:
            seed = SeedProject(
                name=name,
                description=description,
                root=root,
                root_identity=(folder.st_dev, folder.st_ino),
                files=files,
                editable_paths=editable,
                test_command=test_command,
                default_prompt=default_prompt,
                limits=limits,
                test_paths=tests,
                hidden_test_paths=hidden,
                policies=policies,
                runtime=runtime,
                untrusted=self.untrusted,
                guard_allow=guard_allow,
                source=source,
                added_files=added,
                context_paths=context,
                context_budget_bytes=budget,
                fail_to_pass=fail_to_pass,
                pass_to_pass=pass_to_pass,
                output_command=output_command,
                output_tests=output,
            )
        except (ValueError, TypeError) as error:  # the checks above should leave nothing here
            raise ManifestError(f"{self.manifest}: {error}") from None
        if (fail_to_pass or pass_to_pass) and verdict.seed_framework(seed) is None:
            key = "fail_to_pass" if fail_to_pass else "pass_to_pass"
            raise self.fail(
                (key,),
                "grading test by test needs a test command whose framework reports each test "
                "(python -m pytest, pytest, python -m unittest, or python FILE.py running "
                "unittest)",
            )
        return seed

    def string(self, data: Mapping[str, Any], key: str) -> str:
        if key not in data:
            raise ManifestError(f"{self.manifest}: missing required key {key!r}")
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail((key,), "must be a non-empty string")
        return value

    def strings(
        self, data: Mapping[str, Any], key: str, default: tuple[str, ...] | None = None
    ) -> tuple[str, ...]:
        if key not in data:
            if default is not None:
                return default
            raise ManifestError(f"{self.manifest}: missing required key {key!r}")
        value = data[key]
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(item, str) and item for item in value)
        ):
            raise self.fail((key,), "must be a non-empty list of non-empty strings")
        return tuple(value)

    def patterns(
        self, data: Mapping[str, Any], key: str, default: tuple[str, ...] | None = None
    ) -> tuple[str, ...]:
        found = self.strings(data, key, default)
        if len(found) > MAX_PATTERNS:
            raise self.fail((key,), f"{len(found)} patterns; at most {MAX_PATTERNS}")
        for pattern in found:
            problem = patterns.pattern_problem(pattern)
            if problem:
                raise self.fail((key,), f"{pattern!r}: {problem}")
        return found

    def output_tests(
        self, tables: object, output_command: tuple[str, ...]
    ) -> tuple[OutputTest, ...]:
        """The ``[[output_tests]]`` tables, each checked, with its expectations as JSON."""
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise self.fail(("output_tests",), "must be tables ([[output_tests]])")
        if len(tables) > MAX_OUTPUT_TESTS:
            raise self.fail(("output_tests",), f"{len(tables)} tests; at most {MAX_OUTPUT_TESTS}")
        headers = [
            number
            for number, line in enumerate(self.text.splitlines(), 1)
            if _OUTPUT_TESTS_HEADER.fullmatch(line)
        ]
        found: list[OutputTest] = []
        for index, table in enumerate(tables):
            test = _OutputTestReader(self, index, headers).read(table, output_command)
            if any(other.name == test.name for other in found):
                raise _OutputTestReader(self, index, headers).fail(
                    "name", f"{test.name!r}: another output test has that name"
                )
            found.append(test)
        return tuple(found)

    def source(self, table: object, root: Path) -> git_source.SourceTree | None:
        if table is None:
            return None
        if not isinstance(table, dict):
            raise self.fail(("source",), "must be a table with git and commit")
        for key in table:
            if key not in _SOURCE_KEYS:
                raise self.fail(("source", key), f"unknown key {key_hint(key, _SOURCE_KEYS)}")
        for key in sorted(_SOURCE_KEYS):
            if not isinstance(table.get(key), str) or not table[key].strip():
                raise self.fail(("source", key), "must be a non-empty string")
        repository: str = table["git"]
        if not (
            os.path.isabs(repository)
            or repository.startswith("-")
            or "://" in repository
            or "::" in repository
        ):
            # A relative path is relative to the seed's folder.
            repository = os.path.normpath(root / repository)
        problem = git_source.location_problem(repository)
        if problem:
            raise self.fail(("source", "git"), problem)
        try:
            return git_source.resolve(repository, table["commit"])
        except git_source.GitSourceError as error:
            raise self.fail(("source",), error.message) from None

    def project_metadata(self, root: Path, source: git_source.SourceTree | None) -> ProjectMetadata:
        """What the project says about itself (:mod:`.project_metadata`), from its
        ``pyproject.toml``, ``setup.cfg`` and ``setup.py``: the seed folder's own ones if it
        has any, else the tree's."""
        own = any((root / path).is_file() for path in PROJECT_FILES)

        def read(path: str) -> bytes | None:
            if own or source is None:
                if not (root / path).is_file():
                    return None
                try:
                    data = seed_files.read_seed_files(root, (path,), untrusted=self.untrusted)
                except seed_files.SeedFileError as error:
                    raise self.fail(("runtime", "project"), error.message) from None
                return data[path]
            try:
                return git_source.show(source, path)
            except git_source.GitSourceError as error:
                raise self.fail(("runtime", "project"), error.message) from None

        try:
            found = read_project(read)
        except ProjectMetadataError as error:
            raise self.fail(("runtime", "project"), error.message) from None
        if len(found.dependencies) > MAX_REQUIREMENTS:
            raise self.fail(
                ("runtime", "project"),
                f"the project lists {len(found.dependencies)} dependencies; "
                f"a runtime installs at most {MAX_REQUIREMENTS}",
            )
        return found

    def test_ids(self, data: Mapping[str, Any], key: str) -> tuple[str, ...]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(
            isinstance(item, str)
            and item.strip()
            and len(item) <= MAX_TEST_ID_CHARS
            and not patterns.has_control_character(item)
            for item in value
        ):
            raise self.fail(
                (key,),
                f"must be a list of test IDs (non-empty strings of at most {MAX_TEST_ID_CHARS} "
                "characters, no control characters)",
            )
        if len(value) > MAX_TEST_IDS:
            raise self.fail((key,), f"{len(value)} test IDs; at most {MAX_TEST_IDS}")
        return tuple(dict.fromkeys(value))

    def files(
        self, root: Path, wanted: tuple[str, ...], *, optional: bool = False
    ) -> tuple[str, ...]:
        candidates = seed_folder.walk(self.root_fd, root)
        chosen: dict[str, None] = {}
        for pattern in wanted:
            if patterns.is_literal(pattern):
                problem = seed_folder.literal_file_problem(self.root_fd, pattern)
                if problem:
                    raise self.fail(("files",), f"{pattern!r}: {problem}")
                chosen[pattern] = None
                continue
            hits = [path for path in candidates if patterns.matches(path, pattern)]
            if not hits and optional:
                continue
            if not hits:
                raise self.fail(("files",), f"{pattern!r} matches no file in {root}")
            for path in hits:
                if not contract.is_utf8(path):
                    raise self.fail(
                        ("files",),
                        f"{seed_files.shown_name(path)}: the file name is not valid UTF-8, so it "
                        "cannot be shown to a planner; rename the file or leave it out of files",
                    )
                if patterns.has_control_character(path):
                    raise self.fail(
                        ("files",),
                        f"{path!r}: the file name contains a control character; "
                        "rename the file or leave it out of files",
                    )
            chosen.update(dict.fromkeys(hits))
        if len(chosen) > MAX_SEED_FILES:
            raise self.fail(("files",), f"{len(chosen)} files; a seed has at most {MAX_SEED_FILES}")
        size = 0
        for path in chosen:
            try:
                # lstat: the chosen files are no links, and the size of what one points to
                # is none of the seed's business.
                info = seed_folder.lstat_at(self.root_fd, path)
            except OSError as error:
                raise self.fail(("files",), f"{path!r}: cannot be read: {error.strerror}") from None
            if self.untrusted and info.st_nlink != 1:
                problem = seed_files.hard_link_problem(path, info.st_nlink)
                raise self.fail(("files",), f"{path!r}: {problem}")
            size += info.st_size
        if size > MAX_SEED_BYTES:
            raise self.fail(("files",), f"{size} bytes in all; a seed has at most {MAX_SEED_BYTES}")
        return tuple(sorted(chosen))

    def limits(self, table: object, *, git: bool = False) -> SeedLimits:
        if not isinstance(table, dict):
            raise self.fail(("limits",), "must be a table")
        if git:
            table = {**GIT_SEED_LIMITS, **table}
        fields = attrs.fields_dict(SeedLimits)
        for key, value in table.items():
            if key not in fields:
                raise self.fail(("limits", key), f"unknown key {key_hint(key, fields)}")
            # Checked one by one first, so that a value off its bounds is shown at its line.
            if key in fields and isinstance(value, int | float) and not isinstance(value, bool):
                try:
                    fields[key].validator(None, fields[key], value)  # type: ignore[misc]
                except LimitError as error:
                    raise self.fail(("limits", key), str(error)) from None
        try:
            return structure(table, SeedLimits)
        except Exception as error:  # cattrs raises a tree of ordinary exceptions
            problems = describe_structure_error(error, root="limits")
            raise self.fail(("limits",), "; ".join(problems)) from None

    def policies(
        self, table: object, check_policy: PolicyCheck | None
    ) -> dict[str, dict[str, Any]]:
        if not isinstance(table, dict):
            raise self.fail(("policies",), "must be a table of tables, one per policy")
        found: dict[str, dict[str, Any]] = {}
        for name, parameters in table.items():
            key = ("policies", name)
            if not isinstance(parameters, dict):
                raise self.fail(
                    key, f"must be a table ([policies.{name}]) of the policy's parameters"
                )
            if check_policy is not None:
                try:
                    check_policy(name, parameters)
                except UsageError as error:
                    raise self.fail(key, error.message) from None
                except (ValueError, TypeError) as error:
                    raise self.fail(key, str(error)) from None
            found[name] = parameters
        return found

    def guard(self, table: object) -> tuple[str, ...]:
        if table is None:
            return ()
        if not isinstance(table, dict):
            raise self.fail(("guard",), "must be a table")
        for key in table:
            if key != "allow":
                raise self.fail(("guard", key), f"unknown key {key_hint(key, ('allow',))}")
        allow = table.get("allow", [])
        # The guard's capabilities, and what the patch contract lets through on request.
        names = (*GUARD_CAPABILITIES, TEST_INFRASTRUCTURE)
        known = ", ".join(names)
        if not isinstance(allow, list) or not all(
            isinstance(item, str) and item in names for item in allow
        ):
            raise self.fail(("guard", "allow"), f"must be a list of capabilities ({known})")
        return tuple(dict.fromkeys(allow))

    def runtime(
        self, table: object, root: Path, source: git_source.SourceTree | None
    ) -> SeedRuntime | None:
        if table is None:
            return None
        if not isinstance(table, dict):
            raise self.fail(("runtime",), "must be a table")
        for key in table:
            if key not in _RUNTIME_KEYS:
                raise self.fail(("runtime", key), f"unknown key {key_hint(key, _RUNTIME_KEYS)}")
        python = table.get("python")
        if python is not None and not (
            isinstance(python, str) and re.fullmatch(r"3\.[0-9]+", python)
        ):
            raise self.fail(("runtime", "python"), 'must be a version such as "3.12"')
        requirements = table.get("requirements", [])
        if not isinstance(requirements, list) or not all(
            isinstance(item, str) and item for item in requirements
        ):
            raise self.fail(("runtime", "requirements"), "must be a list of non-empty strings")
        if len(requirements) > MAX_REQUIREMENTS:
            raise self.fail(
                ("runtime", "requirements"),
                f"{len(requirements)} packages; at most {MAX_REQUIREMENTS}",
            )
        project = table.get("project", False)
        if not isinstance(project, bool):
            raise self.fail(("runtime", "project"), "must be true or false")
        metadata = self.project_metadata(root, source) if project else None
        try:
            return SeedRuntime(
                python=python,
                requirements=requirements,
                project=project,
                project_requirements=metadata.dependencies if metadata else (),
                project_metadata=metadata,
            )
        except ValueError as error:
            reason = str(error).removeprefix("requirements: ")
            raise self.fail(("runtime", "requirements"), reason) from None


def _tree_clash(added: tuple[str, ...], tree: list[git_source.TreeFile]) -> str | None:
    """Why one of a git seed's own files cannot go where it is in the tree, or ``None``.

    One may replace a file or a link of the tree, but not stand under one: in the
    sandbox it would be written through the link, wherever that leads, or over a file.
    Nor may it replace a folder of the tree.
    """
    kinds = {entry.path: "a symbolic link" if entry.link else "a file" for entry in tree}
    folders = {entry.path.rpartition("/")[0] for entry in tree}
    for folder in list(folders):
        while folder:
            folder = folder.rpartition("/")[0]
            folders.add(folder)
    for path in added:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            if above in kinds:
                return (
                    f"{path!r}: under {above!r}, {kinds[above]} of the tree; a seed's file "
                    "may replace a file of the tree, not stand under one"
                )
        if path in folders:
            return f"{path!r}: a folder of the tree; a seed's file may replace a file of it only"
    return None


@attrs.define
class _OutputTestReader:
    """Reads one ``[[output_tests]]`` table (the ``index``-th), naming its line in each
    problem: the line of the key within the table, or else of the table's header."""

    reader: ManifestReader
    index: int
    headers: list[int]

    def fail(self, key: str | None, problem: str) -> ManifestError:
        lines = self.reader.text.splitlines()
        line = self.headers[self.index] if self.index < len(self.headers) else None
        if line is not None and key is not None:
            end = self.headers[self.index + 1] if self.index + 1 < len(self.headers) else None
            assignment = re.compile(rf"\s*{re.escape(key)}\s*=")
            for number in range(line + 1, (end or len(lines) + 1)):
                if assignment.match(lines[number - 1]):
                    line = number
                    break
        where = f"line {line}: " if line is not None else ""
        named = f"output_tests[{self.index + 1}]" + (f".{key}" if key else "")
        return ManifestError(f"{self.reader.manifest}: {where}{named}: {problem}")

    def read(self, table: dict[str, Any], output_command: tuple[str, ...]) -> OutputTest:
        for key in table:
            if key not in _OUTPUT_TEST_KEYS:
                raise self.fail(key, f"unknown key {key_hint(key, _OUTPUT_TEST_KEYS)}")
        name = table.get("name", f"output-{self.index + 1}")
        if (
            not isinstance(name, str)
            or not name.strip()
            or len(name) > MAX_OUTPUT_NAME_CHARS
            or patterns.has_control_character(name)
        ):
            raise self.fail(
                "name",
                f"must be a non-empty string of at most {MAX_OUTPUT_NAME_CHARS} characters, "
                "no control characters",
            )
        hidden = table.get("hidden", False)
        if not isinstance(hidden, bool):
            raise self.fail("hidden", "must be true or false")
        program = "argv" in table or "stdin" in table
        if ("call" in table) == program:
            raise self.fail(
                None,
                "give either call (a function to call) or argv and/or stdin (arguments of the "
                "output command), not both nor neither",
            )
        if program:
            return self.program(table, name, hidden, output_command)
        return self.call(table, name, hidden)

    def program(
        self, table: dict[str, Any], name: str, hidden: bool, output_command: tuple[str, ...]
    ) -> OutputTest:
        for key in ("args", "expect"):
            if key in table:
                raise self.fail(key, "belongs to a call test; this one runs the output command")
        if not output_command:
            raise self.fail(None, "runs the output command, and the seed has no output_command")
        argv = table.get("argv", [])
        if (
            not isinstance(argv, list)
            or not all(isinstance(item, str) and "\0" not in item for item in argv)
            or len(argv) > MAX_OUTPUT_ARGV
            or sum(len(item) for item in argv) > MAX_TEXT_CHARS
        ):
            raise self.fail(
                "argv",
                f"must be a list of at most {MAX_OUTPUT_ARGV} strings (no NUL character, "
                f"{MAX_TEXT_CHARS} characters in all)",
            )
        stdin = self.text(table, "stdin", required=False)
        stdout = self.text(table, "stdout", required=True)
        exit_code = table.get("exit_code", 0)
        if (
            isinstance(exit_code, bool)
            or not isinstance(exit_code, int)
            or not 0 <= exit_code <= 255
        ):
            raise self.fail("exit_code", "must be an integer from 0 to 255")
        return OutputTest(
            name=name,
            hidden=hidden,
            argv=tuple(argv),
            stdin=stdin,
            stdout=stdout,
            exit_code=exit_code,
        )

    def call(self, table: dict[str, Any], name: str, hidden: bool) -> OutputTest:
        for key in ("stdout", "exit_code"):
            if key in table:
                raise self.fail(key, "belongs to a test of the output command; this one is a call")
        call = table["call"]
        if not isinstance(call, str) or not CALL.fullmatch(call):
            raise self.fail("call", "must be module:function (identifiers, the module dotted)")
        args = table.get("args", [])
        if not isinstance(args, list):
            raise self.fail("args", "must be a list of the call's arguments (JSON values)")
        if "expect" not in table:
            raise self.fail(None, "a call test needs expect, the value the call must return")
        return OutputTest(
            name=name,
            hidden=hidden,
            call=call,
            args=self.json({"args": args}, "args"),
            expect=self.json(table, "expect"),
        )

    def text(self, table: dict[str, Any], key: str, *, required: bool) -> str | None:
        if key not in table:
            if required:
                raise self.fail(None, f"a test of the output command needs {key}")
            return None
        value = table[key]
        if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
            raise self.fail(key, f"must be a string of at most {MAX_TEXT_CHARS} characters")
        return value

    def json(self, table: dict[str, Any], key: str) -> str:
        """``table[key]`` as JSON text; a TOML date or time, which JSON lacks, is refused."""
        try:
            text = json.dumps(table[key], allow_nan=False, sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError):
            raise self.fail(
                key, "must hold JSON values only (no dates or times, no nan or inf)"
            ) from None
        if len(text) > MAX_TEXT_CHARS:
            raise self.fail(key, f"must be at most {MAX_TEXT_CHARS} characters as JSON")
        return text

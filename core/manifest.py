"""Folder seeds: a directory with a ``seed.toml`` describing a seed project.

``agent run --seed ./path/to/seed`` reads the manifest with :func:`load_seed`;
a plugin can ship a folder seed inside its package and register the result of
:func:`load_seed` from its ``register_seeds`` hook. The format is documented in
``docs/seed-manifest.md``; every problem is reported as one
:class:`ManifestError` naming the file, the line and the key.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import re
import stat
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from . import contract, git_source, patterns, seed_files, verdict
from .errors import UsageError
from .evidence import GUARD_CAPABILITIES
from .model import ALWAYS_TEST_PATHS, LimitError, SeedLimits, SeedProject, SeedRuntime
from .policy_parameters import INT_RANGE
from .serialization import describe_structure_error, structure

MANIFEST = "seed.toml"
#: A folder seed is read whole and sent to the planner: keep it small.
MAX_SEED_FILES = 500
MAX_SEED_BYTES = seed_files.MAX_SEED_BYTES
#: A manifest is a few lines; a seed folder may come from anyone, so it is read within bounds.
MAX_MANIFEST_BYTES = 256 * 1024
MAX_NESTING = 16
#: How deep a seed folder's folders may nest, and how many entries it may hold in all.
MAX_DEPTH = 16
MAX_WALK_ENTRIES = 2000
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
    }
)
_RUNTIME_KEYS = frozenset({"python", "requirements", "project"})
_SOURCE_KEYS = frozenset({"git", "commit"})
#: Most test IDs in ``fail_to_pass`` and in ``pass_to_pass`` each, and their longest.
#: Most packages a runtime installs (its requirements, and the project's dependencies).
MAX_REQUIREMENTS = 256
MAX_TEST_IDS = 5000
MAX_TEST_ID_CHARS = 2000

PolicyCheck = Callable[[str, Mapping[str, Any]], None]

#: Whether :func:`load_seed` trusts a folder when not told: only while the plugin host
#: runs a plugin's ``register_seeds`` hook (see :func:`reading_plugin_seeds`).
_PLUGIN_SEEDS = contextvars.ContextVar("reading_plugin_seeds", default=False)


class ManifestError(UsageError):
    """A ``seed.toml`` that cannot describe a seed; the message names the line and the problem."""


def looks_like_path(value: str) -> bool:
    """Whether ``--seed VALUE`` names a folder rather than a registered seed.

    Seed names never contain ``/`` and never start with ``.``, so ``./calculator``
    is the folder even when a seed called ``calculator`` exists.
    """
    return "/" in value or os.sep in value or value.startswith(".") or value.endswith(".toml")


@contextlib.contextmanager
def reading_plugin_seeds() -> Iterator[None]:
    """While active, :func:`load_seed` trusts the folders it reads unless told otherwise.

    The plugin host wraps each plugin's ``register_seeds`` hook in it: a folder a plugin
    ships is part of an installed package, whose files installers such as
    ``uv tool install`` hard-link from their cache, and the plugin's code runs inside
    the agent anyway. So a plugin author never needs to pass ``untrusted``.
    """
    token = _PLUGIN_SEEDS.set(True)
    try:
        yield
    finally:
        _PLUGIN_SEEDS.reset(token)


def load_seed(
    location: str | os.PathLike[str],
    *,
    check_policy: PolicyCheck | None = None,
    untrusted: bool | None = None,
) -> SeedProject:
    """Read the folder seed at ``location`` (its folder, or its ``seed.toml``).

    :param check_policy: called with each ``[policies.NAME]`` table so that an
        unknown policy or a bad parameter is reported with its line; it raises
        :class:`ValueError`, :class:`TypeError` or :class:`UsageError`.
    :param untrusted: the folder may come from anyone, so a hard-linked file among the
        seed's files is refused, now and when the files are read
        (:attr:`SeedProject.untrusted`). ``None``: untrusted, except when a plugin's
        ``register_seeds`` hook calls it.
    :raises ManifestError: the manifest is missing, is not TOML, or describes no valid seed.
    """
    if untrusted is None:
        untrusted = not _PLUGIN_SEEDS.get()
    path = Path(location)
    manifest = path if path.name == MANIFEST or path.is_file() else path / MANIFEST
    # The folder is opened once, and everything after is read relative to that descriptor:
    # a folder swapped in at its path meanwhile (a link, a rename) is never looked into.
    try:
        root_fd = os.open(manifest.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ManifestError(
            f"{manifest}: no such file (a folder seed needs a {MANIFEST})"
        ) from None
    except OSError as error:
        raise ManifestError(f"{manifest.parent}: cannot read it: {error.strerror}") from None
    try:
        text = _read_manifest(manifest, untrusted, root_fd)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ManifestError(f"{manifest}: {_toml_problem(str(error))}") from None
        except RecursionError:  # tomllib parses nested values recursively
            raise ManifestError(f"{manifest}: values are nested too deeply") from None
        except ValueError:  # Python's limit on the digits of an integer it reads (4,300)
            raise ManifestError(f"{manifest}: an integer is outside TOML's 64-bit range") from None
        if _nested_deeper(data, MAX_NESTING):
            raise ManifestError(f"{manifest}: values are nested too deeply")
        reader = _Reader(manifest, text, untrusted, root_fd)
        out_of_range = _integer_out_of_range(data, ())
        if out_of_range is not None:
            raise reader.fail(out_of_range, "an integer outside TOML's 64-bit range")
        return reader.seed(data, check_policy)
    finally:
        os.close(root_fd)


def _read_manifest(manifest: Path, untrusted: bool, root_fd: int) -> str:
    """The manifest's text, if it is a small regular file of its own.

    A link is never followed (it could point at any file the caller can read,
    whose text would then reach the messages and the planner), and a FIFO or a
    device is never opened (opening some has effects): the entry is first
    opened as a bare reference (``O_PATH``), checked, and only then reopened
    through that reference for reading, so what is read is what was checked.
    """
    try:
        entry = os.open(manifest.name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
    except FileNotFoundError:
        raise ManifestError(
            f"{manifest}: no such file (a folder seed needs a {MANIFEST})"
        ) from None
    except OSError as error:
        raise ManifestError(f"{manifest}: cannot read it: {error.strerror}") from None
    try:
        info = os.fstat(entry)
        if stat.S_ISLNK(info.st_mode):
            raise ManifestError(
                f"{manifest}: is a symbolic link; the manifest must be a file of the seed folder"
            )
        if not stat.S_ISREG(info.st_mode):
            raise ManifestError(f"{manifest}: is not a regular file")
        if untrusted and info.st_nlink != 1:
            problem = seed_files.hard_link_problem(MANIFEST, info.st_nlink)
            raise ManifestError(f"{manifest}: {problem}")
        if info.st_size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{manifest}: larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            fd = os.open(f"/proc/self/fd/{entry}", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as error:
            raise ManifestError(f"{manifest}: cannot read it: {error.strerror}") from None
    finally:
        os.close(entry)
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
        except OSError as error:
            raise ManifestError(f"{manifest}: cannot read it: {error.strerror}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{manifest}: larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ManifestError(f"{manifest}: cannot read it: {error}") from None


def _nested_deeper(value: object, levels: int) -> bool:
    """Whether tables and arrays nest deeper than ``levels`` in ``value``."""
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, list):
        children = value
    else:
        return False
    return levels == 0 or any(_nested_deeper(child, levels - 1) for child in children)


def _integer_out_of_range(value: object, key: tuple[str, ...]) -> tuple[str, ...] | None:
    """The key of an integer TOML 1.0 does not allow (beyond 64 bits), or ``None``.

    tomllib reads any size, but no limit or parameter means one, and one of
    4,300 digits or more cannot even be written out in a message or a run record.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return None if value in INT_RANGE else key
    if isinstance(value, dict):
        children = [((*key, str(name)), child) for name, child in value.items()]
    elif isinstance(value, list):  # an item has no key of its own: the list's is named
        children = [(key, item) for item in value]
    else:
        return None
    for child_key, child in children:
        found = _integer_out_of_range(child, child_key)
        if found is not None:
            return found
    return None


def _toml_problem(message: str) -> str:
    found = re.fullmatch(r"(.*) \(at (line \d+, column \d+|end of document)\)", message, re.S)
    if not found:
        return f"not valid TOML: {message}"
    return f"{found.group(2)}: not valid TOML: {found.group(1)}"


@attrs.define
class _Reader:
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
                raise self.fail((key,), f"unknown key (known: {', '.join(sorted(_KEYS))})")
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
        test_command = self.strings(data, "test_command")
        if any("\0" in argument for argument in test_command):
            raise self.fail(("test_command",), "an argument contains a NUL character")
        default_prompt = self.string(data, "default_prompt")
        limits = self.limits(data.get("limits", {}))
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

    def source(self, table: object, root: Path) -> git_source.SourceTree | None:
        if table is None:
            return None
        if not isinstance(table, dict):
            raise self.fail(("source",), "must be a table with git and commit")
        for key in table:
            if key not in _SOURCE_KEYS:
                raise self.fail(("source", key), "unknown key (known: commit, git)")
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

    def project_requirements(
        self, root: Path, source: git_source.SourceTree | None
    ) -> tuple[str, ...]:
        """The ``[project] dependencies`` of the project's ``pyproject.toml``: the seed's own
        one if it has one, else the tree's."""
        text: bytes | None
        if (root / "pyproject.toml").is_file() or source is None:
            try:
                data = seed_files.read_seed_files(
                    root, ("pyproject.toml",), untrusted=self.untrusted
                )
            except seed_files.SeedFileError as error:
                raise self.fail(("runtime", "project"), error.message) from None
            text = data["pyproject.toml"]
        else:
            try:
                text = git_source.show(source, "pyproject.toml")
            except git_source.GitSourceError as error:
                raise self.fail(("runtime", "project"), error.message) from None
        if text is None:
            raise self.fail(("runtime", "project"), "the project has no pyproject.toml")
        try:
            project = tomllib.loads(text.decode("utf-8")).get("project", {})
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError, ValueError):
            raise self.fail(
                ("runtime", "project"), "the project's pyproject.toml is not valid TOML"
            ) from None
        dependencies = project.get("dependencies", []) if isinstance(project, dict) else None
        if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
            raise self.fail(
                ("runtime", "project"),
                "the project's pyproject.toml has no list of strings at [project] dependencies",
            )
        if len(dependencies) > MAX_REQUIREMENTS:
            raise self.fail(
                ("runtime", "project"),
                f"the project's pyproject.toml lists {len(dependencies)} dependencies; "
                f"a runtime installs at most {MAX_REQUIREMENTS}",
            )
        return tuple(dependencies)

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
        candidates = _walk(self.root_fd, root)
        chosen: dict[str, None] = {}
        for pattern in wanted:
            if patterns.is_literal(pattern):
                problem = _literal_file_problem(self.root_fd, pattern)
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
                info = _lstat_at(self.root_fd, path)
            except OSError as error:
                raise self.fail(("files",), f"{path!r}: cannot be read: {error.strerror}") from None
            if self.untrusted and info.st_nlink != 1:
                problem = seed_files.hard_link_problem(path, info.st_nlink)
                raise self.fail(("files",), f"{path!r}: {problem}")
            size += info.st_size
        if size > MAX_SEED_BYTES:
            raise self.fail(("files",), f"{size} bytes in all; a seed has at most {MAX_SEED_BYTES}")
        return tuple(sorted(chosen))

    def limits(self, table: object) -> SeedLimits:
        if not isinstance(table, dict):
            raise self.fail(("limits",), "must be a table")
        fields = attrs.fields_dict(SeedLimits)
        for key, value in table.items():
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
                raise self.fail(("guard", key), "unknown key (known: allow)")
        allow = table.get("allow", [])
        known = ", ".join(GUARD_CAPABILITIES)
        if not isinstance(allow, list) or not all(
            isinstance(item, str) and item in GUARD_CAPABILITIES for item in allow
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
                raise self.fail(
                    ("runtime", key), f"unknown key (known: {', '.join(sorted(_RUNTIME_KEYS))})"
                )
        python = table.get("python")
        if python is not None and not (isinstance(python, str) and re.fullmatch(r"3\.\d+", python)):
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
        try:
            return SeedRuntime(
                python=python,
                requirements=requirements,
                project=project,
                project_requirements=self.project_requirements(root, source) if project else (),
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


def _walk(root_fd: int, root: Path) -> list[str]:
    """Regular files of the folder open at ``root_fd`` (shown as ``root``), without hidden
    entries, caches, links and the manifest, never following a link.

    A seed folder may come from anyone: one nested deeper than :data:`MAX_DEPTH` or
    holding more than :data:`MAX_WALK_ENTRIES` entries is refused rather than walked.
    """
    found: list[str] = []
    seen = 0
    for directory, subdirs, names, folder_fd in os.fwalk(".", dir_fd=root_fd):
        base = directory.removeprefix(".").lstrip("/")
        seen += len(subdirs) + len(names)
        if seen > MAX_WALK_ENTRIES:
            raise ManifestError(
                f"{root}: holds more than {MAX_WALK_ENTRIES} files and folders; "
                "a seed folder holds the seed's files only"
            )
        depth = len(base.split("/")) if base else 0
        if subdirs and depth >= MAX_DEPTH:
            raise ManifestError(
                f"{root}: folders nest more than {MAX_DEPTH} levels deep ({base!r})"
            )
        # fwalk lists a link to a folder among the names, never among the folders.
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            if name.startswith(".") or name.endswith((".pyc", ".pyo")):
                continue
            try:
                mode = os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode
            except OSError:
                continue
            relative = f"{base}/{name}" if base else name
            if stat.S_ISREG(mode) and relative != MANIFEST:
                found.append(relative)
    return found


def _lstat_at(root_fd: int, relative: str) -> os.stat_result:
    """The entry at ``relative`` below ``root_fd``, reached without following any link."""
    *folders, name = relative.split("/")
    opened: list[int] = []
    try:
        folder_fd = root_fd
        for part in folders:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            folder_fd = os.open(part, flags, dir_fd=folder_fd)
            opened.append(folder_fd)
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    finally:
        for fd in opened:
            os.close(fd)


def _literal_file_problem(root_fd: int, relative: str) -> str | None:
    try:
        mode = _lstat_at(root_fd, relative).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "no such file"
    except OSError as error:
        if error.errno == errno.ELOOP:
            mode = stat.S_IFLNK
        else:
            return f"cannot be read: {error.strerror}"
    # A link could hand the sandbox, and the provider, any file the caller can read.
    if stat.S_ISLNK(mode):
        return "is or passes through a symbolic link; seed files must be inside the seed folder"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if relative == MANIFEST:
        return "the manifest itself is not a seed file"
    return None


_BARE_KEY = r"[A-Za-z0-9_-]+"
_QUOTED_KEY = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_KEY = rf"(?:{_BARE_KEY}|{_QUOTED_KEY})"
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?")
_ASSIGNMENT = re.compile(rf"\s*({_DOTTED})\s*=")


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line where each table and key of a (valid) TOML document is first written.

    Only used to point at a problem: values spanning lines (arrays, inline
    tables, multi-line strings) are skipped so their content is never taken
    for a key, and keys inside inline tables are found through their parent.
    """
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    depth = 0
    open_string: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        rest = line
        if open_string is None and depth == 0:
            header = _HEADER.fullmatch(line)
            if header:
                table = _split_key(header.group(1))
                lines.setdefault(table, number)
                continue
            assignment = _ASSIGNMENT.match(line)
            if assignment:
                lines.setdefault(table + _split_key(assignment.group(1)), number)
                rest = line[assignment.end() :]
        depth, open_string = _scan_value(rest, depth, open_string)
    return lines


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = []
    for token in re.findall(_KEY, dotted):
        if token.startswith('"'):
            parts.append(tomllib.loads(f"k = {token}")["k"])
        elif token.startswith("'"):
            parts.append(token[1:-1])
        else:
            parts.append(token)
    return tuple(parts)


def _scan_value(text: str, depth: int, open_string: str | None) -> tuple[int, str | None]:
    """Bracket depth and open multi-line string after ``text``, given those before it."""
    i = 0
    while i < len(text):
        if open_string is not None:
            end = _closing(text, i, open_string)
            if end < 0:
                return depth, open_string
            i, open_string = end + 3, None
            continue
        char = text[i]
        if char == "#":
            break
        if text.startswith(('"""', "'''"), i):
            open_string, i = text[i : i + 3], i + 3
        elif char == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif char == "'":
            end = text.find("'", i + 1)
            i = len(text) if end < 0 else end + 1
        else:
            depth += (char in "[{") - (char in "]}")
            i += 1
    return depth, open_string


def _closing(text: str, start: int, delimiter: str) -> int:
    i = start
    while (found := text.find(delimiter, i)) >= 0:
        if delimiter == "'''":
            return found
        # Count the backslashes just before it, not by slicing the text so far: a manifest
        # full of escaped quotes would make that quadratic.
        before = found
        while before > start and text[before - 1] == "\\":
            before -= 1
        if (found - before) % 2 == 0:
            return found
        i = found + 1
    return -1

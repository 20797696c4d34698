"""What a Python project says about itself, read without running any of it.

A seed with ``[runtime] project = true`` tests a Python project. Its runtime gets the
project's dependencies, its folder on ``sys.path``, and the metadata an editable install
would leave (a ``.dist-info`` folder: name, version, requirements, entry points), so that
``importlib.metadata.version(name)`` and plugins found by their entry points work as after
``pip install -e .``. The project's build code never runs outside the sandbox, so all of
this is read, never executed, from the first of:

* ``pyproject.toml``'s ``[project]`` table (``name``, ``version``, ``dependencies``,
  ``scripts``, ``gui-scripts``, ``entry-points``);
* ``setup.cfg``'s ``[metadata]`` and ``[options]`` (``install_requires``) and
  ``[options.entry_points]``, for what the first leaves out (a version or dependencies
  it calls ``dynamic``);
* ``setup.py``'s ``setup(...)`` call, parsed and never run: only literal keyword values
  count (a string, a list of strings, a dict of lists), or a module-level name bound once
  to such a literal.

A version that none of them gives literally (read from a module at build time, or from
git tags) is ``0+unknown``. Everything read is bounded and checked, since the project may
be anyone's: a name as the packaging rules allow one, a version of safe characters, entry
points without line breaks.
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from attrs import validators as v

#: The files a project's metadata is read from, in order.
PROJECT_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
#: The version of a project that gives none literally.
UNKNOWN_VERSION = "0+unknown"
MAX_ENTRY_POINTS = 256
MAX_FILE_BYTES = 1 << 20
#: A ``setup.py`` is parsed into a tree, whose size grows with its lines far beyond its bytes.
MAX_SETUP_PY_BYTES = 64 << 10
#: Entry point groups left out: the test framework's plugins (pytest loads every
#: ``pytest11`` entry point at start, before the test: the project's code would run as the
#: framework's, which the guard refuses).
LEFT_OUT_GROUPS = frozenset({"pytest11"})
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}")
#: A requirement as a line of METADATA: printable ASCII (the index's names are).
_DEPENDENCY = re.compile(r"[ -~]{1,1000}")
MAX_DEPENDENCIES = 1000
_GROUP = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_ENTRY_NAME = re.compile(r"[\w.+-][\w. +-]{0,127}", re.ASCII)
_ENTRY_VALUE = re.compile(r"[A-Za-z_][\w.]*( *: *[A-Za-z_][\w.]*)?( *\[[\w, .-]*\])?", re.ASCII)


class ProjectMetadataError(Exception):
    """The project's metadata cannot be read: the message says what and where."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


@attrs.frozen
class EntryPoint:
    """One entry point: ``group`` (``console_scripts``, a plugin group), ``name``, ``value``."""

    group: str = attrs.field(validator=v.matches_re(_GROUP))
    name: str = attrs.field(validator=v.matches_re(_ENTRY_NAME))
    value: str = attrs.field(validator=v.matches_re(_ENTRY_VALUE))


def _strings_tuple(found: Iterable[str]) -> tuple[str, ...]:
    return tuple(found)


def _entry_points_tuple(found: Iterable[EntryPoint]) -> tuple[EntryPoint, ...]:
    return tuple(found)


@attrs.frozen
class ProjectMetadata:
    """A project's name, version, dependencies and entry points, and where they were read.

    :ivar name: empty when no file names the project: it then gets no ``.dist-info``.
    :ivar source: the file the name came from (one of :data:`PROJECT_FILES`).
    """

    # Validated however it is made (a record read back too): each ends up in a file's line.
    name: str = attrs.field(default="", validator=v.matches_re(f"|{_NAME.pattern}"))
    version: str = attrs.field(default=UNKNOWN_VERSION, validator=v.matches_re(_VERSION))
    dependencies: tuple[str, ...] = attrs.field(
        default=(),
        converter=_strings_tuple,
        validator=v.deep_iterable(v.matches_re(_DEPENDENCY), v.max_len(MAX_DEPENDENCIES)),
    )
    entry_points: tuple[EntryPoint, ...] = attrs.field(
        default=(),
        converter=_entry_points_tuple,
        validator=v.deep_iterable(v.instance_of(EntryPoint), v.max_len(MAX_ENTRY_POINTS)),
    )
    source: str = attrs.field(default="", validator=v.in_(("", *PROJECT_FILES)))

    @property
    def folder_name(self) -> str:
        """The ``.dist-info`` folder's name, as installers spell it."""
        return f"{re.sub(r'[-_.]+', '_', self.name).lower()}-{self.version}.dist-info"

    def files(self) -> dict[str, str]:
        """The files of the ``.dist-info`` folder an editable install would leave."""
        metadata = ["Metadata-Version: 2.1", f"Name: {self.name}", f"Version: {self.version}"]
        metadata += [f"Requires-Dist: {requirement}" for requirement in self.dependencies]
        made = {
            "METADATA": "\n".join(metadata) + "\n",
            "INSTALLER": "sandboxed-coding-agent\n",
            "RECORD": "",
        }
        groups: dict[str, list[EntryPoint]] = {}
        for entry in self.entry_points:
            groups.setdefault(entry.group, []).append(entry)
        if groups:
            made["entry_points.txt"] = "".join(
                f"[{group}]\n" + "".join(f"{e.name} = {e.value}\n" for e in entries) + "\n"
                for group, entries in groups.items()
            )
        return made


def read_project(read: Callable[[str], bytes | None]) -> ProjectMetadata:
    """The project's metadata, each field from the first of :data:`PROJECT_FILES` that
    gives it.

    :param read: a file's bytes by its path in the project, ``None`` when it has none.
    :raises ProjectMetadataError: the project has none of the files, or one cannot be read.
    """
    found: dict[str, Any] = {"source": ""}
    present = 0
    for path in PROJECT_FILES:
        data = read(path)
        if data is None:
            continue
        present += 1
        if len(data) > MAX_FILE_BYTES:
            raise ProjectMetadataError(f"the project's {path} is larger than 1 MiB")
        if path == "setup.py" and len(data) > MAX_SETUP_PY_BYTES:
            raise ProjectMetadataError(
                "the project's setup.py is larger than 64 KiB, more than is read without running "
                "it: give its dependencies as requirements, or set project = false"
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProjectMetadataError(f"the project's {path} is not UTF-8 text") from None
        reader = {"pyproject.toml": _pyproject, "setup.cfg": _setup_cfg, "setup.py": _setup_py}
        for key, value in reader[path](text).items():
            if key not in found and value not in (None, (), ""):
                found[key] = value
                if key == "name":
                    found["source"] = path
    if not present:
        raise ProjectMetadataError("the project has no pyproject.toml, setup.cfg or setup.py")
    return _checked(found)


def _checked(found: dict[str, Any]) -> ProjectMetadata:
    name, source = found.get("name", ""), found["source"] or "its files"
    if not isinstance(name, str) or (name and not _NAME.fullmatch(name)):
        raise ProjectMetadataError(f"the project's name in {source} is not a project name")
    version = found.get("version", UNKNOWN_VERSION)
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        version = UNKNOWN_VERSION
    dependencies = found.get("dependencies", ())
    if not isinstance(dependencies, tuple) or not all(isinstance(d, str) for d in dependencies):
        raise ProjectMetadataError(f"the project's dependencies in {source} are not strings")
    entries: list[EntryPoint] = []
    for group, raw_name, raw_value in found.get("entry_points", ()):
        name_, value = raw_name.strip(), raw_value.strip()
        if not (
            _GROUP.fullmatch(group)
            and _ENTRY_NAME.fullmatch(name_)
            and _ENTRY_VALUE.fullmatch(value)
        ):
            raise ProjectMetadataError(
                f"the project's entry point {group!r} {name_!r} = {value!r} is not one"
            )
        if group not in LEFT_OUT_GROUPS:
            entries.append(EntryPoint(group, name_, value))
    if len(entries) > MAX_ENTRY_POINTS:
        raise ProjectMetadataError(
            f"the project declares {len(entries)} entry points; at most {MAX_ENTRY_POINTS}"
        )
    try:
        return ProjectMetadata(
            name=name,
            version=version,
            dependencies=tuple(d.strip() for d in dependencies if d.strip()),
            entry_points=tuple(entries),
            source=found["source"],
        )
    except ValueError:
        raise ProjectMetadataError(
            f"the project's dependencies in {source} are not requirements an installer takes"
        ) from None


def _pyproject(text: str) -> dict[str, Any]:
    try:
        project = tomllib.loads(text).get("project")
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        raise ProjectMetadataError("the project's pyproject.toml is not valid TOML") from None
    if not isinstance(project, dict):
        return {}
    entries: list[tuple[str, str, str]] = []
    for group, key in (("console_scripts", "scripts"), ("gui_scripts", "gui-scripts")):
        entries += _pairs(group, project.get(key), "pyproject.toml")
    table = project.get("entry-points", {})
    if isinstance(table, dict):
        for group, points in table.items():
            entries += _pairs(str(group), points, "pyproject.toml")
    dependencies = project.get("dependencies")
    if dependencies is not None and not (
        isinstance(dependencies, list) and all(isinstance(d, str) for d in dependencies)
    ):
        raise ProjectMetadataError(
            "the project's pyproject.toml has no list of strings at [project] dependencies"
        )
    return {
        "name": project.get("name"),
        "version": project.get("version"),
        "dependencies": tuple(dependencies or ()),
        "entry_points": tuple(entries),
    }


def _pairs(group: str, points: object, source: str) -> list[tuple[str, str, str]]:
    if points is None:
        return []
    if not isinstance(points, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in points.items()
    ):
        raise ProjectMetadataError(
            f"the project's entry points {group!r} in {source} are not names"
        )
    return [(group, name, value) for name, value in points.items()]


def _setup_cfg(text: str) -> dict[str, Any]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as error:
        raise ProjectMetadataError(
            f"the project's setup.cfg cannot be read: {error.message}"
        ) from None
    version = parser.get("metadata", "version", fallback=None)
    if version is not None and ":" in version:
        version = None  # attr: or file: is read at build time
    entries: list[tuple[str, str, str]] = []
    if parser.has_section("options.entry_points"):
        for group, block in parser.items("options.entry_points"):
            for line in _lines(block):
                name, _, value = line.partition("=")
                entries.append((group, name, value))
    return {
        "name": parser.get("metadata", "name", fallback=None),
        "version": version,
        "dependencies": tuple(_lines(parser.get("options", "install_requires", fallback=""))),
        "entry_points": tuple(entries),
    }


def _lines(block: str) -> list[str]:
    found = (line.split("#", 1)[0].strip() for line in block.splitlines())
    return [line for line in found if line]


def _setup_py(text: str) -> dict[str, Any]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    names: dict[str, ast.expr] = {}
    bound_twice: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                if target.id in names:
                    bound_twice.add(target.id)
                names[target.id] = node.value
    for name in bound_twice:
        del names[name]
    call = next(
        (node for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_setup(node)), None
    )
    if call is None:
        return {}
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}

    def literal(key: str) -> object:
        node = keywords.get(key)
        if isinstance(node, ast.Name):
            node = names.get(node.id)
        if node is None:
            return None
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None

    requires = literal("install_requires")
    entries: list[tuple[str, str, str]] = []
    points = literal("entry_points")
    if isinstance(points, dict):
        for group, lines in points.items():
            written = [lines] if isinstance(lines, str) else list(_strings(lines))
            for line in written:
                point, _, value = line.partition("=")
                entries.append((str(group), point, value))
    named, version = literal("name"), literal("version")
    return {
        "name": named if isinstance(named, str) else None,
        "version": version if isinstance(version, str) else None,
        "dependencies": tuple(_strings(requires)),
        "entry_points": tuple(entries),
    }


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return [str(item) for item in value]
    return []


def _is_setup(node: ast.Call) -> bool:
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    return name == "setup"

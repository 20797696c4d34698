"""Per-repository settings for ``agent swebench import|evaluate --specs FILE``.

A task file may span repositories, and each repository (and each of its versions) needs
its own Python, packages and test command, as the official harness's specifications
give them. A specs file says so once, keyed by repository and version, in TOML::

    ["marshmallow-code/marshmallow"."2.18"]
    python = "3.9"
    requirements = ["pytest", "pytz", "python-dateutil", "simplejson"]

    ["pylint-dev/astroid"."*"]        # every version without its own entry
    python = "3.9"
    allow = ["introspection"]          # the guard's allowances ([guard] allow)

or the same shape in JSON (``{"owner/name": {"version": {...}}}``). The keys of an entry
are ``python``, ``requirements``, ``project``, ``framework``, ``allow`` and
``test_command`` (a list of arguments in which ``"{tests}"`` stands for the task's test
files); each one an entry gives replaces the command line's value for that entry's tasks.
The file is the user's, but it is checked as strictly as a seed's manifest: an unknown
key, a value of the wrong type or a bad requirement is one message naming the entry.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..errors import UsageError
from ..model import SeedRuntime
from ..plans.contract import is_utf8
from ..serialization import key_hint, quoted_key
from ..verdicts.evidence import GUARD_CAPABILITIES
from .seed_contents import FRAMEWORKS, TESTS_PLACEHOLDER, ImportOptions

#: The version key of an entry for every version of a repository without its own.
ANY_VERSION = "*"
MAX_SPECS_BYTES = 1 << 20
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}")
_VERSION = re.compile(r"[A-Za-z0-9_.*+-]{1,32}")
_KEYS = ("python", "requirements", "project", "framework", "allow", "test_command")


@attrs.frozen
class RepositorySpec:
    """What one repository version's tasks need; ``None`` leaves the command line's value."""

    python: str | None = None
    requirements: tuple[str, ...] | None = None
    project: bool | None = None
    framework: str | None = None
    allow: tuple[str, ...] | None = None
    test_command: tuple[str, ...] | None = None


@attrs.frozen
class Specs:
    """A specs file's entries, by repository and version."""

    entries: Mapping[tuple[str, str], RepositorySpec] = attrs.field(factory=dict)

    def for_task(self, repo: str, version: str) -> RepositorySpec | None:
        """The entry for ``repo`` at ``version``, else its ``"*"`` entry, else none."""
        return self.entries.get((repo, version)) or self.entries.get((repo, ANY_VERSION))

    def options(self, base: ImportOptions, repo: str, version: str) -> ImportOptions:
        """``base`` with what the entry for ``repo`` at ``version`` says in its place."""
        spec = self.for_task(repo, version)
        if spec is None:
            return base
        changes = {
            field.name: value
            for field in attrs.fields(RepositorySpec)
            if (value := getattr(spec, field.name)) is not None
        }
        if "allow" in changes:
            changes["guard_allow"] = changes.pop("allow")
        return attrs.evolve(base, **changes)


def read_specs(path: Path) -> Specs:
    """The specs file at ``path`` (``.toml``, else JSON).

    :raises UsageError: it cannot be read, or an entry is not one, naming it.
    """
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_SPECS_BYTES + 1)
    except OSError as error:
        raise UsageError(f"cannot read the specs file {str(path)!r}: {error.strerror}") from None
    if len(data) > MAX_SPECS_BYTES:
        raise UsageError(f"the specs file {str(path)!r} is larger than 1 MiB")
    try:
        text = data.decode("utf-8")
        found: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError, RecursionError):
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise UsageError(f"the specs file {str(path)!r} is not valid {kind}") from None
    if not isinstance(found, dict):
        raise UsageError(f"the specs file {str(path)!r} is not a table of repositories")
    entries: dict[tuple[str, str], RepositorySpec] = {}
    for repo, versions in found.items():
        if not _REPO.fullmatch(repo):
            raise UsageError(f"specs: {repo!r} is not a repository (owner/name)")
        if not isinstance(versions, dict):
            raise UsageError(f"specs: {repo} must be a table of versions")
        for version, entry in versions.items():
            where = f"specs: {repo} {version}"
            if not _VERSION.fullmatch(version):
                raise UsageError(f'{where}: not a version (such as "2.18", or "*" for any)')
            entries[repo, version] = _entry(where, entry)
    return Specs(entries)


def _entry(where: str, entry: object) -> RepositorySpec:
    if not isinstance(entry, dict):
        raise UsageError(f"{where}: must be a table of settings")
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        key = unknown[0]
        raise UsageError(f"{where}: unknown key {quoted_key(key)} {key_hint(key, _KEYS)}")
    python = entry.get("python")
    if python is not None and not _is_version(python):
        raise UsageError(f'{where}: python must be a version such as "3.9"')
    project = entry.get("project")
    if project is not None and not isinstance(project, bool):
        raise UsageError(f"{where}: project must be true or false")
    framework = entry.get("framework")
    if framework is not None and framework not in FRAMEWORKS:
        raise UsageError(f"{where}: framework must be one of {', '.join(FRAMEWORKS)}")
    requirements = _strings(where, entry, "requirements")
    if requirements is not None:
        try:
            SeedRuntime(requirements=requirements)
        except ValueError as error:
            raise UsageError(f"{where}: {str(error).removeprefix('requirements: ')}") from None
    allow = _strings(where, entry, "allow")
    if allow is not None and not set(allow) <= set(GUARD_CAPABILITIES):
        raise UsageError(f"{where}: allow names the guard's {', '.join(GUARD_CAPABILITIES)}")
    command = _strings(where, entry, "test_command")
    if command is not None and (not command or TESTS_PLACEHOLDER not in command):
        raise UsageError(
            f"{where}: test_command must be a list of arguments holding {TESTS_PLACEHOLDER!r}, "
            "where the task's test files go"
        )
    return RepositorySpec(
        python=python,
        requirements=requirements,
        project=project,
        framework=framework,
        allow=allow,
        test_command=command,
    )


def _plain(text: str) -> bool:
    """Whether ``text`` is UTF-8 (a JSON file may hold a lone surrogate) and printable (no
    control character or line separator): it ends up in a seed's manifest and on a command
    line."""
    return is_utf8(text) and text.isprintable()


def _strings(where: str, entry: Mapping[str, object], key: str) -> tuple[str, ...] | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(item, str) and item and len(item) <= 1000 for item in value
    ):
        raise UsageError(f"{where}: {key} must be a list of non-empty strings")
    if not all(_plain(item) for item in value):
        raise UsageError(f"{where}: {key} holds a control character or text that is not UTF-8")
    if len(value) > 200:
        raise UsageError(f"{where}: {key} holds {len(value)} items; at most 200")
    return tuple(value)


def _is_version(python: object) -> bool:
    """Whether ``python`` is a Python version such as ``"3.12"`` (ASCII digits only)."""
    return isinstance(python, str) and re.fullmatch(r"3\.[0-9]+", python) is not None

"""A SWE-bench task's seed folder: its ``seed.toml`` and files, written beside the others
and loaded as a seed before it takes the place of an earlier import of the same task.

The folder also holds a note of the instance it was made from
(:data:`INSTANCE_FILE`), never the reference fix: ``agent swebench predictions``
maps results back by it, and a folder without it is never replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import UsageError
from ..seeds import manifest
from .tasks import BadLine, TaskInstance

#: A seed folder's note of the instance it was made from (a hidden file: never a seed file).
INSTANCE_FILE = ".swebench.json"


@attrs.frozen
class SeedSpec:
    """Everything one seed folder holds.

    :ivar files: the files written into the folder (test files, placeholders), by path.
    """

    name: str
    description: str
    repository: str
    commit: str
    files: Mapping[str, bytes]
    tests: tuple[str, ...]
    hidden_tests: tuple[str, ...]
    editable: tuple[str, ...]
    test_command: tuple[str, ...]
    prompt: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    runtime: Mapping[str, Any] | None
    limits: Mapping[str, int]
    instance: InstanceNote
    #: The seed's ``[guard] allow``.
    guard_allow: tuple[str, ...] = ()


@attrs.frozen
class InstanceNote:
    """What a seed folder notes of its instance (:data:`INSTANCE_FILE`); never the fix.

    :ivar instance_id: the instance the seed was made from.
    :ivar repo: its repository, ``owner/name``.
    :ivar base_commit: its base commit.
    :ivar created_files: the files the seed adds empty for a plan to fill (the fix creates
        them): a patch creates them, rather than changing a file of the base commit.
    """

    instance_id: str
    repo: str = ""
    base_commit: str = ""
    created_files: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "created_files": list(self.created_files),
        }


def instance_note(task: TaskInstance, created: Sequence[str] = ()) -> InstanceNote:
    return InstanceNote(task.instance_id, task.repo, task.base_commit, tuple(sorted(created)))


def read_instance_note(folder: Path) -> InstanceNote | None:
    """The instance note of the seed folder ``folder``; ``None`` when it has none."""
    try:
        fd = os.open(folder / INSTANCE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = stream.read(64 * 1024 + 1)
    try:
        note = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(note, dict) or not isinstance(note.get("instance_id"), str):
        return None
    created = note.get("created_files")
    if not isinstance(created, list) or not all(isinstance(path, str) for path in created):
        created = []
    return InstanceNote(
        instance_id=note["instance_id"],
        repo=str(note.get("repo", "")),
        base_commit=str(note.get("base_commit", "")),
        created_files=tuple(created),
    )


def render_manifest(spec: SeedSpec) -> str:
    """The ``seed.toml`` of ``spec``."""
    lines = [
        "# Made by `agent swebench import` from a SWE-bench task instance; the reference",
        "# fix is not in this folder.",
        f"name = {_string(spec.name)}",
        f"description = {_string(spec.description)}",
        f"editable = {_strings(spec.editable)}",
        f"tests = {_strings(spec.tests)}",
    ]
    if spec.hidden_tests:
        lines.append(f"hidden_tests = {_strings(spec.hidden_tests)}")
    lines += [
        f"test_command = {_strings(spec.test_command)}",
        f"fail_to_pass = {_strings(spec.fail_to_pass)}",
        f"pass_to_pass = {_strings(spec.pass_to_pass)}",
        f"default_prompt = {_multiline(spec.prompt)}",
        "",
        "[source]",
        f"git = {_string(spec.repository)}",
        f"commit = {_string(spec.commit)}",
    ]
    if spec.runtime is not None:
        lines += ["", "[runtime]"]
        for key, value in spec.runtime.items():
            lines.append(f"{key} = {_value(value)}")
    if spec.guard_allow:
        lines += ["", "[guard]", f"allow = {_strings(spec.guard_allow)}"]
    lines += ["", "[limits]"]
    lines += [f"{key} = {_value(value)}" for key, value in spec.limits.items()]
    return "\n".join(lines) + "\n"


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return _strings(value)
    raise TypeError(f"no TOML for {type(value).__name__}")


def _escape(char: str, keep: str) -> str:
    if char in keep:
        return char
    if char == "\\":
        return "\\\\"
    if char == '"':
        return '\\"'
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"\\u{ord(char):04x}"
    return char


def _string(text: str) -> str:
    return '"' + "".join(_escape(char, "") for char in text) + '"'


def _strings(items: Sequence[str]) -> str:
    if not items:
        return "[]"
    return "[\n" + "".join(f"    {_string(item)},\n" for item in items) + "]"


def _multiline(text: str) -> str:
    # Kept readable: line breaks and tabs as they are; every quote escaped, so no run of
    # them can close the string early.
    return '"""\n' + "".join(_escape(char, "\n\t") for char in text) + '"""'


def write_seed(out: Path, spec: SeedSpec, *, line: int) -> Path:
    """Write ``spec`` into ``out/<name>``, load it as a seed to check it, and only then put
    it in place of an earlier import of the same instance.

    :raises BadLine: it does not load as a seed (the manifest's message), or something
        that is not a seed of this command's stands at its path.
    :raises UsageError: ``out`` cannot be written.
    """
    final = out / spec.name
    try:
        out.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".partial-{spec.name}-", dir=out))
    except OSError as error:
        raise UsageError(f"cannot write seeds into {str(out)!r}: {error.strerror}") from None
    try:
        for path, data in {**spec.files, manifest.MANIFEST: render_manifest(spec).encode()}.items():
            _write_new(partial, path, data)
        _write_new(partial, INSTANCE_FILE, json.dumps(spec.instance.as_json(), indent=2).encode())
        try:
            manifest.load_seed(partial)
        except UsageError as error:
            problem = error.message.replace(str(partial), str(final))
            raise BadLine(line, f"the seed would not load: {problem}") from None
        _replace(final, partial, line)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


def _write_new(root: Path, relative: str, data: bytes) -> None:
    target = root.joinpath(*relative.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(target, flags, 0o644)
    with open(fd, "wb") as stream:
        stream.write(data)


def _replace(final: Path, partial: Path, line: int) -> None:
    try:
        found = os.lstat(final)
    except FileNotFoundError:
        os.rename(partial, final)
        return
    if not stat.S_ISDIR(found.st_mode) or read_instance_note(final) is None:
        raise BadLine(
            line,
            f"{final} exists and is not a seed this command wrote; move it away, or import "
            "into another folder",
        )
    retired = final.with_name(f".retired-{final.name}-{os.getpid()}")
    os.rename(final, retired)
    os.rename(partial, final)
    with contextlib.suppress(OSError):
        shutil.rmtree(retired)

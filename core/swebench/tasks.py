"""SWE-bench task instances and predictions, read from JSON Lines files as untrusted input.

A tasks file holds one task instance per line, in SWE-bench's format: an object
with ``instance_id``, ``repo`` (``owner/name``), ``base_commit``, ``patch`` (the
reference fix), ``test_patch``, ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (lists of
test IDs, or JSON strings holding them, as the published datasets store them) and
``problem_statement``. Other fields are ignored.

Every file is read within bounds, line by line; a line that is not a task (or a
prediction) is one :class:`BadLine` naming its number and the field at fault,
and the others are still read.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ..errors import UsageError
from ..plans.contract import _no_duplicate_keys
from ..seeds.patterns import has_control_character

#: The longest line of a tasks or predictions file that is read (a task holds two patches).
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The largest tasks or predictions file that is read.
MAX_FILE_BYTES = 1024 * 1024 * 1024
#: The most task instances (or predictions) one file may hold.
MAX_ENTRIES = 100_000
MAX_INSTANCE_ID_CHARS = 256
#: The most test IDs a task lists in each of FAIL_TO_PASS and PASS_TO_PASS, and their longest
#: (those a seed accepts: :data:`~..manifest.MAX_TEST_IDS`).
MAX_TEST_IDS = 5000
MAX_TEST_ID_CHARS = 2000
#: The largest patch (reference fix, test patch or model patch) that is read.
MAX_PATCH_BYTES = 8 * 1024 * 1024
MAX_MODEL_NAME_CHARS = 256

_FULL_COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_BOM = b"\xef\xbb\xbf"


class BadLine(Exception):
    """A line of a tasks or predictions file that cannot be used, and why.

    :ivar line: its number, from 1.
    :ivar field: the field at fault, when one is.
    :ivar problem: what is wrong, for a person.
    """

    def __init__(self, line: int, problem: str, field: str | None = None) -> None:
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(self.message)

    @property
    def message(self) -> str:
        where = f"line {self.line}"
        return (
            f"{where}: {self.field}: {self.problem}" if self.field else f"{where}: {self.problem}"
        )


@attrs.frozen
class TaskInstance:
    """One SWE-bench task instance, checked.

    :ivar line: its line in the tasks file.
    :ivar instance_id: SWE-bench's ID of the instance (``owner__name-1234``).
    :ivar repo: the repository, ``owner/name``.
    :ivar base_commit: the full commit ID the task starts from.
    :ivar patch: the reference fix; ``None`` when the file leaves it out. Never put
        in a seed.
    :ivar test_patch: the change adding or updating the tests that prove a fix.
    :ivar fail_to_pass: test IDs that fail before the fix and pass after it.
    :ivar pass_to_pass: test IDs that pass before and after it.
    :ivar problem_statement: the issue text a planner is given.
    :ivar version: the repository's version the task belongs to (``"2.18"``), which
        picks its settings in a specs file; empty when the row gives none.
    """

    line: int
    instance_id: str
    repo: str
    base_commit: str
    patch: str | None
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    problem_statement: str
    version: str = ""

    @property
    def owner(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[1]


@attrs.frozen
class Prediction:
    """One line of a predictions file: a model's patch for one instance.

    :ivar line: its line in the predictions file.
    :ivar instance_id: the instance it is for.
    :ivar model_name_or_path: the model (or system) that made it.
    :ivar model_patch: the patch, as ``git apply`` takes it; empty when there is none.
    """

    line: int
    instance_id: str
    model_name_or_path: str
    model_patch: str


def read_lines(path: Path, what: str) -> Iterator[tuple[int, bytes | None]]:
    """Each line of the JSON Lines file at ``path`` with its number, read with bounded memory.

    A line longer than :data:`MAX_LINE_BYTES` is given as ``None`` (its rest is skipped).

    :param what: what the file is, for messages (``"tasks file"``).
    :raises UsageError: it is not a regular file, is larger than :data:`MAX_FILE_BYTES`,
        or cannot be read.
    """
    name = str(path)
    try:
        # O_NONBLOCK: a FIFO must not hang the open; it is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise UsageError(f"cannot read the {what} {name!r}: {error.strerror}") from None
    with open(fd, "rb") as stream:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise UsageError(f"the {what} {name!r} is not a regular file")
        if status.st_size > MAX_FILE_BYTES:
            raise UsageError(f"the {what} {name!r} is larger than {MAX_FILE_BYTES} bytes; split it")
        total = 0
        limit = MAX_LINE_BYTES + 2  # room for the line's own "\r\n"
        number = 0
        try:
            while line := stream.readline(limit):
                number += 1
                total += len(line)
                too_long = len(line) == limit and not line.endswith(b"\n")
                while too_long and total <= MAX_FILE_BYTES and (rest := stream.readline(1 << 16)):
                    total += len(rest)
                    if rest.endswith(b"\n"):
                        break
                if total > MAX_FILE_BYTES:  # it grew while being read
                    raise UsageError(f"the {what} {name!r} is larger than {MAX_FILE_BYTES} bytes")
                if number == 1 and line.startswith(_BOM):
                    line = line[len(_BOM) :]
                yield number, None if too_long else line
        except OSError as error:
            raise UsageError(f"cannot read the {what} {name!r}: {error.strerror}") from None


def json_object(number: int, raw: bytes | None) -> dict[str, Any] | None:
    """The JSON object on one line; ``None`` for a blank line or a ``#`` comment.

    :raises BadLine: the line is too long, not UTF-8, not JSON, not an object, repeats
        a key, or holds a lone surrogate.
    """
    if raw is None:
        raise BadLine(number, f"the line is longer than {MAX_LINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadLine(number, "the line is not UTF-8 text") from None
    if not text or text.startswith("#"):
        return None
    try:
        # A repeated key is refused: JSON parsers disagree on which one wins.
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except ValueError as error:
        raise BadLine(number, f"not JSON: {error}") from None
    except RecursionError:
        raise BadLine(number, "not JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise BadLine(number, f"expected a JSON object, got {type(data).__name__}")
    return data


def _text(number: int, data: Mapping[str, Any], key: str, *, limit: int) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        got = "nothing" if key not in data else type(value).__name__
        raise BadLine(number, f"must be a string, got {got}", key)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadLine(
            number, "holds a lone surrogate (an escape such as \\udcff), which is not text", key
        ) from None
    if size > limit:
        raise BadLine(number, f"is {size} bytes; at most {limit}", key)
    return value


def _instance_id(number: int, data: Mapping[str, Any]) -> str:
    value = _text(number, data, "instance_id", limit=4 * MAX_INSTANCE_ID_CHARS)
    if not value.strip() or len(value) > MAX_INSTANCE_ID_CHARS or has_control_character(value):
        raise BadLine(
            number,
            f"must be 1 to {MAX_INSTANCE_ID_CHARS} characters, no control characters",
            "instance_id",
        )
    return value


def _test_ids(number: int, data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if isinstance(value, str):  # the published datasets hold the list as JSON text
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise BadLine(number, "is a string that is not a JSON list of test IDs", key) from None
    if not isinstance(value, list):
        got = "nothing" if key not in data else type(value).__name__
        raise BadLine(number, f"must be a list of test IDs (or JSON text of one), got {got}", key)
    if len(value) > MAX_TEST_IDS:
        raise BadLine(number, f"{len(value)} test IDs; at most {MAX_TEST_IDS}", key)
    for item in value:
        if (
            not isinstance(item, str)
            or not item.strip()
            or len(item) > MAX_TEST_ID_CHARS
            or has_control_character(item)
            or not _is_text(item)
        ):
            raise BadLine(
                number,
                f"{_short(item)} is not a test ID (a non-empty string of at most "
                f"{MAX_TEST_ID_CHARS} characters, no control characters)",
                key,
            )
    return tuple(dict.fromkeys(value))


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_task(number: int, data: Mapping[str, Any]) -> TaskInstance:
    """The task instance in ``data`` (line ``number``), every field checked.

    :raises BadLine: a field is missing or unusable; the first one found is named.
    """
    instance_id = _instance_id(number, data)
    repo = _text(number, data, "repo", limit=256)
    parts = repo.split("/")
    if (
        len(parts) != 2
        or not all(_REPO_PART.fullmatch(part) for part in parts)
        or any(part.endswith((".", ".git")) for part in parts)
    ):
        raise BadLine(number, f"{_short(repo)} is not a GitHub repository (owner/name)", "repo")
    base_commit = _text(number, data, "base_commit", limit=64)
    if not _FULL_COMMIT.fullmatch(base_commit):
        raise BadLine(
            number, f"{_short(base_commit)} is not a full commit ID (40 hex digits)", "base_commit"
        )
    patch = None
    if data.get("patch") is not None:
        patch = _text(number, data, "patch", limit=MAX_PATCH_BYTES)
    test_patch = _text(number, data, "test_patch", limit=MAX_PATCH_BYTES)
    if not test_patch.strip():
        raise BadLine(number, "is empty; a task's tests come from it", "test_patch")
    fail_to_pass = _test_ids(number, data, "FAIL_TO_PASS")
    if not fail_to_pass:
        raise BadLine(
            number, "is empty; a task proves its fix by at least one test", "FAIL_TO_PASS"
        )
    pass_to_pass = _test_ids(number, data, "PASS_TO_PASS")
    problem = _text(number, data, "problem_statement", limit=MAX_PATCH_BYTES)
    version = data.get("version", "")
    # Datasets write it as text ("0.13") or, read back from some tools, as a number.
    if isinstance(version, int | float) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or len(version) > 32 or not version.isprintable():
        raise BadLine(number, 'must be a short version text such as "2.18"', "version")
    return TaskInstance(
        line=number,
        instance_id=instance_id,
        repo=repo,
        base_commit=base_commit,
        patch=patch,
        test_patch=test_patch,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        problem_statement=problem,
        version=version,
    )


def read_tasks(path: Path) -> tuple[list[TaskInstance], list[BadLine]]:
    """The task instances of the tasks file at ``path``, and the lines that are not one.

    A repeated ``instance_id`` is a bad line (the first one is kept).

    :raises UsageError: the file cannot be read, or holds more than :data:`MAX_ENTRIES`.
    """
    return _read_entries(
        path, "tasks file", "tasks", parse_task, "was already given on line {line}"
    )


def parse_prediction(number: int, data: Mapping[str, Any]) -> Prediction:
    """The prediction in ``data`` (line ``number``).

    :raises BadLine: a field is missing or unusable.
    """
    instance_id = _instance_id(number, data)
    model = data.get("model_name_or_path")
    if model is None:
        model = ""
    if not isinstance(model, str) or not _is_text(model) or has_control_character(model):
        raise BadLine(number, "must be a string without control characters", "model_name_or_path")
    if len(model) > MAX_MODEL_NAME_CHARS:
        raise BadLine(
            number, f"is longer than {MAX_MODEL_NAME_CHARS} characters", "model_name_or_path"
        )
    patch = data.get("model_patch")
    if patch is None:  # SWE-bench counts a missing patch as an empty one
        patch = ""
    if not isinstance(patch, str):
        raise BadLine(number, f"must be a string, got {type(patch).__name__}", "model_patch")
    patch = _text(number, {"model_patch": patch}, "model_patch", limit=MAX_PATCH_BYTES)
    return Prediction(number, instance_id, model, patch)


def read_predictions(path: Path) -> tuple[list[Prediction], list[BadLine]]:
    """The predictions of the predictions file at ``path``, and the lines that are not one.

    A second prediction for the same instance is a bad line (the first one is kept).

    :raises UsageError: the file cannot be read, or holds more than :data:`MAX_ENTRIES`.
    """
    return _read_entries(
        path,
        "predictions file",
        "predictions",
        parse_prediction,
        "already has a prediction on line {line}",
    )


_Entry = TypeVar("_Entry", TaskInstance, Prediction)


def _read_entries(
    path: Path,
    what: str,
    plural: str,
    parse: Callable[[int, Mapping[str, Any]], _Entry],
    again: str,
) -> tuple[list[_Entry], list[BadLine]]:
    """Each entry ``parse`` makes of a line of the file, one per instance, and the bad lines.

    :param again: what a second entry for an instance is told, with ``{line}`` the first's.
    """
    found: list[_Entry] = []
    bad: list[BadLine] = []
    seen: dict[str, int] = {}
    for number, raw in read_lines(path, what):
        try:
            data = json_object(number, raw)
            if data is None:
                continue
            entry = parse(number, data)
        except BadLine as problem:
            bad.append(problem)
            continue
        if entry.instance_id in seen:
            message = f"{entry.instance_id!r} " + again.format(line=seen[entry.instance_id])
            bad.append(BadLine(number, message, "instance_id"))
            continue
        seen[entry.instance_id] = number
        found.append(entry)
        if len(found) > MAX_ENTRIES:
            raise UsageError(f"the {what} {str(path)!r} holds more than {MAX_ENTRIES} {plural}")
    return found, bad

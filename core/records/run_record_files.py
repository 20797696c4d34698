"""Run record files: where each is kept, how it is written, and how it is read back.

A record is written whole and owner-only, with the API key blanked. Read back
(``agent replay``, ``agent diff``), it is untrusted input: bounded in size,
refused when damaged or of another format, and its chosen plan checked again by
the patch contract before it becomes a patch.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from .. import provider
from ..errors import UsageError
from ..model import PatchPlan, SeedProject
from ..plans import contract
from ..provider import API_KEY_ENV
from ..serialization import describe_structure_error, structure, to_json
from . import planner_calls
from .planner_calls import UnreadableRecord, read_kept_file
from .run_record_layout import RUN_RECORD_FORMAT, RunRecord

#: The largest record ``agent replay FILE`` reads.
MAX_RECORD_BYTES = 64 * 1024 * 1024

_RUN_ID = re.compile(r"run-[0-9a-f]{16}")


def new_run_id() -> str:
    return f"run-{secrets.token_hex(8)}"


def is_run_id(text: str) -> bool:
    """Whether ``text`` is a run ID: ``run-`` and 16 hexadecimal digits."""
    return _RUN_ID.fullmatch(text) is not None


def records_directory(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_STATE_HOME/sandboxed-coding-agent/run-records``."""
    return planner_calls.state_directory(environ) / "run-records"


def record_path(run_id: str, environ: Mapping[str, str] = os.environ) -> Path:
    if not _RUN_ID.fullmatch(run_id):
        raise UsageError(
            f"{run_id!r} is not a run ID: expected run- and 16 hexadecimal digits, as "
            "`agent run` prints it (for example run-0123456789abcdef), or a record file"
        )
    return records_directory(environ) / f"{run_id}.json"


def write_run_record(record: RunRecord, environ: Mapping[str, str] = os.environ) -> Path:
    """Save ``record`` (owner-only, written whole) with the API key blanked, if it appears.

    :raises OSError: the state directory cannot be written.
    """
    path = record_path(record.run_id, environ)
    planner_calls.write_private_file(path, _blank_key(to_json(record, indent=2), environ) + "\n")
    return path


def _blank_key(text: str, environ: Mapping[str, str]) -> str:
    return provider.blank_key(text, environ.get(API_KEY_ENV, ""))


def read_run_record(reference: str, environ: Mapping[str, str] = os.environ) -> RunRecord:
    """The record named by a run ID, or kept in the file at ``reference``.

    :raises UsageError: no such record, or it cannot be read, is damaged or of another format.
    """
    if _RUN_ID.fullmatch(reference):
        path = record_path(reference, environ)
        if not os.path.lexists(path):
            raise UsageError(
                f"there is no record of run {reference!r} in {path.parent} "
                "(records are kept on the machine that ran it)"
            )
        # In the records folder, a file is read only as the agent wrote it: a link
        # or a FIFO planted there is refused, not followed or waited on.
        try:
            data = read_kept_file(path, limit=MAX_RECORD_BYTES)
        except UnreadableRecord as problem:
            raise UsageError(f"the run record {str(path)!r} is {problem}") from None
    else:
        path = Path(reference)
        if not path.is_file():
            record_path(reference, environ)  # says what a run ID looks like
        try:
            with path.open("rb") as stream:
                data = stream.read(MAX_RECORD_BYTES + 1)
        except OSError as error:
            raise UsageError(
                f"cannot read the run record {str(path)!r}: {error.strerror}"
            ) from None
    if len(data) > MAX_RECORD_BYTES:
        raise UsageError(f"{str(path)!r} is larger than {MAX_RECORD_BYTES} bytes: not a record")
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise UsageError(f"the run record {str(path)!r} is damaged: {error}") from None
    version = parsed.get("format") if isinstance(parsed, dict) else None
    if version != RUN_RECORD_FORMAT:
        raise UsageError(
            f"{str(path)!r} is not a run record of format {RUN_RECORD_FORMAT} "
            f"(its format is {version!r}); it was written by another version of the agent"
        )
    not_utf8 = _first_lone_surrogate(parsed, "record")
    if not_utf8 is not None:
        raise UsageError(
            f"the run record {str(path)!r} is damaged: {not_utf8} holds a lone surrogate "
            "(text that is not UTF-8, which the agent never records)"
        )
    try:
        record = structure(parsed, RunRecord)
    except Exception as error:  # cattrs raises a tree of ordinary exceptions
        problems = "; ".join(describe_structure_error(error, root="record"))
        raise UsageError(f"the run record {str(path)!r} is damaged: {problems}") from None
    _check_consistent(record, path, reference)
    return record


def _first_lone_surrogate(value: object, where: str) -> str | None:
    """Where in decoded JSON a text (a key or a string) holds a lone surrogate, if one does."""
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, place = stack.pop()
        if isinstance(item, str):
            if not contract.is_utf8(item):
                return place
        elif isinstance(item, dict):
            for key, inner in item.items():
                if not contract.is_utf8(key):
                    return f"a key of {place}"
                stack.append((inner, f"{place}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{place}[{i}]") for i, inner in enumerate(item))
    return None


def _check_consistent(record: RunRecord, path: Path, reference: str) -> None:
    """Refuse a record whose run ID or indexes cannot be what the agent wrote.

    :raises UsageError: naming the field.
    """
    damaged = f"the run record {str(path)!r} is damaged"
    if not _RUN_ID.fullmatch(record.run_id):
        raise UsageError(
            f"{damaged}: its run_id {record.run_id!r} is not a run ID (run- and 16 "
            "hexadecimal digits)"
        )
    # A record is named after its run; a file still named so must hold that run.
    asked = reference if _RUN_ID.fullmatch(reference) else path.name.removesuffix(".json")
    if _RUN_ID.fullmatch(asked) and asked != record.run_id:
        raise UsageError(
            f"{damaged}: it was asked for as run {asked} but holds run {record.run_id}"
        )
    if record.chosen_test is not None and not 0 <= record.chosen_test < len(record.tests):
        held = f"tests 0 to {len(record.tests) - 1}" if record.tests else "no test"
        raise UsageError(f"{damaged}: its chosen_test is {record.chosen_test}, but it holds {held}")
    for number, test in enumerate(record.tests):
        if test.plan_index is not None and not 0 <= test.plan_index < len(record.plans):
            raise UsageError(
                f"{damaged}: tests[{number}].plan_index is {test.plan_index}, but it holds "
                f"{len(record.plans)} plans"
            )


def chosen_plan(record: RunRecord, seed: SeedProject) -> PatchPlan:
    """The plan the run's verdict rests on, checked again by the patch contract for
    ``seed`` (the files it lets a plan replace today, its limits): a record may come
    from anyone, and its paths end up in a patch's headers.

    :raises UsageError: the run tested no plan, or the contract refuses it (naming each rule).
    """
    if record.chosen_test is None:
        problem = f"it ended in a {record.error.kind} error" if record.error else "none was chosen"
        raise UsageError(f"run {record.run_id} has no tested patch: {problem}")
    if not 0 <= record.chosen_test < len(record.tests):  # read_run_record refuses it already
        raise UsageError(f"run {record.run_id}'s chosen_test {record.chosen_test} is no test")
    plan = record.tests[record.chosen_test].plan
    rejections = contract.check_plan(plan, editable_paths=seed.editable_files, limits=seed.limits)
    if rejections:
        raise UsageError(
            f"run {record.run_id}'s chosen patch breaks the patch contract for seed "
            f"{seed.name!r}, so it is not printed: "
            + "; ".join(rejection.describe() for rejection in rejections)
        )
    for entry in plan.files:
        if not contract.is_utf8(record.originals.get(entry.path, "")):
            raise UsageError(
                f"the record of run {record.run_id} is damaged: the original text of "
                f"{entry.path} is not UTF-8"
            )
    return plan

"""Records of planner calls, kept so a user can investigate a run by its planner task ID.

Each planner call writes one JSON file, ``<planner-task-id>.json``, under
``$XDG_STATE_HOME/sandboxed-coding-agent/runs`` (``~/.local/state/...`` when
``XDG_STATE_HOME`` is unset), and ``agent logs PLANNER_TASK_ID`` prints it. A
record holds what a person needs to see what the provider did: the URL (never
with credentials), the model, the sizes of what was sent, every attempt's
status and timing, and a short excerpt of the answer or the error. It never
holds the API key, the prompt or the seed's files.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

import attrs

from .errors import UsageError
from .model import TokenUsage
from .serialization import describe_structure_error, structure, to_json

APP_DIR = "sandboxed-coding-agent"
RECORD_FORMAT = 1
#: The longest excerpt of an answer or error a record keeps.
MAX_EXCERPT_CHARS = 2_000

# One path segment with no dot or separator: a task ID can never climb out of the folder.
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


@attrs.frozen
class ProviderRequestInfo:
    """What was sent to the provider, described without its content.

    :ivar url: the endpoint, without credentials, query or fragment.
    :ivar model: the model asked for.
    :ivar messages: how many chat messages were sent.
    :ivar body_bytes: size of the request body (JSON), in bytes.
    :ivar seed_files: how many seed files the prompt carried.
    :ivar response_format: the ``response_format`` type first asked for, if any.
    :ivar timeout_seconds: the connect and read timeout of each attempt.
    :ivar max_retries: further attempts allowed after a retryable failure.
    """

    url: str
    model: str
    messages: int
    body_bytes: int
    seed_files: int
    response_format: str | None
    timeout_seconds: float
    max_retries: int


@attrs.frozen
class ProviderAttempt:
    """One HTTP request of a planner call and what came of it.

    :ivar number: 1 for the first attempt.
    :ivar started_seconds: when it started, in seconds after the call began.
    :ivar seconds: how long it took, until the answer was read or the attempt failed.
    :ivar status: the HTTP status, or ``None`` when no answer came.
    :ivar outcome: one word: ``ok``, ``http-error``, ``timeout``, ``connection-error``
        or ``too-large``.
    :ivar detail: what happened, for a person (bounded, never holding the key).
    :ivar waited_seconds: how long the planner waited before this attempt.
    :ivar response_format: the ``response_format`` type this attempt sent, if any.
    """

    number: int
    started_seconds: float
    seconds: float
    status: int | None
    outcome: str
    detail: str | None = None
    waited_seconds: float = 0.0
    response_format: str | None = None


@attrs.frozen
class PlannerRecord:
    """Everything kept about one planner call.

    :ivar planner_task_id: the ID the run result and every error about the call carry.
    :ivar planner: name of the planner.
    :ivar started_at: when the call began, ISO 8601 in UTC.
    :ivar request: what was sent, described without its content.
    :ivar attempts: every HTTP request, in order.
    :ivar outcome: ``ok``, ``provider-error`` or ``plan-rejected``.
    :ivar duration_seconds: wall time of the whole call, retries and waits included.
    :ivar error: the message the user was given, when the call failed.
    :ivar response_id: the provider's own ID of its answer.
    :ivar model: the model that answered, as the provider named it.
    :ivar usage: tokens the provider reported.
    :ivar finish_reason: why the model stopped, as the provider said.
    :ivar response_excerpt: the start of the answer (the model's text, or the raw body
        when there was none).
    :ivar format: version of this record's layout.
    """

    planner_task_id: str
    planner: str
    started_at: str
    request: ProviderRequestInfo
    attempts: tuple[ProviderAttempt, ...]
    outcome: str
    duration_seconds: float
    error: str | None = None
    response_id: str | None = None
    model: str | None = None
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    response_excerpt: str | None = None
    format: int = RECORD_FORMAT


def runs_directory(environ: Mapping[str, str] = os.environ) -> Path:
    """Where records live: ``$XDG_STATE_HOME/sandboxed-coding-agent/runs``.

    The XDG base directory rules ignore a relative ``XDG_STATE_HOME``, and so does this.
    """
    state = environ.get("XDG_STATE_HOME", "")
    if not state or not os.path.isabs(state):
        home = environ.get("HOME") or str(Path.home())
        state = os.path.join(home, ".local", "state")
    return Path(state) / APP_DIR / "runs"


def check_task_id(task_id: str) -> str:
    """Return ``task_id`` if it can name a record; raise :class:`UsageError` if not."""
    if not _TASK_ID.fullmatch(task_id):
        raise UsageError(
            f"{task_id!r} is not a planner task ID: expected letters, digits, '-' and '_' "
            "only, as printed by `agent run` (for example plan-0123456789abcdef)"
        )
    return task_id


def record_path(task_id: str, environ: Mapping[str, str] = os.environ) -> Path:
    return runs_directory(environ) / f"{check_task_id(task_id)}.json"


def write_record(record: PlannerRecord, environ: Mapping[str, str] = os.environ) -> Path:
    """Save ``record`` (readable by its owner only) and return where it went.

    The file is written whole and then renamed into place, so a reader never sees half a record.

    :raises OSError: the state directory cannot be written.
    """
    path = record_path(record.planner_task_id, environ)
    write_private_file(path, to_json(record, indent=2) + "\n")
    return path


def state_directory(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_STATE_HOME/sandboxed-coding-agent``, which holds every kind of record."""
    return runs_directory(environ).parent


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole, readable by its owner only (folder 0700, file 0600).

    It is written to a temporary file beside it and renamed into place, so a reader
    never sees half of it and concurrent writers of other files never meet.

    :raises OSError: the folder cannot be written.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".record-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_record(task_id: str, environ: Mapping[str, str] = os.environ) -> PlannerRecord:
    """The record of planner task ``task_id``.

    :raises UsageError: the ID is malformed, there is no such record, or it cannot be read.
    """
    path = record_path(task_id, environ)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"there is no record of planner task {task_id!r} in {path.parent} "
            "(records are kept on the machine that ran `agent run`)"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read the record {str(path)!r}: {error}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise UsageError(f"the record {str(path)!r} is damaged: {error}") from None
    try:
        return structure(data, PlannerRecord)
    except Exception as error:  # cattrs raises a tree of ordinary exceptions
        problems = "; ".join(describe_structure_error(error, root="record"))
        raise UsageError(f"the record {str(path)!r} is damaged: {problems}") from None


def excerpt(text: str, limit: int = MAX_EXCERPT_CHARS) -> str:
    """The start of ``text``, marked when cut."""
    return (
        text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"
    )


def render(record: PlannerRecord) -> str:
    """The record as a person reads it in a terminal."""
    request = record.request
    lines = [
        f"planner task {record.planner_task_id} ({record.planner}), started {record.started_at}",
        f"outcome:  {record.outcome} after {record.duration_seconds:.3f} s",
        f"request:  POST {request.url}",
        f"          model {request.model}, {request.messages} messages, "
        f"{request.body_bytes:,} bytes, {request.seed_files} seed files, "
        f"response_format {request.response_format or 'none'}",
        f"          timeout {request.timeout_seconds:g} s, at most {request.max_retries} retries",
    ]
    for attempt in record.attempts:
        waited = f"after waiting {attempt.waited_seconds:.3f} s, " if attempt.waited_seconds else ""
        status = f"HTTP {attempt.status}" if attempt.status is not None else "no answer"
        lines.append(
            f"attempt {attempt.number}: {waited}{status} ({attempt.outcome}) "
            f"in {attempt.seconds:.3f} s"
        )
        if attempt.detail:
            lines.append(f"          {attempt.detail}")
    if record.error:
        lines.append(f"error:    {record.error}")
    if record.response_id or record.model:
        lines.append(f"response: {record.response_id or 'no ID'} from {record.model or 'unknown'}")
    if record.usage is not None:
        lines.append(
            f"tokens:   {record.usage.prompt_tokens} prompt, "
            f"{record.usage.completion_tokens} completion"
        )
    if record.finish_reason:
        lines.append(f"finish:   {record.finish_reason}")
    if record.response_excerpt:
        lines.append("answer (excerpt):")
        lines.append(record.response_excerpt)
    return "\n".join(lines)

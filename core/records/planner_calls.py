"""Records of planner calls, kept so a user can investigate a run by its planner task ID.

The agent records every planner call, whatever the planner, where it calls it
(:func:`call_planner`): one JSON file, ``<planner-task-id>.json``, under
``$XDG_STATE_HOME/sandboxed-coding-agent/runs`` (``~/.local/state/...`` when
``XDG_STATE_HOME`` is unset), which ``agent logs PLANNER_TASK_ID`` prints. A
record holds the planner's name, the seed, when the call started and how long
it took, its outcome, and the plan or the error. A planner adds its own details
(an endpoint, each attempt's status and timing, an excerpt of the answer) as a
JSON object: :attr:`PlannerResult.details
<sandboxed_coding_agent.core.model.PlannerResult.details>` on success,
:attr:`AgentError.details <sandboxed_coding_agent.core.errors.AgentError>` on
failure. Both travel as plain data, so a planner that works on another machine
adds them the same way; it never writes a record itself.

A record never holds the API key (it is blanked before the record is written),
the prompt or the seed's files.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from .. import provider
from ..errors import AgentError, AgentWarning, PlanRejected, Rejection, UsageError
from ..model import PatchPlan, PlannerResult, PlanRequest, TokenUsage
from ..protocols import Planner
from ..serialization import describe_structure_error, structure, to_json, to_jsonable

APP_DIR = "sandboxed-coding-agent"
RECORD_FORMAT = 2
#: The details a format 1 record (written by the built-in planner itself) held at its top level.
_FORMAT_1_DETAILS = ("request", "attempts", "finish_reason", "response_excerpt")
#: The longest excerpt of an answer or error a record keeps.
MAX_EXCERPT_CHARS = 2_000
#: The largest planner-call record ``agent logs`` reads.
MAX_RECORD_BYTES = 64 * 1024 * 1024

# One path segment with no dot or separator: a task ID can never climb out of the folder.
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


@attrs.frozen
class ProviderRequestInfo:
    """What a planner sent to an HTTP provider, described without its content.

    For a planner's :func:`provider_details`; the built-in planner gives it.

    :ivar url: the endpoint, without credentials, query or fragment.
    :ivar model: the model asked for.
    :ivar messages: how many chat messages were sent.
    :ivar body_bytes: size of the request body (JSON), in bytes.
    :ivar seed_files: how many seed files the prompt carried.
    :ivar response_format: the ``response_format`` type first asked for, if any.
    :ivar timeout_seconds: the connect and read timeout of each attempt.
    :ivar max_retries: further attempts allowed after a retryable failure.
    :ivar prompt_bytes: UTF-8 size of the messages' text, what the model reads.
    """

    url: str
    model: str
    messages: int
    body_bytes: int
    seed_files: int
    response_format: str | None
    timeout_seconds: float
    max_retries: int
    prompt_bytes: int | None = None


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


def provider_details(
    *,
    request: ProviderRequestInfo | None = None,
    attempts: tuple[ProviderAttempt, ...] | list[ProviderAttempt] = (),
    finish_reason: str | None = None,
    response_excerpt: str | None = None,
) -> dict[str, Any]:
    """The details of a call to an HTTP provider, in the form ``agent logs`` shows best.

    A planner that calls a provider over HTTP puts them in its result's (or its
    error's) ``details``; ``agent logs`` then shows the request and one line per
    attempt. Keys left ``None`` or empty are left out.

    :param request: what was sent, without its content.
    :param attempts: every HTTP request, in order.
    :param finish_reason: why the model stopped, as the provider said.
    :param response_excerpt: the start of the answer (see :func:`excerpt`).
    """
    given: dict[str, Any] = {
        "request": request,
        "attempts": list(attempts),
        "finish_reason": finish_reason,
        "response_excerpt": response_excerpt,
    }
    return {key: to_jsonable(value) for key, value in given.items() if value}


@attrs.frozen
class RequestContext:
    """What a planner call was given of a repository, counted; never the files' text.

    :ivar files: how many files the request held.
    :ivar map_bytes: UTF-8 size of the repository map it held.
    :ivar left_out: the context files left out for want of room (the first ones).
    :ivar left_out_count: how many were left out in all.
    """

    files: int
    map_bytes: int
    left_out: tuple[str, ...] = ()
    left_out_count: int = 0

    @classmethod
    def of(cls, request: PlanRequest) -> RequestContext | None:
        """The request's context; ``None`` when it held the whole seed (no map)."""
        if request.repository_map is None:
            return None
        return cls(
            files=len(request.files),
            map_bytes=len(request.repository_map.encode("utf-8", "surrogatepass")),
            left_out=request.left_out,
            left_out_count=request.left_out_count,
        )


def reported_request(details: Mapping[str, Any]) -> ProviderRequestInfo | None:
    """The request a planner described in its ``details`` (:func:`provider_details`), if any."""
    try:
        return structure(details["request"], ProviderRequestInfo)
    except Exception:  # absent, or a planner's own shape: cattrs raises ordinary exceptions
        return None


@attrs.frozen
class PlannerRecord:
    """Everything kept about one planner call.

    :ivar planner_task_id: the ID the run result and every error about the call carry.
    :ivar planner: name of the planner.
    :ivar started_at: when the call began, ISO 8601 in UTC.
    :ivar outcome: ``ok``, ``provider-error``, ``plan-rejected``, ``configuration-error``
        or ``usage-error`` (the kind of the error the call ended in), or ``interrupted``.
    :ivar duration_seconds: wall time of the whole call, as the agent measured it.
    :ivar seed: the seed the plan was for.
    :ivar finished_at: when the call ended, ISO 8601 in UTC.
    :ivar plan: the plan, when the call made one.
    :ivar error: the message the user was given, when the call failed.
    :ivar rejections: the contract's reasons, when the planner's own check refused its plan.
    :ivar response_id: the provider's own ID of its answer.
    :ivar model: the model that answered, as the provider named it.
    :ivar usage: tokens the provider reported.
    :ivar details: what the planner added (see :func:`call_planner`).
    :ivar format: version of this record's layout.
    :ivar context: for a seed shown in part (a repository), how much of it the request
        held and which context files it left out; ``None`` when it held the whole seed.
    """

    planner_task_id: str
    planner: str
    started_at: str
    outcome: str
    duration_seconds: float
    seed: str | None = None
    finished_at: str | None = None
    plan: PatchPlan | None = None
    error: str | None = None
    rejections: tuple[Rejection, ...] = ()
    response_id: str | None = None
    model: str | None = None
    usage: TokenUsage | None = None
    details: dict[str, Any] = attrs.Factory(dict)
    format: int = RECORD_FORMAT
    context: RequestContext | None = None


def runs_directory(environ: Mapping[str, str] = os.environ) -> Path:
    """Where records live: ``$XDG_STATE_HOME/sandboxed-coding-agent/runs``.

    The XDG base directory rules ignore a relative ``XDG_STATE_HOME``, and so does this.
    """
    state = environ.get("XDG_STATE_HOME", "")
    if not state or not os.path.isabs(state):
        home = environ.get("HOME") or str(Path.home())
        state = os.path.join(home, ".local", "state")
    return Path(state) / APP_DIR / "runs"


def is_task_id(text: str) -> bool:
    """Whether ``text`` can name a planner call's record (and its trajectory)."""
    return _TASK_ID.fullmatch(text) is not None


def check_task_id(task_id: str) -> str:
    """Return ``task_id`` if it can name a record; raise :class:`UsageError` if not."""
    if not is_task_id(task_id):
        raise UsageError(
            f"{task_id!r} is not a planner task ID: expected letters, digits, '-' and '_' "
            "only, as printed by `agent run` (for example plan-0123456789abcdef)"
        )
    return task_id


def record_path(task_id: str, environ: Mapping[str, str] = os.environ) -> Path:
    return runs_directory(environ) / f"{check_task_id(task_id)}.json"


def write_record(record: PlannerRecord, environ: Mapping[str, str] = os.environ) -> Path:
    """Save ``record`` (readable by its owner only), with the API key blanked, if it
    appears, and return where it went.

    The file is written whole and then renamed into place, so a reader never sees half a record.

    :raises OSError: the state directory cannot be written.
    """
    path = record_path(record.planner_task_id, environ)
    text = provider.blank_key(to_json(record, indent=2), environ.get(provider.API_KEY_ENV, ""))
    write_private_file(path, text + "\n")
    return path


def call_planner(
    planner: Planner,
    request: PlanRequest,
    *,
    environ: Mapping[str, str] = os.environ,
    ask: Callable[[PlanRequest], PlannerResult] | None = None,
) -> PlannerResult:
    """Ask ``planner`` for a plan, and record the call for ``agent logs``, whatever its end.

    ``ask`` is how to ask it, when not its ``plan`` (a planner that explores is asked
    through ``plan_in_session``).

    The record is named after the task ID of the result or of the error raised.
    A call that ends in an error without one is not recorded: the planner failed
    before it had a task (a setting missing, a service unreachable), there is no
    ID to look it up by, and the error's message says what went wrong. The
    planner's ``details`` (of its result or its error) are kept as JSON; a value
    that is not JSON is kept as its ``repr``. A record that cannot be written is
    a warning: the call's outcome stands.

    :returns: what the planner returned.
    :raises AgentError: what the planner raised, after recording it. Ctrl-C (or
        SIGTERM) passes through after the call is recorded as ``interrupted``, under
        an ID of the agent's own; any other exception (an internal error) passes
        through unrecorded.
    """
    started_at, clock = _now(), time.monotonic()
    fields: dict[str, Any]
    try:
        planned = (ask or planner.plan)(request)
    except AgentError as error:
        task_id = error.planner_task_id
        if task_id is None:
            raise  # a call that never became a task
        outcome = "plan-rejected" if isinstance(error, PlanRejected) else f"{error.kind}-error"
        fields = {"error": error.message, "details": error.details}
        if isinstance(error, PlanRejected):
            fields["rejections"] = error.rejections
        _keep(task_id, planner, request, outcome, started_at, clock, fields, environ)
        raise
    except KeyboardInterrupt:
        # The planner never answered, so there is no ID of its own: the call is kept under
        # one of the agent's, and the record says it was interrupted rather than lost.
        fields = {"error": "interrupted (Ctrl-C or SIGTERM) while waiting for the planner"}
        interrupted = f"plan-{os.urandom(8).hex()}"
        _keep(interrupted, planner, request, "interrupted", started_at, clock, fields, environ)
        raise
    fields = {
        "plan": planned.plan,
        "model": planned.model,
        "response_id": planned.response_id,
        "usage": planned.usage,
        "details": planned.details,
    }
    _keep(planned.planner_task_id, planner, request, "ok", started_at, clock, fields, environ)
    return planned


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _keep(
    task_id: str,
    planner: Planner,
    request: PlanRequest,
    outcome: str,
    started_at: str,
    clock: float,
    fields: dict[str, Any],
    environ: Mapping[str, str],
) -> None:
    """Write the record of one call; a record that cannot be written is one warning."""
    try:
        record = PlannerRecord(
            planner_task_id=task_id,
            planner=planner.name,
            seed=request.seed,
            started_at=started_at,
            finished_at=_now(),
            duration_seconds=round(time.monotonic() - clock, 3),
            outcome=outcome,
            context=RequestContext.of(request),
            **{**fields, "details": _as_json(fields.get("details") or {})},
        )
        write_record(record, environ)
    except (OSError, ValueError, UsageError) as problem:  # UsageError: a malformed task ID
        reason = getattr(problem, "strerror", None) or str(problem)
        warnings.warn(
            f"the record of planner task {task_id} could not be kept in "
            f"{runs_directory(environ)} ({reason}); `agent logs` will not find it",
            AgentWarning,
            stacklevel=4,
        )


def _as_json(details: Mapping[str, Any]) -> dict[str, Any]:
    """``details`` as JSON data: whatever a plugin put there, a record holds JSON."""
    try:
        data = json.loads(json.dumps(dict(details), default=repr))
    except (TypeError, ValueError, RecursionError) as error:
        return {"unrecordable": f"the planner's details are not JSON: {error}"}
    return data if isinstance(data, dict) else {"details": data}


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


class UnreadableRecord(ValueError):
    """A file in a records folder that is not read: its message says why, in a few words."""


@contextmanager
def open_kept_file(name: str | Path, *, folder: int | None = None) -> Iterator[BinaryIO]:
    """A file in one of the agent's records folders, opened as untrusted: never through a
    symbolic link (a link planted there could point anywhere) and never a FIFO or a device
    (which could block a reader forever). ``folder`` is a descriptor of the folder
    ``name`` is in.

    :raises UnreadableRecord: the file is a link, not a regular file, or cannot be opened.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(name, flags, dir_fd=folder)
    except OSError as error:
        if _is_link(name, folder):
            raise UnreadableRecord("a symbolic link, not followed") from None
        raise UnreadableRecord(f"unreadable: {error.strerror}") from None
    try:
        regular = stat.S_ISREG(os.fstat(handle).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(handle)
        raise UnreadableRecord("not a regular file")
    with os.fdopen(handle, "rb") as stream:
        yield stream


def read_kept_file(name: str | Path, *, folder: int | None = None, limit: int) -> bytes:
    """The bytes of a file :func:`open_kept_file` opens, no more than ``limit``.

    :raises UnreadableRecord: as there, or the file is larger than ``limit``.
    """
    try:
        with open_kept_file(name, folder=folder) as stream:
            if os.fstat(stream.fileno()).st_size > limit:
                raise UnreadableRecord(f"larger than {limit:,} bytes")
            data = stream.read(limit + 1)
    except OSError as error:
        raise UnreadableRecord(f"unreadable: {error.strerror}") from None
    if len(data) > limit:  # it grew while being read
        raise UnreadableRecord(f"larger than {limit:,} bytes")
    return data


def _is_link(name: str | Path, folder: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
    except OSError:
        return False


def read_record(task_id: str, environ: Mapping[str, str] = os.environ) -> PlannerRecord:
    """The record of planner task ``task_id``.

    :raises UsageError: the ID is malformed, there is no such record, or it cannot be read.
    """
    path = record_path(task_id, environ)
    if not os.path.lexists(path):
        raise UsageError(
            f"there is no record of planner task {task_id!r} in {path.parent} "
            "(records are kept on the machine that ran `agent run`)"
        )
    try:
        text = read_kept_file(path, limit=MAX_RECORD_BYTES).decode("utf-8")
    except UnreadableRecord as problem:
        raise UsageError(f"the record {str(path)!r} is {problem}") from None
    except UnicodeDecodeError as error:
        raise UsageError(f"cannot read the record {str(path)!r}: {error}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise UsageError(f"the record {str(path)!r} is damaged: {error}") from None
    if isinstance(data, dict) and data.get("format") == 1:
        data = _from_format_1(data)
    try:
        return structure(data, PlannerRecord)
    except Exception as error:  # cattrs raises a tree of ordinary exceptions
        problems = "; ".join(describe_structure_error(error, root="record"))
        raise UsageError(f"the record {str(path)!r} is damaged: {problems}") from None


def _from_format_1(data: dict[str, Any]) -> dict[str, Any]:
    """A record the built-in planner wrote itself, before the agent recorded every call."""
    details = {key: data.pop(key) for key in _FORMAT_1_DETAILS if key in data}
    return {**data, "details": details, "format": RECORD_FORMAT}


def excerpt(text: str, limit: int = MAX_EXCERPT_CHARS) -> str:
    """The start of ``text``, marked when cut."""
    return (
        text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"
    )

"""The built-in planner: one chat completion from an OpenAI-compatible provider.

Configured by ``CODING_AGENT_BASE_URL`` (ending in ``/v1``), ``CODING_AGENT_MODEL``
and ``CODING_AGENT_API_KEY``; per-run choices (timeout, retries, structured
output) arrive as :class:`~sandboxed_coding_agent.core.model.PlannerOptions` in
the request. The key is sent in the ``Authorization`` header and nowhere else,
and is scrubbed from anything the provider echoes back. httpx is imported only
when a plan is requested.

How it meets the ordinary ways real providers fail:

* 429, 408, 500, 502, 503 and 504, a refused or reset connection: retried up
  to ``max_retries`` times over one pooled (keep-alive) client, after an
  exponential, jittered wait, or after exactly as long as ``Retry-After``
  (seconds or an HTTP date; ``retry-after-ms`` too) asks, if that is within
  :attr:`Backoff.max_seconds`. A provider asking for longer ends the call at
  once rather than being retried too early.
* Other 4xx answers are not retried; the error quotes the provider's message.
* A 400 that mentions ``response_format`` when a JSON object was asked for:
  asked once more without ``response_format``, which some servers reject.
* Timeouts (connect, read, or a body still arriving after the timeout) are
  not retried: a provider that hangs would otherwise cost the user the
  timeout again on every attempt.
* Answers over 64,000 bytes are not read past the bound.
* The plan JSON wrapped in a Markdown fence or in prose is taken when the
  answer holds exactly one JSON object; otherwise it is a provider error.

Every call writes a record (:mod:`sandboxed_coding_agent.core.records`) that
``agent logs PLANNER_TASK_ID`` prints.
"""

from __future__ import annotations

import contextlib
import email.utils
import ipaddress
import json
import math
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import attrs

from sandboxed_coding_agent.core import contract, records
from sandboxed_coding_agent.core.errors import ConfigurationError, PlanRejected, ProviderError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import (
    Finding,
    PlannerOptions,
    PlannerResult,
    PlanRequest,
    TokenUsage,
)
from sandboxed_coding_agent.core.protocols import Check, Planner

if TYPE_CHECKING:
    import httpx

BASE_URL_ENV = "CODING_AGENT_BASE_URL"
MODEL_ENV = "CODING_AGENT_MODEL"
API_KEY_ENV = "CODING_AGENT_API_KEY"
PROVIDER_SECRET_NAMES = (BASE_URL_ENV, MODEL_ENV, API_KEY_ENV)

MAX_RESPONSE_BYTES = 64_000
MAX_MODEL_CHARS = 160
MAX_QUOTED_CHARS = 300
#: Answers worth another attempt: the provider is busy or briefly broken, not refusing us.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

SYSTEM_PROMPT = """\
You change a small software project so that its unit test passes.
Answer with one JSON object and nothing else, exactly of this shape:
{"files": [{"path": "<an editable path>", "content": "<the complete new file text>"}]}
Rules:
- "files" lists 1 to %(max_files)d entries; each entry has exactly the keys "path" and "content".
- "path" is one of the editable paths given by the user, written exactly as given.
- "content" is the whole new file, not a diff; all contents together stay under %(max_bytes)d bytes.
- Never change any other file; the tests are read-only.
"""


# --- configuration --------------------------------------------------------------------------


@attrs.frozen
class ProviderSettings:
    """Where and how to reach the provider; the key never appears in ``repr``."""

    base_url: str
    model: str
    api_key: str = attrs.field(repr=False)

    @property
    def completions_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str) -> str:
    """Return ``url`` if it is a usable provider base URL; raise :class:`ConfigurationError`."""
    problem = f"{BASE_URL_ENV} must be an https URL ending in /v1"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port
    except ValueError as error:
        raise ConfigurationError(f"{problem}: it cannot be parsed ({error})") from None
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"{BASE_URL_ENV} must not contain credentials; put the key in {API_KEY_ENV}"
        )
    if parts.scheme not in ("https", "http") or not host:
        raise ConfigurationError(f"{problem}, for example https://api.openai.com/v1 (got {url!r})")
    if parts.scheme == "http" and not _is_loopback(host):
        raise ConfigurationError(
            f"{BASE_URL_ENV} uses plain http for {host!r}; use https "
            "(plain http is allowed only for localhost, 127.0.0.0/8 and ::1)"
        )
    if "?" in url or "#" in url:
        raise ConfigurationError(f"{BASE_URL_ENV} must not have a query or fragment (got {url!r})")
    if not parts.path.rstrip("/").endswith("/v1"):
        raise ConfigurationError(
            f"{problem}; the planner appends /chat/completions itself (got {url!r})"
        )
    return url


def settings_from_environment(environ: Mapping[str, str] = os.environ) -> ProviderSettings:
    """Read and check the provider settings; every problem names its variable."""
    values = {}
    for name in PROVIDER_SECRET_NAMES:
        value = environ.get(name, "").strip()
        if not value:
            raise ConfigurationError(
                f"{name} is not set; set {', '.join(PROVIDER_SECRET_NAMES)} "
                "to use the OpenAI-compatible planner, or test a plan file with --plan"
            )
        values[name] = value
    model = values[MODEL_ENV]
    if len(model) > MAX_MODEL_CHARS or _CONTROL.search(model):
        raise ConfigurationError(
            f"{MODEL_ENV} must be at most {MAX_MODEL_CHARS} characters with no control characters"
        )
    key = values[API_KEY_ENV]
    if not all(0x21 <= ord(c) <= 0x7E for c in key):
        raise ConfigurationError(
            f"{API_KEY_ENV} contains spaces or characters that cannot be sent in an HTTP header"
        )
    return ProviderSettings(check_base_url(values[BASE_URL_ENV]), model, key)


# --- the request ----------------------------------------------------------------------------


def build_messages(request: PlanRequest) -> list[dict[str, str]]:
    """The system and user messages; the user message carries every seed file."""
    system = SYSTEM_PROMPT % {
        "max_files": request.limits.max_files,
        "max_bytes": request.limits.max_total_bytes,
    }
    project = {
        "instruction": request.instruction,
        "editable_paths": list(request.editable_paths),
        "files": [
            {"path": path, "editable": path in request.editable_paths, "content": text}
            for path, text in request.files.items()
        ],
    }
    user = "Project and request as JSON. Only the editable paths may change.\n" + json.dumps(
        project, indent=1, ensure_ascii=False
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def plan_json_schema(request: PlanRequest) -> dict[str, Any]:
    """The JSON Schema of a plan for this request's seed, in the subset strict providers accept."""
    entry = {
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "content"],
        "properties": {
            "path": {"type": "string", "enum": list(request.editable_paths)},
            "content": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["files"],
        "properties": {
            "files": {
                "type": "array",
                "minItems": 1,
                "maxItems": request.limits.max_files,
                "items": entry,
            }
        },
    }


def request_body(model: str, request: PlanRequest) -> dict[str, Any]:
    """The chat completions request: deterministic, and asking for JSON only."""
    if request.options.structured_output:
        response_format: dict[str, Any] = {
            "type": "json_schema",
            "json_schema": {
                "name": "patch_plan",
                "strict": True,
                "schema": plan_json_schema(request),
            },
        }
    else:
        response_format = {"type": "json_object"}
    return {
        "model": model,
        "temperature": 0,
        "response_format": response_format,
        "messages": build_messages(request),
    }


def new_planner_task_id() -> str:
    return f"plan-{uuid.uuid4().hex[:16]}"


# --- waiting between attempts ---------------------------------------------------------------


@attrs.frozen
class Backoff:
    """How long the planner waits before another attempt.

    :ivar base_seconds: the wait before the first retry; each later one doubles.
    :ivar max_seconds: the longest wait, including one the provider asks for with
        ``Retry-After``; a provider asking for longer ends the call instead.
    :ivar jitter: the fraction by which each computed wait is randomly shortened, so
        that many clients rate limited together do not all come back together.
    """

    base_seconds: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    max_seconds: float = attrs.field(default=30.0, validator=attrs.validators.ge(0))
    jitter: float = attrs.field(
        default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)]
    )

    def delay(self, retry: int, draw: float) -> float:
        """The wait before retry number ``retry`` (from 1), for a random ``draw`` in [0, 1)."""
        ceiling = min(self.max_seconds, self.base_seconds * 2.0 ** (retry - 1))
        return ceiling * (1 - self.jitter * draw)


def retry_after_seconds(headers: Mapping[str, str], now: float) -> float | None:
    """How long the provider asks us to wait, or ``None`` if it does not say (or says nonsense).

    Reads ``retry-after-ms`` (OpenAI, Azure) and ``Retry-After`` as seconds or an HTTP date.
    """
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    text = headers.get("retry-after")
    if text is None:
        return None
    try:
        seconds = float(text.strip())
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = max(0.0, when.timestamp() - now)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


# --- one planner call -----------------------------------------------------------------------


class _TooLarge(Exception):
    def __init__(self, how: str, status: int) -> None:
        super().__init__(how)
        self.how = how
        self.status = status


class _TooSlow(Exception):
    pass


def _status_label(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


class _Call:
    """One planner call: its task ID, its attempts, and how its errors and record read.

    Everything the user sees about the call goes through :meth:`redact`, so a
    provider that echoes the key back cannot make us show it.
    """

    def __init__(
        self,
        settings: ProviderSettings,
        options: PlannerOptions,
        planner: str,
    ) -> None:
        self.settings = settings
        self.options = options
        self.planner = planner
        self.task_id = new_planner_task_id()
        self.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        self.started = time.monotonic()
        self.attempts: list[records.ProviderAttempt] = []
        self.request_info: records.ProviderRequestInfo | None = None
        self.outcome = "interrupted"
        self.error_message: str | None = None
        self.excerpt: str | None = None
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self.usage: TokenUsage | None = None
        key = settings.api_key
        self._secret_forms = sorted(
            {key, json.dumps(key)[1:-1], quote(key, safe="")}, key=len, reverse=True
        )

    def redact(self, text: str) -> str:
        for form in self._secret_forms:
            text = text.replace(form, "[redacted]")
        return text

    def holds_key(self, text: str) -> bool:
        return any(form in text for form in self._secret_forms)

    def error(self, message: str) -> ProviderError:
        return ProviderError(self.redact(message), planner_task_id=self.task_id)

    def rejected(self, error: PlanRejected) -> PlanRejected:
        """``error`` for this call, with the key blanked from paths the model chose."""
        rejections = [
            attrs.evolve(r, message=self.redact(r.message), path=r.path and self.redact(r.path))
            for r in error.rejections
        ]
        return PlanRejected(rejections, planner_task_id=self.task_id)

    def quoted(self, text: str) -> str:
        """Provider text fit to quote: key removed, control characters blanked, bounded."""
        text = _CONTROL.sub(" ", self.redact(text)).strip()
        return text[:MAX_QUOTED_CHARS] + ("..." if len(text) > MAX_QUOTED_CHARS else "")

    def keep_excerpt(self, text: str | bytes) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        self.excerpt = records.excerpt(self.redact(text))

    def log_attempt(
        self,
        started: float,
        waited: float,
        status: int | None,
        outcome: str,
        detail: str | None,
        response_format: str | None,
    ) -> None:
        self.attempts.append(
            records.ProviderAttempt(
                number=len(self.attempts) + 1,
                started_seconds=round(started - self.started, 3),
                seconds=round(time.monotonic() - started, 3),
                status=status,
                outcome=outcome,
                detail=self.quoted(detail) if detail else None,
                waited_seconds=round(waited, 3),
                response_format=response_format,
            )
        )

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def record(self) -> records.PlannerRecord | None:
        if self.request_info is None:
            return None
        return records.PlannerRecord(
            planner_task_id=self.task_id,
            planner=self.planner,
            started_at=self.started_at,
            request=self.request_info,
            attempts=tuple(self.attempts),
            outcome=self.outcome,
            duration_seconds=self.seconds,
            error=self.error_message,
            response_id=self.response_id,
            model=self.model,
            usage=self.usage,
            finish_reason=self.finish_reason,
            response_excerpt=self.excerpt,
        )


def _provider_message(body: bytes) -> str:
    """The provider's own words about an error: ``error.message`` and kin, or the raw body."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body.decode("utf-8", errors="replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        for candidate in (error, data.get("message"), data.get("detail")):
            if isinstance(candidate, str):
                return candidate
    return body.decode("utf-8", errors="replace")


def _status_error(answer: _Answer, call: _Call) -> ProviderError:
    status = answer.status
    quoted = call.quoted(_provider_message(answer.body))
    said = f'; the provider said: "{quoted}"' if quoted else ""
    label = _status_label(status)
    attempts = len(call.attempts)
    tries = f"; gave up after {attempts} attempts" if attempts > 1 else ""
    if status == 401:
        advice = f"the provider refused the API key ({label}); check {API_KEY_ENV}"
    elif status == 403:
        advice = f"the provider denied this key access to the model or endpoint ({label})"
    elif status == 404:
        advice = (
            f"the provider answered {label}: check that {BASE_URL_ENV} ends in /v1 "
            f"and that {MODEL_ENV} names a model it serves"
        )
    elif status == 429:
        advice = f"rate limited by the provider ({label}){tries}"
    elif 300 <= status < 400:
        location = call.quoted(answer.headers.get("location", "")) or "nowhere"
        advice = (
            f"the provider answered {label}, redirecting to {location}; "
            f"set {BASE_URL_ENV} to the URL it really serves"
        )
    elif 400 <= status < 500:
        advice = f"the provider rejected the request ({label})"
    else:
        advice = f"the provider answered {label}{tries}"
    return call.error(advice + said)


def _network_problem(error: Exception, url: str) -> str:
    text = str(error) or type(error).__name__
    lowered = text.lower()
    if "refused" in lowered:
        return f"the provider at {url} refused the connection ({text})"
    if "reset" in lowered:
        return f"the connection to the provider was reset ({text})"
    if "disconnected" in lowered or "closed" in lowered:
        return f"the provider closed the connection without a complete answer ({text})"
    return f"the connection to the provider at {url} failed ({type(error).__name__}: {text})"


# --- reading the answer ---------------------------------------------------------------------


@attrs.frozen
class Completion:
    """The parts of a chat completion the planner uses."""

    content: str
    response_id: str | None
    model: str | None
    usage: TokenUsage | None
    finish_reason: str | None


def _usage(data: Mapping[str, Any]) -> TokenUsage | None:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return TokenUsage(count("prompt_tokens"), count("completion_tokens"))


def _type_name(value: object) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def parse_completion(body: bytes, call: _Call) -> Completion:
    """The single choice's text and the call's metadata; a malformed answer says what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        start = call.quoted(body[:120].decode("utf-8", errors="replace"))
        raise call.error(f"the provider's answer is not JSON; it begins: {start}") from None
    if not isinstance(data, dict):
        raise call.error(f"the provider's answer is {_type_name(data)}, not a JSON object")
    response_id, model = data.get("id"), data.get("model")
    call.response_id = call.quoted(response_id) if isinstance(response_id, str) else None
    call.model = call.quoted(model) if isinstance(model, str) else None
    call.usage = _usage(data)
    choices = data.get("choices")
    if "choices" not in data and data.get("error") is not None:
        raise call.error(
            f'the provider answered with an error: "{call.quoted(_provider_message(body))}"'
        )
    if not isinstance(choices, list) or not choices:
        raise call.error("the provider's answer has no choices")
    if len(choices) != 1:
        raise call.error(f"the provider's answer has {len(choices)} choices; expected exactly one")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise call.error(f"choices[0] in the provider's answer is {_type_name(choice)}")
    finish_reason = choice.get("finish_reason")
    call.finish_reason = call.quoted(finish_reason) if isinstance(finish_reason, str) else None
    message = choice.get("message")
    if not isinstance(message, dict):
        raise call.error("choices[0] in the provider's answer has no message")
    content = message.get("content")
    if isinstance(content, str):
        call.keep_excerpt(content)
    if finish_reason == "length":
        raise call.error(
            "the model's answer was cut off at its token limit (finish_reason: length); "
            "the plan is incomplete"
        )
    if finish_reason == "content_filter":
        raise call.error(
            "the provider's content filter stopped the answer (finish_reason: content_filter)"
        )
    if content is None:
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise call.error(f'the model refused: "{call.quoted(refusal)}"')
        raise call.error("choices[0].message.content in the provider's answer is null")
    if not isinstance(content, str):
        raise call.error(
            f"choices[0].message.content in the provider's answer is {_type_name(content)}, "
            "not a string"
        )
    return Completion(
        content=content,
        response_id=call.response_id,
        model=call.model,
        usage=call.usage,
        finish_reason=call.finish_reason,
    )


# Where a JSON object can begin: a brace, then a key or the closing brace. Trying only
# these keeps prose full of braces from costing one failed parse per brace.
_OBJECT_START = re.compile(r"\{\s*[\"}]")


def extract_json_object(text: str) -> str:
    """The one JSON object in a model's answer, which may wrap it in a fence or in prose.

    Text that is JSON as a whole is returned unchanged. Otherwise every ``{``
    not inside an object already found starts a candidate, and braces in prose
    that do not open a valid object are passed over.

    :raises ValueError: saying whether there was no object or several.
    """
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        return text
    decoder = json.JSONDecoder()
    found: list[tuple[int, int]] = []
    start = _OBJECT_START.search(text)
    while start is not None:
        try:
            _, end = decoder.raw_decode(text, start.start())
        except (ValueError, RecursionError):
            start = _OBJECT_START.search(text, start.start() + 1)
            continue
        found.append((start.start(), end))
        start = _OBJECT_START.search(text, end)
    if not found:
        raise ValueError("the model's answer holds no JSON object")
    if len(found) > 1:
        raise ValueError(
            f"the model's answer holds {len(found)} JSON objects; "
            "it is not clear which one is the plan"
        )
    first, last = found[0]
    return text[first:last]


# --- the planner ----------------------------------------------------------------------------

# A provider echoing the key into the plan would carry it into the sandbox, the diff and
# the summary; such an answer is never used.
_ANSWER_HOLDS_KEY = (
    "the model's answer contains the API key (the provider echoed it back); "
    "it was not used, so the key reaches neither the sandbox nor any output"
)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _draw() -> float:
    return random.random()  # noqa: S311 - jitter, not a secret


@attrs.frozen
class OpenAICompatiblePlanner:
    """Asks an OpenAI-compatible chat completions endpoint for one plan.

    :ivar environ: where the provider settings are read and records are written.
    :ivar backoff: how long to wait between attempts.
    :ivar sleep: how to wait (tests pass one that only notes the wait).
    :ivar draw: the random source of the backoff's jitter.
    """

    name: str = "openai"
    description: str = (
        "OpenAI-compatible chat completions (CODING_AGENT_BASE_URL, _MODEL, _API_KEY)"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)
    backoff: Backoff = attrs.field(factory=Backoff)
    sleep: Callable[[float], None] = attrs.field(default=_sleep, repr=False)
    draw: Callable[[], float] = attrs.field(default=_draw, repr=False)

    def plan(self, request: PlanRequest) -> PlannerResult:
        call = _Call(settings_from_environment(self.environ), request.options, self.name)
        try:
            result = self._plan(call, request)
        except ProviderError as error:
            call.outcome, call.error_message = "provider-error", error.message
            raise
        except PlanRejected as error:
            call.outcome, call.error_message = "plan-rejected", error.message
            raise
        except Exception as error:
            call.outcome = "internal-error"
            call.error_message = call.redact(f"{type(error).__name__}: {error}")
            raise
        else:
            call.outcome = "ok"
            return result
        finally:
            self._save(call)

    def _save(self, call: _Call) -> None:
        record = call.record()
        if record is None:
            return
        # The record helps investigate; failing to keep it must not fail the run itself.
        with contextlib.suppress(OSError):
            records.write_record(record, self.environ)

    def _plan(self, call: _Call, request: PlanRequest) -> PlannerResult:
        body = request_body(call.settings.model, request)
        call.request_info = records.ProviderRequestInfo(
            url=call.settings.completions_url,
            model=call.settings.model,
            messages=len(body["messages"]),
            body_bytes=len(json.dumps(body).encode()),
            seed_files=len(request.files),
            response_format=body["response_format"]["type"],
            timeout_seconds=request.options.timeout_seconds,
            max_retries=request.options.max_retries,
        )
        raw = self._exchange(call, body)
        call.keep_excerpt(raw)
        completion = parse_completion(raw, call)
        if call.holds_key(completion.content):
            raise call.error(_ANSWER_HOLDS_KEY)
        try:
            text = extract_json_object(completion.content)
        except ValueError as problem:
            raise call.error(
                f"{problem}; it begins: {call.quoted(completion.content[:120])}"
            ) from None
        try:
            plan = contract.validate_plan(
                contract.parse_plan(text),
                editable_paths=request.editable_paths,
                limits=request.limits,
            )
        except PlanRejected as rejected:
            raise call.rejected(rejected) from None
        if any(call.holds_key(entry.path + entry.content) for entry in plan.files):
            raise call.error(_ANSWER_HOLDS_KEY)  # written with JSON escapes, say \u0073k-...
        return PlannerResult(
            planner=self.name,
            planner_task_id=call.task_id,
            plan=plan,
            model=completion.model or call.settings.model,
            response_id=completion.response_id,
            usage=completion.usage,
            duration_seconds=call.seconds,
        )

    def _exchange(self, call: _Call, body: dict[str, Any]) -> bytes:
        """POST ``body`` until an answer worth reading arrives; its bytes, or a provider error."""
        import httpx

        retries_left = call.options.max_retries
        may_drop_format = body["response_format"]["type"] == "json_object"
        waited = 0.0
        # One client for every attempt, so a retry reuses the kept-alive connection.
        with httpx.Client(
            timeout=httpx.Timeout(call.options.timeout_seconds),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=False,
        ) as client:
            while True:
                if waited:
                    self.sleep(waited)
                answer = _attempt(client, call, body, waited)
                if isinstance(answer, str):  # the connection failed; the answer is a problem
                    if retries_left == 0:
                        tries = len(call.attempts)
                        gave_up = f"; gave up after {tries} attempts" if tries > 1 else ""
                        raise call.error(answer + gave_up)
                    retries_left -= 1
                    waited = self._backoff(call, retries_left)
                    continue
                if 200 <= answer.status < 300:
                    return answer.body
                call.keep_excerpt(answer.body)
                if may_drop_format and answer.refuses_response_format:
                    # Some servers (older vLLM and llama.cpp builds, gateways) refuse
                    # json_object; the system prompt still asks for JSON, so ask once without.
                    may_drop_format = False
                    body = {k: v for k, v in body.items() if k != "response_format"}
                    waited = 0.0
                    continue
                if answer.refuses_response_format and call.options.structured_output:
                    quoted = call.quoted(_provider_message(answer.body))
                    raise call.error(
                        "the provider does not accept the plan's JSON Schema as response_format "
                        f'(run without --structured-output); the provider said: "{quoted}"'
                    )
                if answer.status not in RETRYABLE_STATUSES or retries_left == 0:
                    raise _status_error(answer, call)
                asked = retry_after_seconds(answer.headers, time.time())
                if asked is not None and asked > self.backoff.max_seconds:
                    raise call.error(
                        f"{_status_error(answer, call).message}; it asks to wait {asked:.0f} s "
                        f"before trying again, longer than the {self.backoff.max_seconds:g} s "
                        "the planner waits"
                    )
                retries_left -= 1
                waited = asked if asked is not None else self._backoff(call, retries_left)

    def _backoff(self, call: _Call, retries_left: int) -> float:
        return self.backoff.delay(call.options.max_retries - retries_left, self.draw())


@attrs.frozen
class _Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def refuses_response_format(self) -> bool:
        lowered = self.body.lower()
        return self.status == 400 and (
            b"response_format" in lowered or b"response format" in lowered
        )


def _attempt(
    client: httpx.Client, call: _Call, body: dict[str, Any], waited: float
) -> _Answer | str:
    """One POST, logged: the provider's answer, or what went wrong with a connection.

    :raises ProviderError: the provider was too slow or its answer too large; neither
        is worth another attempt.
    """
    import httpx

    timeout = call.options.timeout_seconds
    response_format = body.get("response_format", {}).get("type")
    started = time.monotonic()

    def log(status: int | None, outcome: str, detail: str | None) -> None:
        call.log_attempt(started, waited, status, outcome, detail, response_format)

    try:
        status, headers, raw = _post(client, call, body)
    except httpx.TimeoutException as error:
        problem = (
            f"could not connect to the provider within {timeout:g} s"
            if isinstance(error, httpx.ConnectTimeout)
            else f"the provider did not answer within {timeout:g} s"
        )
        log(None, "timeout", problem)
        raise call.error(f"{problem} (set another limit with --provider-timeout)") from None
    except _TooSlow:
        problem = f"the provider's answer was still arriving after {timeout:g} s"
        log(None, "timeout", problem)
        raise call.error(problem) from None
    except _TooLarge as too_large:
        problem = (
            f"the provider's answer is larger than {MAX_RESPONSE_BYTES:,} bytes "
            f"({too_large.how}); it was not read further"
        )
        log(too_large.status, "too-large", problem)
        raise call.error(problem) from None
    except (httpx.TransportError, httpx.StreamError) as error:
        problem = _network_problem(error, call.settings.completions_url)
        log(None, "connection-error", problem)
        return problem
    ok = 200 <= status < 300
    log(status, "ok" if ok else "http-error", None if ok else _provider_message(raw))
    return _Answer(status, headers, raw)


def _post(
    client: httpx.Client, call: _Call, body: dict[str, Any]
) -> tuple[int, httpx.Headers, bytes]:
    """Send the request; the status, headers and (bounded) body of the answer."""
    content = json.dumps(body, ensure_ascii=False).encode("utf-8")
    headers = {
        "Authorization": f"Bearer {call.settings.api_key}",
        "Content-Type": "application/json",
        "Accept": "application/json",
        # An encoded answer could inflate past the bound in one chunk; ask for it plain.
        "Accept-Encoding": "identity",
    }
    url = call.settings.completions_url
    with client.stream("POST", url, content=content, headers=headers) as response:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
            raise _TooLarge(f"it announced {int(declared):,} bytes", response.status_code)
        # The read timeout bounds each wait for data; this bounds a body trickling in.
        deadline = time.monotonic() + call.options.timeout_seconds
        received = bytearray()
        for chunk in response.iter_bytes():
            received += chunk
            if len(received) > MAX_RESPONSE_BYTES:
                raise _TooLarge("it kept sending past the bound", response.status_code)
            if time.monotonic() > deadline:
                raise _TooSlow
        return response.status_code, response.headers, bytes(received)


@attrs.frozen
class ProviderVariables:
    """For ``agent doctor``: the provider variables are set and valid; the key is never shown."""

    name: str = "openai-provider"
    description: str = "the OpenAI-compatible planner's variables"

    def run(self) -> list[Finding]:
        try:
            settings = settings_from_environment()
        except ConfigurationError as error:
            return [
                Finding(
                    "provider variables",
                    ok=False,
                    detail=error.message,
                    fix=f"export {', '.join(PROVIDER_SECRET_NAMES)} "
                    "(or test plan files with `agent run --plan`)",
                )
            ]
        detail = f"{settings.base_url}, model {settings.model}, {API_KEY_ENV} set (not shown)"
        return [Finding("provider variables", ok=True, detail=detail)]


@hookimpl
def register_planners(register: Callable[[Planner], None]) -> None:
    register(OpenAICompatiblePlanner())


@hookimpl
def register_checks(register: Callable[[Check], None]) -> None:
    register(ProviderVariables())

"""Sending the request: attempts over one pooled client, the waits between them, bounded answers.

httpx is imported inside the functions that use it, so importing the planner stays cheap.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import attrs

from sandboxed_coding_agent.core.errors import ConfigurationError
from sandboxed_coding_agent.core.model import SeedLimits

from .answer import provider_message
from .call import PlannerCall
from .prompt import encode_body
from .settings import API_KEY_ENV, BASE_URL_ENV, MODEL_ENV, is_loopback, no_path_hint

if TYPE_CHECKING:
    import httpx

#: The least bound of an answer, whatever the seed: room for the answer's envelope (the
#: completion's JSON, its IDs and usage) and a small plan.
MAX_RESPONSE_BYTES = 64_000
#: An answer's bytes besides the plan's texts and paths: the completion's JSON around them.
ENVELOPE_BYTES = 16_384
#: How many bytes of the answer a byte of plan text may take on the wire at most: the plan
#: is JSON inside the completion's JSON, so a quote or a backslash is written as four.
ESCAPED_BYTES = 4


def answer_bound(limits: SeedLimits, edit_format: str = "whole") -> int:
    """The most bytes of a provider's answer the planner reads, for a seed's plan limits.

    As large as the largest plan the limits allow, written as the model would write it:
    ``max_total_bytes`` of text (whole files), or three times that for the edit formats
    (the text they replace, its replacement and their markup), each byte of it taking up
    to :data:`ESCAPED_BYTES`, with ``max_files`` paths of ``max_path_chars`` and the
    envelope; never less than :data:`MAX_RESPONSE_BYTES`. The seed limits' ceilings keep
    it under 16 MB.
    """
    texts = limits.max_total_bytes * (1 if edit_format == "whole" else 3)
    paths = limits.max_files * (limits.max_path_chars * ESCAPED_BYTES + 64)
    return max(MAX_RESPONSE_BYTES, texts * ESCAPED_BYTES + paths + ENVELOPE_BYTES)


#: Answers worth another attempt: the provider is busy or briefly broken, not refusing us.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


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
            import email.utils

            when = email.utils.parsedate_to_datetime(text.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = max(0.0, when.timestamp() - now)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def exchange(
    call: PlannerCall,
    body: dict[str, Any],
    *,
    backoff: Backoff,
    sleep: Callable[[float], None],
    draw: Callable[[], float],
) -> bytes:
    """POST ``body`` until an answer worth reading arrives; its bytes, or a provider error."""

    retries_left = call.options.max_retries
    may_drop_format = body.get("response_format", {}).get("type") == "json_object"
    waited = 0.0

    def next_wait() -> float:
        return backoff.delay(call.options.max_retries - retries_left, draw())

    with _client(call) as client:
        while True:
            if waited:
                sleep(waited)
            answer = _attempt(client, call, body, waited)
            if isinstance(answer, str):  # the connection failed; the answer is a problem
                if retries_left == 0:
                    tries = len(call.attempts)
                    gave_up = f"; gave up after {tries} attempts" if tries > 1 else ""
                    raise call.error(answer + gave_up)
                retries_left -= 1
                waited = next_wait()
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
                quoted = call.quoted(provider_message(answer.body))
                raise call.error(
                    "the provider does not accept the plan's JSON Schema as response_format "
                    f'(run without --structured-output); the provider said: "{quoted}"'
                )
            if answer.status not in RETRYABLE_STATUSES or retries_left == 0:
                raise call.error(_status_problem(answer, call))
            asked = retry_after_seconds(answer.headers, time.time())
            if asked is not None and asked > backoff.max_seconds:
                raise call.error(
                    f"{_status_problem(answer, call)}; it asks to wait {asked:.0f} s "
                    f"before trying again, longer than the {backoff.max_seconds:g} s "
                    "the planner waits"
                )
            retries_left -= 1
            waited = asked if asked is not None else next_wait()


def _client(call: PlannerCall) -> httpx.Client:
    """One client for every attempt, so a retry reuses the kept-alive connection.

    Redirects are not followed: the request goes to the configured URL or nowhere.
    Proxies from the environment (``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) are
    used for a remote provider over https: the proxy relays an encrypted tunnel and
    never sees the key. A provider over plain http (one on this machine, or one that
    ``CODING_AGENT_ALLOW_HTTP`` lets the planner reach on the network) is never reached
    through a proxy: its plain request, key included, would go to the proxy too.
    """
    import httpx

    try:
        url = httpx.URL(call.settings.completions_url)
        host = url.host
    except (httpx.InvalidURL, UnicodeError) as error:
        raise ConfigurationError(
            f"{BASE_URL_ENV} cannot be used: {call.redact(str(error))}",
            planner_task_id=call.task_id,
        ) from None
    direct = None
    if is_loopback(host) or url.scheme == "http":
        direct = {f"all://[{host}]" if ":" in host else f"all://{host}": None}
    try:
        return httpx.Client(
            timeout=httpx.Timeout(call.options.timeout_seconds),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=False,
            mounts=direct,
        )
    except (ImportError, ValueError, OSError, httpx.InvalidURL) as error:
        raise ConfigurationError(
            "the proxy or certificate settings in the environment cannot be used "
            "(HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, SSL_CERT_FILE, SSL_CERT_DIR): "
            f"{type(error).__name__}: {call.redact(str(error))}",
            planner_task_id=call.task_id,
        ) from None


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


class _TooLarge(Exception):
    def __init__(self, how: str, status: int) -> None:
        super().__init__(how)
        self.how = how
        self.status = status


class _TooSlow(Exception):
    pass


class _Encoded(Exception):
    """The answer came content-encoded (gzip, ...), though the planner asked for identity."""

    def __init__(self, encoding: str, status: int) -> None:
        super().__init__(encoding)
        self.encoding = encoding
        self.status = status


def _attempt(
    client: httpx.Client, call: PlannerCall, body: dict[str, Any], waited: float
) -> _Answer | str:
    """One POST, logged: the provider's answer, or what went wrong with a connection.

    :raises ProviderError: the provider was too slow, or its answer too large or
        content-encoded; none is worth another attempt.
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
            f"the provider's answer is larger than {call.answer_bound:,} bytes "
            f"({too_large.how}), the most a plan within this seed's limits takes; "
            "it was not read further"
        )
        log(too_large.status, "too-large", problem)
        raise call.error(problem) from None
    except _Encoded as encoded:
        problem = (
            "the provider's answer is encoded (Content-Encoding: "
            f"{call.quoted(encoded.encoding)}) although the planner asked for identity; "
            "it was not read"
        )
        log(encoded.status, "encoded", problem)
        raise call.error(problem) from None
    except (httpx.TransportError, httpx.StreamError) as error:
        problem = _network_problem(error, call.settings.completions_url)
        log(None, "connection-error", problem)
        return problem
    except UnicodeError as error:  # a host name IDNA refuses, found only when connecting
        log(None, "connection-error", str(error))
        raise ConfigurationError(
            f"{BASE_URL_ENV} names a host that cannot be looked up: {call.redact(str(error))}",
            planner_task_id=call.task_id,
        ) from None
    ok = 200 <= status < 300
    log(status, "ok" if ok else "http-error", None if ok else provider_message(raw))
    return _Answer(status, headers, raw)


def _post(
    client: httpx.Client, call: PlannerCall, body: dict[str, Any]
) -> tuple[int, httpx.Headers, bytes]:
    """Send the request; the status, headers and (bounded) body of the answer."""
    content = encode_body(body)
    headers = {
        **call.settings.key_headers(),
        "Content-Type": "application/json",
        "Accept": "application/json",
        # An encoded answer could inflate past the bound in one chunk; ask for it plain.
        "Accept-Encoding": "identity",
    }
    url = call.settings.request_url
    with client.stream("POST", url, content=content, headers=headers) as response:
        # httpx decodes gzip and deflate (br and zstd too, when installed), stacked as well,
        # whatever was asked for: a few KB on the wire can inflate to gigabytes.
        encoding = response.headers.get("content-encoding", "")
        if encoding.strip().lower() not in ("", "identity"):
            raise _Encoded(encoding, response.status_code)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > call.answer_bound:
            raise _TooLarge(f"it announced {int(declared):,} bytes", response.status_code)
        # The read timeout bounds each wait for data; this bounds a body trickling in.
        deadline = time.monotonic() + call.options.timeout_seconds
        received = bytearray()
        # Raw bytes as they came (de-chunked, never decoded), so the bound is on the wire.
        for chunk in response.iter_raw():
            received += chunk
            if len(received) > call.answer_bound:
                raise _TooLarge("it kept sending past the bound", response.status_code)
            if time.monotonic() > deadline:
                raise _TooSlow
        return response.status_code, response.headers, bytes(received)


def _status_label(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _status_problem(answer: _Answer, call: PlannerCall) -> str:
    """What an unsuccessful status means to the user, with the provider's own words."""
    status = answer.status
    quoted = call.quoted(provider_message(answer.body))
    said = f'; the provider said: "{quoted}"' if quoted else ""
    label = _status_label(status)
    attempts = len(call.attempts)
    tries = f"; gave up after {attempts} attempts" if attempts > 1 else ""
    if status == 401:
        advice = f"the provider refused the API key ({label}); check {API_KEY_ENV}"
    elif status == 403:
        advice = f"the provider denied this key access to the model or endpoint ({label})"
    elif status == 404:
        model = f"{MODEL_ENV} names a model it serves"
        where = (
            f"{no_path_hint(call.settings.base_url)}; check too that {model}"
            if call.settings.has_no_path
            else f"check that {BASE_URL_ENV} is the URL the provider serves /chat/completions "
            f"under, and that {model}"
        )
        advice = f"the provider answered {label} for {call.settings.completions_url}: {where}"
    elif status == 429:
        advice = f"rate limited by the provider ({label}){tries}"
    elif 300 <= status < 400:
        location = call.quoted(answer.headers.get("location", "")) or "nowhere"
        advice = (
            f"the provider answered {label}, redirecting to {location}; "
            f"set {BASE_URL_ENV} to the URL it really serves"
        )
    elif status == 400:
        # Some proxies (LiteLLM, for one) answer a key they do not know with a 400.
        advice = (
            f"the provider rejected the request ({label}); some proxies answer a rejected "
            f"API key this way too, so check {API_KEY_ENV} as well"
        )
    elif 400 <= status < 500 and status not in RETRYABLE_STATUSES:
        advice = f"the provider rejected the request ({label})"
    else:
        advice = f"the provider answered {label}{tries}"
    return advice + said


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

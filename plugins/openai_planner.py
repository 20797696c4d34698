"""The built-in planner: one chat completion from an OpenAI-compatible provider.

Configured by ``CODING_AGENT_BASE_URL`` (ending in ``/v1``), ``CODING_AGENT_MODEL``
and ``CODING_AGENT_API_KEY``. The key is sent in the ``Authorization`` header
and nowhere else. httpx is imported only when a plan is requested.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import attrs

from sandboxed_coding_agent.core import contract
from sandboxed_coding_agent.core.errors import ConfigurationError, PlanRejected, ProviderError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PlannerResult, PlanRequest, TokenUsage
from sandboxed_coding_agent.core.protocols import Planner

if TYPE_CHECKING:
    import httpx

BASE_URL_ENV = "CODING_AGENT_BASE_URL"
MODEL_ENV = "CODING_AGENT_MODEL"
API_KEY_ENV = "CODING_AGENT_API_KEY"
PROVIDER_SECRET_NAMES = (BASE_URL_ENV, MODEL_ENV, API_KEY_ENV)

MAX_RESPONSE_BYTES = 64_000
MAX_MODEL_CHARS = 160
DEFAULT_TIMEOUT_SECONDS = 90.0
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


@attrs.frozen
class ProviderSettings:
    """Where and how to reach the provider; the key never appears in ``repr``."""

    base_url: str
    model: str
    api_key: str = attrs.field(repr=False)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

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


def new_planner_task_id() -> str:
    return f"plan-{uuid.uuid4().hex[:16]}"


class _Call:
    """One planner call: its task ID, key redaction, and how its errors read."""

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.task_id = new_planner_task_id()

    def redact(self, text: str) -> str:
        return text.replace(self.settings.api_key, "[redacted]")

    def error(self, message: str) -> ProviderError:
        return ProviderError(self.redact(message), planner_task_id=self.task_id)


def _read_bounded(response: httpx.Response, call: _Call) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_RESPONSE_BYTES:
            raise call.error(
                f"the provider's answer is larger than {MAX_RESPONSE_BYTES:,} bytes; "
                "it was not read further"
            )
    return bytes(body)


def _provider_message(body: bytes) -> str:
    try:
        data = json.loads(body)
        message = data["error"]["message"] if isinstance(data.get("error"), dict) else data["error"]
        text = str(message)
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body.decode("utf-8", errors="replace")
    text = _CONTROL.sub(" ", text).strip()
    return text[:300] + ("..." if len(text) > 300 else "")


def _status_error(status: int, body: bytes, call: _Call) -> ProviderError:
    quoted = _provider_message(body)
    said = f'; the provider said: "{quoted}"' if quoted else ""
    advice = {
        401: "the provider refused the API key (401)",
        403: "the provider denied access for this key or model (403)",
        404: f"the provider answered 404: check that {BASE_URL_ENV} ends in /v1 "
        f"and that {MODEL_ENV} names a model it serves",
        429: "rate limited by the provider (429)",
    }.get(status, f"the provider answered HTTP {status}")
    return call.error(advice + said)


_FENCE = re.compile(r"\A\s*```[a-zA-Z]*\s*\n(.*)\n\s*```\s*\Z", re.DOTALL)


def plan_text_from_completion(body: bytes, call: _Call) -> tuple[str, dict[str, Any]]:
    """The plan text inside a chat completion, and the completion itself."""
    try:
        data = json.loads(body)
    except ValueError:
        raise call.error("the provider's answer is not JSON") from None
    if not isinstance(data, dict):
        raise call.error("the provider's answer is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise call.error("the provider's answer has no choices")
    if len(choices) != 1:
        raise call.error(f"the provider's answer has {len(choices)} choices; expected exactly one")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(choice, dict) and choice.get("finish_reason") == "length":
        raise call.error(
            "the model's answer was cut off at its token limit (finish_reason: length)"
        )
    if not isinstance(content, str):
        raise call.error("the provider's answer has no text content in choices[0].message.content")
    fenced = _FENCE.match(content)
    return (fenced.group(1) if fenced else content), data


def _usage(data: Mapping[str, Any]) -> TokenUsage | None:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return TokenUsage(count("prompt_tokens"), count("completion_tokens"))


@attrs.frozen
class OpenAICompatiblePlanner:
    """Asks an OpenAI-compatible chat completions endpoint for one plan."""

    name: str = "openai"
    description: str = (
        "OpenAI-compatible chat completions (CODING_AGENT_BASE_URL, _MODEL, _API_KEY)"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)

    def plan(self, request: PlanRequest) -> PlannerResult:
        import httpx

        call = _Call(settings_from_environment(self.environ))
        settings = call.settings
        body = {
            "model": settings.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": build_messages(request),
        }
        started = time.monotonic()
        try:
            with (
                httpx.Client(timeout=settings.timeout_seconds, follow_redirects=False) as client,
                client.stream(
                    "POST",
                    settings.completions_url,
                    json=body,
                    headers={"Authorization": f"Bearer {settings.api_key}"},
                ) as response,
            ):
                raw = _read_bounded(response, call)
                if response.status_code != 200:
                    raise _status_error(response.status_code, raw, call)
        except httpx.TimeoutException:
            raise call.error(
                f"the provider did not answer within {settings.timeout_seconds:g} s"
            ) from None
        except httpx.HTTPError as error:
            raise call.error(
                f"could not reach the provider at {settings.completions_url}: "
                f"{type(error).__name__}: {error}"
            ) from None
        duration = time.monotonic() - started
        text, data = plan_text_from_completion(raw, call)
        try:
            plan = contract.parse_plan(text)
        except PlanRejected as rejected:
            if any(r.rule == "plan-json" for r in rejected.rejections):
                raise call.error(
                    "the model's answer is not a JSON object: " + _provider_message(text.encode())
                ) from None
            raise PlanRejected(rejected.rejections, planner_task_id=call.task_id) from None
        contract.validate_plan(
            plan,
            editable_paths=request.editable_paths,
            limits=request.limits,
            planner_task_id=call.task_id,
        )
        model = data.get("model")
        response_id = data.get("id")
        return PlannerResult(
            planner=self.name,
            planner_task_id=call.task_id,
            plan=plan,
            model=model if isinstance(model, str) else settings.model,
            response_id=response_id if isinstance(response_id, str) else None,
            usage=_usage(data),
            duration_seconds=round(duration, 3),
        )


@hookimpl
def register_planners(register: Callable[[Planner], None]) -> None:
    register(OpenAICompatiblePlanner())

"""The built-in planner against a loopback provider that misbehaves the ordinary ways real ones do.

Most tests call the planner in-process (a real HTTP server on a real socket;
only the waiting between attempts is replaced by a function that notes the
wait, so the tests stay fast); the CLI-level ones run the real ``agent``.
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
import pytest
from conftest import API_KEY, FIXED_CALCULATOR, MODEL, AgentRun, FakeProvider, plan_json, wait_until

from sandboxed_coding_agent.core.errors import PlanRejected, ProviderError, UsageError
from sandboxed_coding_agent.core.model import PlannerOptions, PlannerResult, SeedLimits
from sandboxed_coding_agent.core.records import planner_calls
from sandboxed_coding_agent.core.runs.orchestrator import plan_request
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.openai_planner import (
    Backoff,
    OpenAICompatiblePlanner,
    answer_bound,
    extract_json_object,
)

BACKOFF = Backoff(base_seconds=0.01, max_seconds=2.0, jitter=0.5)
PLAN = plan_json(("calculator.py", FIXED_CALCULATOR))
#: The most bytes of an answer read for the calculator seed's plan limits.
BOUND = answer_bound(calculator_seed().limits)


class Planner:
    """The planner under test, pointed at a URL, noting every wait instead of sleeping."""

    def __init__(self, base_url: str, state: Path) -> None:
        self.waits: list[float] = []
        self.environ = {
            "CODING_AGENT_BASE_URL": base_url,
            "CODING_AGENT_MODEL": MODEL,
            "CODING_AGENT_API_KEY": API_KEY,
            "XDG_STATE_HOME": str(state),
        }
        self.backoff = BACKOFF
        self.draw: Callable[[], float] | None = None
        self.limits: SeedLimits | None = None  # the calculator's, unless a test sets others

    def plan(self, **options: Any) -> PlannerResult:
        seed = calculator_seed()
        if self.limits is not None:
            seed = attrs.evolve(seed, limits=self.limits)
        request = plan_request(
            seed, seed.default_prompt, seed.read_files(), PlannerOptions(**options)
        )
        extra = {} if self.draw is None else {"draw": self.draw}
        planner = OpenAICompatiblePlanner(
            environ=self.environ, backoff=self.backoff, sleep=self.waits.append, **extra
        )
        # As a run calls it: the agent keeps the call's record.
        return planner_calls.call_planner(planner, request, environ=self.environ)

    def fails(self, **options: Any) -> ProviderError:
        with pytest.raises(ProviderError) as caught:
            self.plan(**options)
        error = caught.value
        assert error.planner_task_id is not None
        assert error.planner_task_id.startswith("plan-")
        assert API_KEY not in error.message
        return error


@pytest.fixture
def planner(provider: FakeProvider, tmp_path: Path) -> Planner:
    return Planner(provider.base_url, tmp_path / "state")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, freeing server threads that play dead."""
    event = threading.Event()
    yield event
    event.set()


def always(provider: FakeProvider, status: int = 200, body: Any = b"", **kwargs: Any) -> None:
    """Make every further request get this reply."""
    provider.reply(status, body, **kwargs)
    provider.default = provider.replies.pop()


def rate_limited(**headers: str) -> dict[str, Any]:
    body = json.dumps({"error": {"message": "Rate limit reached for requests"}}).encode()
    return {"status": 429, "body": body, "headers": headers}


def reset_connection(handler: BaseHTTPRequestHandler) -> None:
    # SO_LINGER 0 makes close() send RST: the client sees "connection reset by peer".
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True


# --- 429: bounded retries, backoff with jitter, Retry-After up to a cap -------------------------


def test_rate_limit_without_retry_after_backs_off_with_jitter_then_says_rate_limited(
    provider: FakeProvider, planner: Planner
) -> None:
    always(provider, **rate_limited())

    error = planner.fails(max_retries=3)

    assert "rate limited" in error.message
    assert "Rate limit reached for requests" in error.message  # the provider's own words
    assert "4 attempts" in error.message
    assert len(provider.requests) == 4
    assert len(planner.waits) == 3
    for retry, wait in enumerate(planner.waits, start=1):
        ceiling = min(BACKOFF.max_seconds, BACKOFF.base_seconds * 2 ** (retry - 1))
        assert ceiling * (1 - BACKOFF.jitter) <= wait <= ceiling
    fractions = {round(wait / (0.01 * 2**n), 9) for n, wait in enumerate(planner.waits)}
    assert len(fractions) > 1, "every wait was shortened by the same amount: no jitter"


def test_backoff_doubles_and_jitter_only_shortens(provider: FakeProvider, planner: Planner) -> None:
    always(provider, **rate_limited())
    planner.draw = lambda: 0.0

    planner.fails(max_retries=3)
    unjittered = list(planner.waits)
    planner.waits.clear()
    planner.draw = lambda: 0.99
    planner.fails(max_retries=3)

    assert unjittered == pytest.approx([0.01, 0.02, 0.04])
    assert planner.waits == pytest.approx([w * (1 - 0.5 * 0.99) for w in unjittered])


def test_retry_after_seconds_is_honoured(provider: FakeProvider, planner: Planner) -> None:
    provider.reply(**rate_limited(**{"Retry-After": "1"}))
    provider.reply_content(PLAN)

    result = planner.plan(max_retries=3)

    assert planner.waits == [1.0]
    assert len(provider.requests) == 2
    assert result.plan.paths == ("calculator.py",)


def test_retry_after_http_date_is_honoured(provider: FakeProvider, planner: Planner) -> None:
    # Far enough ahead that no backoff comes near it, however slowly this machine answers;
    # the wait is noted, not slept.
    planner.backoff = Backoff(base_seconds=0.01, max_seconds=60.0, jitter=0.5)
    retry_after = formatdate(time.time() + 30, usegmt=True)
    due = parsedate_to_datetime(retry_after).timestamp()
    provider.reply(**rate_limited(**{"Retry-After": retry_after}))
    provider.reply_content(PLAN)

    before = time.time()
    planner.plan(max_retries=3)
    after = time.time()

    # The planner waits from when it reads the date until the date: no longer, no shorter.
    assert len(planner.waits) == 1
    assert due - after <= planner.waits[0] <= due - before


def test_retry_after_ms_is_honoured(provider: FakeProvider, planner: Planner) -> None:
    provider.reply(**rate_limited(**{"retry-after-ms": "250"}))
    provider.reply_content(PLAN)

    planner.plan()

    assert planner.waits == [0.25]


def test_retry_after_longer_than_the_cap_ends_the_call_at_once(
    provider: FakeProvider, planner: Planner
) -> None:
    provider.reply(**rate_limited(**{"Retry-After": "120"}))
    provider.reply_content(PLAN)

    error = planner.fails(max_retries=3)

    assert "rate limited" in error.message
    assert "wait 120 s" in error.message
    assert planner.waits == []
    assert len(provider.requests) == 1


def test_retry_after_within_the_cap_really_waits(provider: FakeProvider, tmp_path: Path) -> None:
    provider.reply(**rate_limited(**{"Retry-After": "0.2"}))
    provider.reply_content(PLAN)
    seed = calculator_seed()
    real = OpenAICompatiblePlanner(
        environ=Planner(provider.base_url, tmp_path).environ,
        backoff=Backoff(base_seconds=0.01, max_seconds=0.2),
    )

    started = time.monotonic()
    real.plan(plan_request(seed, seed.default_prompt, seed.read_files()))

    assert time.monotonic() - started >= 0.2
    assert len(provider.requests) == 2


# --- 5xx, reset, refused: bounded retries, then the status named -------------------------------


@pytest.mark.parametrize("status", [408, 500, 502, 503, 504])
def test_server_errors_are_retried_then_named(
    provider: FakeProvider, planner: Planner, status: int
) -> None:
    always(provider, status, {"error": {"message": "upstream is having a moment"}})

    error = planner.fails(max_retries=2)

    assert f"HTTP {status}" in error.message
    assert "gave up after 3 attempts" in error.message
    assert "upstream is having a moment" in error.message
    assert len(provider.requests) == 3
    assert len(planner.waits) == 2


def test_server_error_then_answer_recovers(provider: FakeProvider, planner: Planner) -> None:
    provider.reply(503, {"error": {"message": "overloaded"}})
    provider.reply(502, b"<html>bad gateway</html>")
    provider.reply_content(PLAN)

    result = planner.plan(max_retries=3)

    assert result.plan.paths == ("calculator.py",)
    assert len(provider.requests) == 3


def test_retries_reuse_one_kept_alive_connection(provider: FakeProvider, planner: Planner) -> None:
    provider.reply(503, {"error": {"message": "overloaded"}})
    provider.reply(**rate_limited(**{"Retry-After": "0"}))
    provider.reply(500, {"error": {"message": "oops"}})
    provider.reply_content(PLAN)

    planner.plan(max_retries=3)

    assert len(provider.requests) == 4
    assert len({request.client_port for request in provider.requests}) == 1


def test_connection_reset_is_retried_then_named(provider: FakeProvider, planner: Planner) -> None:
    always(provider, action=reset_connection)

    error = planner.fails(max_retries=2)

    assert "reset" in error.message
    assert "gave up after 3 attempts" in error.message
    assert len(provider.requests) == 3


def test_connection_reset_then_answer_recovers(provider: FakeProvider, planner: Planner) -> None:
    provider.reply(action=reset_connection)
    provider.reply_content(PLAN)

    result = planner.plan(max_retries=1)

    assert result.plan.paths == ("calculator.py",)
    assert len(provider.requests) == 2


def test_connection_refused_is_retried_then_named(unused_port: int, tmp_path: Path) -> None:
    planner = Planner(f"http://127.0.0.1:{unused_port}/v1", tmp_path)

    error = planner.fails(max_retries=2)

    assert "refused" in error.message
    assert f"127.0.0.1:{unused_port}" in error.message
    assert "gave up after 3 attempts" in error.message
    assert len(planner.waits) == 2


# --- 4xx: no retry, a clear message quoting the provider, never the key ------------------------


@pytest.mark.parametrize(
    ("status", "advice"),
    [
        (400, "rejected the request"),
        (401, "refused the API key"),
        (403, "denied this key access"),
        (404, "serves /chat/completions under, and that CODING_AGENT_MODEL names a model"),
    ],
)
def test_client_errors_are_not_retried_and_quote_the_provider_without_the_key(
    provider: FakeProvider, planner: Planner, status: int, advice: str
) -> None:
    always(provider, status, {"error": {"message": f"no way, Bearer {API_KEY} (code {status})"}})

    error = planner.fails(max_retries=3)

    assert advice in error.message
    assert f"no way, Bearer [redacted] (code {status})" in error.message
    assert API_KEY not in error.message
    assert len(provider.requests) == 1
    assert planner.waits == []


def test_provider_message_as_plain_text_is_quoted(provider: FakeProvider, planner: Planner) -> None:
    provider.reply(404, b"404 page not found\n")

    error = planner.fails()

    assert '"404 page not found"' in error.message


# --- hangs: connect and read timeouts ----------------------------------------------------------


def test_provider_that_never_answers_times_out_without_retry(
    provider: FakeProvider, planner: Planner, release: threading.Event
) -> None:
    always(provider, action=lambda handler: release.wait(30))

    error = planner.fails(timeout_seconds=0.3, max_retries=3)

    assert "did not answer within 0.3 s" in error.message
    assert len(provider.requests) == 1


def test_provider_that_never_accepts_times_out_connecting(tmp_path: Path) -> None:
    # A listener whose accept queue is full: the kernel drops further SYNs, so connect() hangs.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    try:
        planner = Planner(f"http://127.0.0.1:{port}/v1", tmp_path)
        error = planner.fails(timeout_seconds=0.3, max_retries=3)
    finally:
        for sock in [*fillers, listener]:
            sock.close()

    assert "could not connect to the provider within 0.3 s" in error.message
    assert planner.waits == []


def test_answer_trickling_in_is_cut_at_the_timeout(
    provider: FakeProvider, planner: Planner, release: threading.Event
) -> None:
    def trickle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        for _ in range(1000):
            if release.wait(0.05):
                return
            handler.wfile.write(b" ")

    provider.reply(action=trickle)

    error = planner.fails(timeout_seconds=0.4)

    assert "still arriving after 0.4 s" in error.message


def test_provider_timeout_option_reaches_the_planner(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], release: threading.Event
) -> None:
    always(provider, action=lambda handler: release.wait(60))

    run = run_agent("run", "--json", "--provider-timeout", "0.5", timeout=30)

    assert run.returncode == 3, run.stderr
    assert "did not answer within 0.5 s" in run.json()["error"]["message"]


# --- answers over the bound -----------------------------------------------------------------------


def test_announced_oversized_answer_is_not_read(
    provider: FakeProvider, planner: Planner, release: threading.Event
) -> None:
    def announce(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "10000000")
        handler.end_headers()
        handler.wfile.write(b"{" + b" " * 1000)
        release.wait(30)

    provider.reply(action=announce)

    error = planner.fails(timeout_seconds=10)

    assert f"larger than {BOUND:,} bytes" in error.message
    assert "10,000,000" in error.message


def test_endless_answer_is_cut_at_the_bound(provider: FakeProvider, planner: Planner) -> None:
    total = 200 * 1024 * 1024
    written: list[int] = []

    def flood(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Connection", "close")
        handler.end_headers()
        sent = 0
        chunk = b" " * 65536
        try:
            while sent < total:
                handler.wfile.write(chunk)
                sent += len(chunk)
        except OSError:
            pass
        written.append(sent)
        handler.close_connection = True

    provider.reply(action=flood)

    error = planner.fails(timeout_seconds=10)

    assert f"larger than {BOUND:,} bytes" in error.message
    assert wait_until(lambda: bool(written))
    assert written[0] < total, "the planner read the whole flood instead of stopping at the bound"


def test_a_seed_allowing_large_plans_gets_an_answer_as_large_as_its_limits(
    provider: FakeProvider, planner: Planner
) -> None:
    """A 150 KB module replaced whole: far past the least bound, within this seed's limits."""
    content = "def add(left, right):\n    return left + right\n" + (
        '# padding "quoted" \\ line\n' * 6000
    )
    assert len(content) > 150_000
    planner.limits = SeedLimits(max_total_bytes=200_000)
    provider.reply_plan(("calculator.py", content))

    result = planner.plan()

    assert result.plan.files[0].content == content


def test_the_bound_follows_the_limits_and_stays_on_the_wire(
    provider: FakeProvider, planner: Planner
) -> None:
    limits = SeedLimits(max_total_bytes=200_000)
    bound = answer_bound(limits)
    assert bound > 4 * 200_000  # the text, each byte written as up to four on the wire
    assert answer_bound(limits, "search-replace") > bound  # the text replaced, and its markup
    planner.limits = limits
    provider.reply(200, b"{" + b" " * bound)

    error = planner.fails()

    assert f"larger than {bound:,} bytes" in error.message


# --- malformed completions ----------------------------------------------------------------------


def completion_with(**changes: Any) -> dict[str, Any]:
    from conftest import completion

    body = completion(PLAN)
    choice = body["choices"][0]
    for key, value in changes.items():
        if key == "choices":
            body["choices"] = value
        elif key == "content":
            choice["message"]["content"] = value
        else:
            choice[key] = value
    return body


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<html>Welcome to nginx</html>", "is not JSON; it begins: <html>Welcome to nginx"),
        (b"[]", "is a list, not a JSON object"),
        ({"id": "x", "object": "chat.completion"}, "has no choices"),
        (completion_with(choices=[]), "has no choices"),
        (
            completion_with(choices=[completion_with()["choices"][0]] * 2),
            "has 2 choices; expected exactly one",
        ),
        (completion_with(content=None), "content in the provider's answer is null"),
        (completion_with(content=42), "content in the provider's answer is a number, not a string"),
        (
            completion_with(content=[{"type": "text", "text": PLAN}]),
            "is a list, not a string",
        ),
        (
            completion_with(finish_reason="length"),
            "cut off at its token limit (finish_reason: length)",
        ),
        ({"error": {"message": "model overloaded"}}, 'answered with an error: "model overloaded"'),
    ],
    ids=[
        "not-json",
        "not-object",
        "no-choices",
        "empty-choices",
        "two-choices",
        "content-null",
        "content-number",
        "content-list",
        "finish-length",
        "error-object",
    ],
)
def test_malformed_completion_is_a_provider_error_saying_which(
    provider: FakeProvider, planner: Planner, body: Any, says: str
) -> None:
    provider.reply(200, body)

    error = planner.fails()

    assert says in error.message
    assert len(provider.requests) == 1


def test_model_refusal_is_quoted(provider: FakeProvider, planner: Planner) -> None:
    body = completion_with(content=None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."
    provider.reply(200, body)

    assert 'the model refused: "I can\'t help with that."' in planner.fails().message


# --- plan JSON in a fence or in prose ------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        f"```json\n{PLAN}\n```",
        f"```\n{PLAN}\n```\n",
        f"Here is the fix:\n\n```json\n{PLAN}\n```\n\nThis makes add return the sum.",
        f"Sure! {PLAN} Hope this helps {{not json}}.",
    ],
    ids=["fence", "bare-fence", "fence-in-prose", "prose-around"],
)
def test_single_plan_object_is_extracted_from_fence_or_prose(
    provider: FakeProvider, planner: Planner, content: str
) -> None:
    provider.reply_content(content)

    result = planner.plan()

    assert result.plan.files[0].content == FIXED_CALCULATOR


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (f"Option A:\n```json\n{PLAN}\n```\nOption B:\n```json\n{PLAN}\n```", "2 JSON objects"),
        (f"{PLAN}\n{{}}", "2 JSON objects"),
        ("I could not find the bug, sorry.", "holds no JSON object"),
        ('```json\n{"files": [\n```', "holds no JSON object"),
    ],
    ids=["two-fences", "two-objects", "prose-only", "broken-json"],
)
def test_ambiguous_or_missing_plan_object_is_a_provider_error(
    provider: FakeProvider, planner: Planner, content: str, says: str
) -> None:
    provider.reply_content(content)

    assert says in planner.fails().message


@pytest.mark.parametrize(
    "text",
    ['{"a":' * 12_000, "{" * 60_000, '{"a": "' + "x" * 60_000, "[" * 60_000],
    ids=["deep-nesting", "bare-braces", "unterminated-string", "deep-list"],
)
def test_pathological_answer_is_refused_not_crashed_on(text: str) -> None:
    # Nesting deeper than the recursion limit must be "no object", not a RecursionError.
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json_object(text)


def test_plan_json_with_a_repeated_key_is_still_rejected_by_the_contract(
    provider: FakeProvider, planner: Planner
) -> None:
    content = '```json\n{"files": [], "files": [{"path": "calculator.py", "content": ""}]}\n```'
    provider.reply_content(content)

    with pytest.raises(PlanRejected) as caught:
        planner.plan()

    assert caught.value.rejections[0].rule == "plan-json"
    assert caught.value.planner_task_id is not None


def escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


@pytest.mark.parametrize(
    "content",
    [
        plan_json(("calculator.py", f"KEY = {API_KEY!r}\n")),
        plan_json(("calculator.py", API_KEY)).replace(API_KEY, escaped(API_KEY)),
        f"{PLAN}\nBy the way, your key is {API_KEY}",
    ],
    ids=["in-content", "json-escaped", "in-prose"],
)
def test_answer_echoing_the_key_is_never_used(
    provider: FakeProvider, planner: Planner, content: str
) -> None:
    provider.reply_content(content)

    error = planner.fails()

    assert "contains the API key" in error.message


def test_key_in_a_rejected_path_is_blanked(provider: FakeProvider, planner: Planner) -> None:
    provider.reply_content(plan_json((f"{API_KEY}.py", "")).replace(API_KEY, escaped(API_KEY)))

    with pytest.raises(PlanRejected) as caught:
        planner.plan()

    assert API_KEY not in caught.value.message
    assert "[redacted].py" in caught.value.message
    assert all(API_KEY not in (r.path or "") for r in caught.value.rejections)


#: A key holding characters a JSON string escapes (" and \\) and URL quoting changes (+ / = %),
#: so that its three forms differ.
ODD_KEY = 'sk-odd"key\\with+slash/eq=pct%4f9c2e7a'


@pytest.mark.parametrize(
    "form",
    [ODD_KEY, json.dumps(ODD_KEY)[1:-1], quote(ODD_KEY, safe="")],
    ids=["verbatim", "json-escaped", "url-quoted"],
)
def test_the_key_is_blanked_in_each_form_a_provider_may_echo_it_in(
    provider: FakeProvider, tmp_path: Path, form: str
) -> None:
    # A provider quoting the request body it got echoes the key JSON-escaped; one quoting a
    # URL it built, URL-quoted.
    planner = Planner(provider.base_url, tmp_path / "state")
    planner.environ["CODING_AGENT_API_KEY"] = ODD_KEY
    always(provider, 400, f"invalid request, you sent: {form} (see the docs)".encode())

    error = planner.fails(max_retries=0)

    assert provider.requests[0].headers["Authorization"] == f"Bearer {ODD_KEY}"
    assert "you sent: [redacted] (see the docs)" in error.message
    (record,) = (tmp_path / "state" / "sandboxed-coding-agent" / "runs").iterdir()
    for shown in (error.message, record.read_text()):
        assert form not in shown
        assert json.dumps(form)[1:-1] not in shown  # nor as the record's JSON writes it


# --- response_format ----------------------------------------------------------------------------


def test_json_object_is_asked_for_by_default(provider: FakeProvider, planner: Planner) -> None:
    provider.reply_content(PLAN)

    planner.plan()

    assert provider.requests[0].json()["response_format"] == {"type": "json_object"}


def test_unsupported_response_format_is_dropped_once(
    provider: FakeProvider, planner: Planner
) -> None:
    provider.reply(400, {"error": {"message": "response_format json_object is not supported"}})
    provider.reply_content(PLAN)

    result = planner.plan()

    assert result.plan.paths == ("calculator.py",)
    first, second = (request.json() for request in provider.requests)
    assert first["response_format"] == {"type": "json_object"}
    assert "response_format" not in second
    assert second["messages"] == first["messages"]
    assert planner.waits == []


def test_response_format_is_dropped_only_once(provider: FakeProvider, planner: Planner) -> None:
    always(provider, 400, {"error": {"message": "Unknown field: response_format"}})

    error = planner.fails(max_retries=3)

    assert "HTTP 400" in error.message
    assert len(provider.requests) == 2


def test_other_bad_request_keeps_response_format_and_is_not_retried(
    provider: FakeProvider, planner: Planner
) -> None:
    provider.reply(400, {"error": {"message": "messages: too long"}})

    planner.fails()

    assert len(provider.requests) == 1


def test_structured_output_sends_the_plans_json_schema(
    provider: FakeProvider, planner: Planner
) -> None:
    provider.reply_content(PLAN)

    planner.plan(structured_output=True)

    response_format = provider.requests[0].json()["response_format"]
    assert response_format["type"] == "json_schema"
    spec = response_format["json_schema"]
    assert spec["name"] == "patch_plan"
    assert spec["strict"] is True
    schema = spec["schema"]
    assert schema["required"] == ["files"]
    assert schema["additionalProperties"] is False
    files = schema["properties"]["files"]
    assert (files["minItems"], files["maxItems"]) == (1, 3)
    entry = files["items"]
    assert entry["additionalProperties"] is False
    assert entry["required"] == ["path", "content"]
    assert entry["properties"]["path"] == {"type": "string", "enum": ["calculator.py"]}
    assert entry["properties"]["content"] == {"type": "string"}


def test_structured_output_refused_says_so_without_falling_back(
    provider: FakeProvider, planner: Planner
) -> None:
    provider.reply(400, {"error": {"message": "response_format json_schema is unsupported"}})

    error = planner.fails(structured_output=True)

    assert "run without --structured-output" in error.message
    assert len(provider.requests) == 1


def test_structured_output_flag_reaches_the_provider(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    run = run_agent("run", "--json", "--structured-output")

    assert run.returncode == 0, run.stderr
    assert provider.requests[0].json()["response_format"]["type"] == "json_schema"


# --- where the request and the key go: redirects, proxies, the prompt ----------------------------


@pytest.fixture
def elsewhere() -> Iterator[FakeProvider]:
    """A second loopback server: a redirect's target, or a proxy."""
    server = FakeProvider()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def test_redirect_is_not_followed_so_the_key_goes_nowhere_else(
    provider: FakeProvider, planner: Planner, elsewhere: FakeProvider
) -> None:
    target = elsewhere.base_url + "/chat/completions"
    provider.reply(307, b"", headers={"Location": target})

    error = planner.fails(max_retries=3)

    assert f"HTTP 307 Temporary Redirect, redirecting to {target}" in error.message
    assert "set CODING_AGENT_BASE_URL to the URL it really serves" in error.message
    assert elsewhere.requests == []
    assert len(provider.requests) == 1


def test_provider_on_this_machine_is_never_reached_through_a_proxy(
    provider: FakeProvider, elsewhere: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    # Through a proxy, the plain http request, key included, would leave the machine.
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    proxy = elsewhere.base_url.removesuffix("/v1")
    variables = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    env = {name: proxy for variable in variables for name in (variable, variable.lower())}
    env.update(NO_PROXY="", no_proxy="")

    run = run_agent("run", "--json", env=env)

    assert run.returncode == 0, run.stderr
    assert elsewhere.requests == []
    assert [r.headers["Authorization"] for r in provider.requests] == [f"Bearer {API_KEY}"]


def on_the_network(provider: FakeProvider) -> str:
    """The provider's base URL by a name the plain-http rule does not count as this machine
    (``127.1``, which resolves to 127.0.0.1, where the server listens): a model server on
    the local network, as the rule sees it."""
    return provider.base_url.replace("127.0.0.1", "127.1", 1)


def test_plain_http_to_the_network_is_refused_before_any_connection(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    base_url = on_the_network(provider)
    port = base_url.split(":")[2].split("/")[0]

    run = run_agent("run", "--json", env={"CODING_AGENT_BASE_URL": base_url})

    assert run.returncode == 2, run.stderr
    message = run.json()["error"]["message"]
    assert "uses plain http for '127.1', which would send CODING_AGENT_API_KEY unencrypted" in (
        message
    )
    assert f"ssh -L {port}:localhost:{port} HOST, then http://127.0.0.1:{port}/v1" in message
    assert "set CODING_AGENT_ALLOW_HTTP=1 to send it over plain http all the same" in message
    assert provider.requests == []  # the key went nowhere


def test_plain_http_to_the_network_is_used_when_allowed_and_never_through_a_proxy(
    provider: FakeProvider, elsewhere: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    proxy = elsewhere.base_url.removesuffix("/v1")
    env = {name: proxy for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")}
    env.update(
        NO_PROXY="",
        no_proxy="",
        CODING_AGENT_BASE_URL=on_the_network(provider),
        CODING_AGENT_ALLOW_HTTP="1",
    )

    run = run_agent("run", "--json", env=env)

    assert run.returncode == 0, run.stderr
    assert elsewhere.requests == []
    assert [r.headers["Authorization"] for r in provider.requests] == [f"Bearer {API_KEY}"]


@pytest.mark.parametrize("value", ["yes", "true", "2"])
def test_the_plain_http_opt_in_takes_only_1_or_0(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], value: str
) -> None:
    env = {"CODING_AGENT_BASE_URL": on_the_network(provider), "CODING_AGENT_ALLOW_HTTP": value}

    run = run_agent("run", "--json", env=env)

    assert run.returncode == 2, run.stderr
    message = run.json()["error"]["message"]
    assert message.startswith("CODING_AGENT_ALLOW_HTTP must be 1 (plain http to a host other")
    assert provider.requests == []


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"ALL_PROXY": "socks5://127.0.0.1:9"}, "socksio"),
        ({"HTTPS_PROXY": "ftp://proxy.invalid"}, "Unknown scheme for proxy URL"),
        ({"HTTPS_PROXY": "http://[::1"}, "Invalid port"),
        ({"SSL_CERT_FILE": "/nonexistent/ca.pem"}, "No such file or directory"),
    ],
    ids=["socks", "proxy-scheme", "proxy-url", "ca-file"],
)
def test_unusable_proxy_or_certificate_settings_are_a_configuration_error(
    run_agent: Callable[..., AgentRun], env: dict[str, str], said: str
) -> None:
    env = {**env, "CODING_AGENT_BASE_URL": "https://provider.invalid/v1"}

    run = run_agent("run", "--json", "--provider-retries", "0", env=env)

    assert run.returncode == 2, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "configuration"
    assert "proxy or certificate settings in the environment" in error["message"]
    assert said in error["message"]
    assert "Traceback" not in run.stderr


def test_seed_file_holding_the_key_is_never_sent(provider: FakeProvider, planner: Planner) -> None:
    seed = calculator_seed()
    files = {**seed.read_files(), "notes.txt": f"token = {API_KEY}\n".encode()}
    request = plan_request(seed, seed.default_prompt, files)

    with pytest.raises(UsageError) as caught:
        OpenAICompatiblePlanner(environ=planner.environ).plan(request)

    assert "seed file 'notes.txt' holds the value of CODING_AGENT_API_KEY" in caught.value.message
    assert API_KEY not in caught.value.message
    assert provider.requests == []


# --- imports ---------------------------------------------------------------------------------


def test_planner_imports_httpx_only_when_it_plans() -> None:
    probe = (
        "import sys; import sandboxed_coding_agent.plugins.openai_planner; "
        "print('httpx' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"

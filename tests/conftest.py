"""Shared fixtures: a real OpenAI-compatible HTTP server on loopback and the real ``agent`` CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import attrs
import pytest

API_KEY = "sk-test-4f9c2e7a1b5d8e3f6a0c9b2d"
MODEL = "test-model"
AGENT = Path(sys.executable).with_name("agent")

FIXED_CALCULATOR = (
    '"""A tiny calculator used as the built-in seed project."""\n\n\n'
    "def add(left, right):\n"
    '    """Return the sum of left and right."""\n'
    "    return left + right\n"
)


@attrs.define
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: The client's TCP port: requests sharing it came over one (kept-alive) connection.
    client_port: int = 0

    def json(self) -> Any:
        return json.loads(self.body)


@attrs.define
class Reply:
    """One scripted answer: status, headers, body; or a custom ``action`` on the handler."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = attrs.Factory(dict)
    action: Callable[[BaseHTTPRequestHandler], None] | None = None


def completion(content: str | None, **overrides: Any) -> dict[str, Any]:
    """A chat completion as OpenAI returns it, with ``content`` as the message text."""
    body: dict[str, Any] = {
        "id": "chatcmpl-test-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366},
    }
    body.update(overrides)
    return body


def plan_json(*files: tuple[str, str]) -> str:
    return json.dumps({"files": [{"path": p, "content": c} for p, c in files]})


class FakeProvider:
    """A real HTTP server on 127.0.0.1 speaking the chat completions protocol.

    Tests queue replies; when the queue is empty the default reply is used.
    Every request is recorded, headers and body included.
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.replies: list[Reply] = []
        self.default: Reply = Reply(404, b'{"error": {"message": "no reply scripted"}}')
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with Nagle on, a kept-alive
            # connection waits out the client's delayed ACK (~40 ms) on every reply.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                reply = provider._record(
                    RecordedRequest(
                        "POST",
                        self.path,
                        dict(self.headers.items()),
                        body,
                        client_port=self.client_address[1],
                    )
                )
                if reply.action is not None:
                    reply.action(self)
                    return
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _record(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self.replies.pop(0) if self.replies else self.default

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reply(self, status: int = 200, body: Any = b"", **kwargs: Any) -> None:
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        self.replies.append(Reply(status, body, **kwargs))

    def reply_content(self, content: str | None, **overrides: Any) -> None:
        self.reply(200, completion(content, **overrides))

    def reply_plan(self, *files: tuple[str, str]) -> None:
        self.reply_content(plan_json(*files))


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    server = FakeProvider()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


@attrs.frozen
class AgentRun:
    returncode: int
    stdout: str
    stderr: str
    tmpdir: Path

    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture
def agent_env(provider: FakeProvider, tmp_path: Path) -> dict[str, str]:
    """The caller's environment for the CLI: provider variables set, TMPDIR private to the test."""
    workdir = tmp_path / "agent-tmp"
    workdir.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CODING_AGENT_", "SANDBOXED_CODING_AGENT_"))
    }
    env.update(
        CODING_AGENT_BASE_URL=provider.base_url,
        CODING_AGENT_MODEL=MODEL,
        CODING_AGENT_API_KEY=API_KEY,
        TMPDIR=str(workdir),
        # Run records go to the test's own state directory, never the real ~/.local/state.
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    return env


@pytest.fixture
def run_agent(agent_env: dict[str, str]) -> Callable[..., AgentRun]:
    """Run the installed ``agent`` console script as a user would."""

    def run(*args: str, env: Mapping[str, str] | None = None, timeout: float = 120) -> AgentRun:
        merged = dict(agent_env)
        if env is not None:
            merged.update(env)
        done = subprocess.run(
            [str(AGENT), *args],
            env=merged,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return AgentRun(done.returncode, done.stdout, done.stderr, Path(merged["TMPDIR"]))

    return run


@pytest.fixture
def write_plan(tmp_path: Path) -> Callable[..., Path]:
    """Write a plan file (a dict, or raw text) and return its path."""
    counter = iter(range(1_000_000))

    def write(plan: Any) -> Path:
        path = tmp_path / f"plan-{next(counter)}.json"
        path.write_text(plan if isinstance(plan, str) else json.dumps(plan), encoding="utf-8")
        return path

    return write


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

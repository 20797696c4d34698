"""``agent serve`` and the reward functions against hostile peers: a client that sends
what no honest one would, and a server that answers what no honest one would.

The verdict server runs in this process on 127.0.0.1 with a judge that records what it
was asked and tests nothing, so each test is about the HTTP side alone."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sandboxed_coding_agent.server import ServerSettings, VerdictServer
from sandboxed_coding_agent.verification import Verdict, verify

TOKEN = "t0ken-for-the-attacks"


class Judged:
    """A judge that passes every plan and keeps the arguments it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **arguments: Any) -> Verdict:
        self.calls.append(arguments)
        return Verdict(seed=str(arguments["seed"]), passed=True, reward=1.0)


@pytest.fixture
def judged() -> Judged:
    return Judged()


@pytest.fixture
def serving(judged: Judged) -> Iterator[Callable[..., VerdictServer]]:
    """Starts a server (settings as keywords, the judge ``judged`` unless given)."""
    servers: list[VerdictServer] = []

    def start(judge: Callable[..., Verdict] | None = None, **given: Any) -> VerdictServer:
        settings: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": 0,
            "token": TOKEN,
            "jobs": 1,
            "queue": 1,
            "seeds": {"calculator": "calculator"},
            **given,
        }
        server = VerdictServer(ServerSettings(**settings), judged if judge is None else judge)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def exchange(server: VerdictServer, data: bytes) -> tuple[int, dict[str, Any]]:
    """Sends ``data`` as it is and reads the whole answer: its status and JSON body."""
    with socket.create_connection(server.server_address[:2], timeout=60) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer, "the server closed the connection without an answer"
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def post(
    server: VerdictServer,
    body: bytes,
    path: str = "/v1/verify",
    length: bytes | None = None,
    headers: bytes = b"",
) -> tuple[int, dict[str, Any]]:
    size = str(len(body)).encode() if length is None else length
    return exchange(
        server,
        f"POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {TOKEN}\r\n".encode()
        + headers
        + b"Content-Length: "
        + size
        + b"\r\n\r\n"
        + body,
    )


GOOD = json.dumps({"seed": "calculator", "plan": {"files": []}}).encode()


@pytest.mark.parametrize(
    ("length", "status"),
    [
        ("²".encode("latin-1"), 411),  # a digit to str.isdigit, not to int()
        (b"\xd9\xa2", 411),  # an Arabic-Indic two, read as latin-1 text
        (b"-1", 411),
        (b"9" * 5000, 413),  # more digits than int() reads
        (b"0" * 5000 + str(len(GOOD)).encode(), 200),  # leading zeros are still a length
    ],
)
def test_a_content_length_that_is_no_number_gets_its_answer(
    serving: Callable[..., VerdictServer], length: bytes, status: int
) -> None:
    server = serving()
    found, answer = post(server, GOOD, length=length)
    assert found == status, answer
    assert post(server, GOOD)[0] == 200  # and the server serves on


def test_a_plan_nested_deeper_than_python_recurses_is_answered(
    serving: Callable[..., VerdictServer],
) -> None:
    # Deep enough that the server reads it, yet verify() cannot write it back as JSON.
    server = serving(judge=verify, options={"record": False})
    for depth in range(940, 1000, 4):
        plan = b'{"a":' * depth + b"1" + b"}" * depth
        status, answer = post(server, b'{"seed": "calculator", "plan": ' + plan + b"}")
        assert status in (200, 400), answer
        if status == 200:
            assert answer["reward"] == 0.0
            assert answer["error"]["kind"] == "policy"

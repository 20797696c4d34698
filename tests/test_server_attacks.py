"""``agent serve`` and the reward functions against hostile peers: a client that sends
what no honest one would, and a server that answers what no honest one would.

The verdict server runs in this process on 127.0.0.1 with a judge that records what it
was asked and tests nothing, so each test is about the HTTP side alone."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until

from sandboxed_coding_agent import rewards
from sandboxed_coding_agent.rewards import compute_score
from sandboxed_coding_agent.server import (
    ServeError,
    ServerSettings,
    VerdictServer,
    check_settings,
    offered_seeds,
)
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


def test_a_judge_that_fails_unexpectedly_is_answered_500_not_a_dropped_connection(
    serving: Callable[..., VerdictServer], capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(**arguments: Any) -> Verdict:
        raise OSError("the records' disk is full")

    server = serving(judge=failing)
    status, answer = post(server, GOOD)
    batch = json.dumps({"items": [json.loads(GOOD)]}).encode()

    assert status == 500
    assert answer["error"]["kind"] == "internal"
    assert post(server, batch, path="/v1/verify/batch")[0] == 500
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("token", ["", " ", " padded "])
def test_a_token_that_any_header_or_none_could_match_is_refused(token: str) -> None:
    settings = ServerSettings(
        host="0.0.0.0", port=0, token=token, jobs=1, queue=1, seeds={"calculator": "calculator"}
    )
    with pytest.raises(ServeError, match="token"):
        check_settings(settings)


@pytest.mark.parametrize(
    "extra",
    [
        {"runner": "other"},
        {"limits": {"test_timeout_seconds": 100000}},
        {"no_policies": ["scope"]},
        {"policy_params": {}},
        {"record": False},
        {"environ": {}},
    ],
)
def test_a_request_cannot_set_what_is_the_servers(
    serving: Callable[..., VerdictServer], judged: Judged, extra: dict[str, Any]
) -> None:
    server = serving(options={"runner": "local", "no_policies": ("x",)})
    request = {"seed": "calculator", "plan": {"files": []}, **extra}

    status, answer = post(server, json.dumps(request).encode())
    allowed = {"seed": "calculator", "plan": {"files": []}, "policies": ["more"]}
    status_ok, _ = post(server, json.dumps(allowed).encode())

    assert status == 400
    assert "unknown key" in answer["error"]["message"]
    assert status_ok == 200
    assert judged.calls[-1]["runner"] == "local"
    assert judged.calls[-1]["no_policies"] == ("x",)
    assert judged.calls[-1]["policies"] == ["more"]


class Held(Judged):
    """A judge that holds every plan until released, counting those it holds at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.running = self.most = 0
        self._lock = threading.Lock()

    def __call__(self, **arguments: Any) -> Verdict:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self.release.wait(120)
        with self._lock:
            self.running -= 1
        return super().__call__(**arguments)


def test_no_more_than_jobs_run_and_jobs_plus_queue_are_admitted(
    serving: Callable[..., VerdictServer],
) -> None:
    held = Held()
    server = serving(judge=held, jobs=2, queue=3)
    one = GOOD
    two = json.dumps({"items": [json.loads(GOOD)] * 2}).encode()
    answers: list[int] = []

    def send(body: bytes, path: str) -> None:
        answers.append(post(server, body, path=path)[0])

    # 1 + 2 + 2: every place taken, two of them running.
    senders = [
        threading.Thread(target=send, args=(one, "/v1/verify")),
        threading.Thread(target=send, args=(two, "/v1/verify/batch")),
        threading.Thread(target=send, args=(two, "/v1/verify/batch")),
    ]
    for sender in senders:
        sender.start()
    assert wait_until(lambda: server.admission.admitted == 5, timeout=60)
    assert wait_until(lambda: held.running == 2, timeout=60)

    refused = [post(server, one), post(server, two, path="/v1/verify/batch")]

    held.release.set()
    for sender in senders:
        sender.join(60)
    assert [status for status, _ in refused] == [429, 429]
    assert sorted(answers) == [200, 200, 200]
    assert held.most == 2
    assert len(held.calls) == 5


def test_a_seeds_folder_offers_its_own_seed_folders_only(tmp_path: Path) -> None:
    seeds, elsewhere = tmp_path / "seeds", tmp_path / "elsewhere"
    for folder in (seeds / "tiny", elsewhere, seeds / "not-a-seed"):
        folder.mkdir(parents=True)
    for folder in (seeds / "tiny", elsewhere):
        (folder / "seed.toml").write_text('name = "x"\n')
    os.symlink("/", seeds / "root")  # the whole machine
    os.symlink(elsewhere, seeds / "linked")  # a seed, but not in the folder
    os.mkdir(os.fsencode(seeds) + b"/bad-\xff")  # not UTF-8: no JSON answer carries it
    (seeds / "new\nline").mkdir()
    for odd in (os.fsencode(seeds) + b"/bad-\xff", os.fsencode(seeds / "new\nline")):
        with open(odd + b"/seed.toml", "w") as manifest:
            manifest.write('name = "x"\n')

    offered = offered_seeds(["calculator", "tiny"], str(seeds))

    assert offered == {"calculator": "calculator", "tiny": str(seeds / "tiny")}


@pytest.mark.parametrize(
    "request_head",
    [
        b"POST /v1/verify HTTP/1.1\r\n",  # no token
        b"POST /v1/verify HTTP/1.1\r\nAuthorization: Bearer wrong\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n",  # the right one second
        b"POST /v1/verify HTTP/1.1\r\nAuthorization: Bearer\r\n " + TOKEN.encode() + b"\r\n",
        b"POST /v1/verify HTTP/1.1\r\nAuthorization: Bearer\t" + TOKEN.encode() + b"\r\n",
        b"POST /v1/verify HTTP/1.1\r\nAuthorization: Basic " + TOKEN.encode() + b"\r\n",
        b"POST /v1/verify HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.upper().encode() + b"\r\n",
        b"POST /v1/verify HTTP/1.1\r\nAuthorization : Bearer " + TOKEN.encode() + b"\r\n",
        b"POST /v1/verify HTTP/1.1\r\nX-Authorization: Bearer " + TOKEN.encode() + b"\r\n",
        b"POST //v1/verify HTTP/1.1\r\n",
        b"POST /v1/verify/ HTTP/1.1\r\n",
        b"POST /v1/verify?token=" + TOKEN.encode() + b" HTTP/1.1\r\n",
        b"POST /v1/./verify HTTP/1.1\r\n",
        b"POST /v1/health/../verify HTTP/1.1\r\n",
        b"POST http://127.0.0.1/v1/verify HTTP/1.1\r\n",
        b"POST /v1/verify/batch HTTP/1.1\r\n",
        b"POST /v1/verify\r\n",  # HTTP/0.9
        b"POST /v1/verify HTTP/7.0\r\n",  # answered as to HTTP/0.9: no status line
        b"GET /v1/verify HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n",
    ],
)
def test_no_request_without_the_token_reaches_the_judge(
    serving: Callable[..., VerdictServer], judged: Judged, request_head: bytes
) -> None:
    server = serving()
    data = request_head + b"Content-Length: " + str(len(GOOD)).encode() + b"\r\n\r\n" + GOOD
    with socket.create_connection(server.server_address[:2], timeout=60) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk

    head, _, body = answer.rpartition(b"\r\n\r\n")  # HTTP/0.9: a body alone
    assert json.loads(body)["error"]["kind"] in ("usage", "unauthorized", "not-found"), answer
    assert not head or head.split()[1] in (b"400", b"401", b"404", b"501", b"505"), answer
    assert judged.calls == []
    assert TOKEN.upper().encode() not in answer


@pytest.mark.parametrize(
    "trickle",
    [
        [b"POST /v1/verify HTTP/1.1\r\nX: ", b"y"],  # a header that never ends
        [
            f"POST /v1/verify HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Length: 1000000\r\n\r\n".encode(),
            b" ",
        ],  # a body that ends after the deadline
    ],
)
def test_a_client_that_trickles_is_cut_off_at_the_read_deadline(
    serving: Callable[..., VerdictServer], judged: Judged, trickle: list[bytes]
) -> None:
    server = serving(read_seconds=1.0)
    connection = socket.create_connection(server.server_address[:2], timeout=60)
    connection.sendall(trickle[0])
    cut = False
    for _ in range(6000):  # a byte every 10 ms: a minute at most, the deadline is 1 s
        try:
            connection.sendall(trickle[1])
        except OSError:
            cut = True
            break
        time.sleep(0.01)
    connection.close()

    assert cut, "the server still reads a request that began a minute ago"
    assert judged.calls == []
    assert post(server, GOOD)[0] == 200  # and others are served


# The reward functions' client side, against a server that answers what it likes.

COMPLETION = "```diff\n--- a/calculator.py\n+++ b/calculator.py\n@@ -1 +1 @@\n-a\n+b\n```"


class Hostile:
    """A listener on 127.0.0.1 that reads each request's head and answers with ``answer``
    (given the connection); ``heard`` keeps every request head it read."""

    def __init__(self, answer: Callable[[socket.socket], None]) -> None:
        self.answer = answer
        self.heard: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(60)
                head = b""
                with contextlib.suppress(OSError):
                    while b"\r\n\r\n" not in head and (chunk := connection.recv(65536)):
                        head += chunk
                    self.heard.append(head)
                    self.answer(connection)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def hostile() -> Iterator[Callable[[Callable[[socket.socket], None]], Hostile]]:
    started: list[Hostile] = []

    def start(answer: Callable[[socket.socket], None]) -> Hostile:
        started.append(Hostile(answer))
        return started[-1]

    yield start
    for server in started:
        server.close()


def answering(data: bytes) -> Callable[[socket.socket], None]:
    return lambda connection: connection.sendall(data)


def ok(body: bytes, head: bytes = b"HTTP/1.1 200 OK") -> bytes:
    return head + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def score_within(url: str, seconds: float = 120.0) -> object:
    """compute_score's answer from ``url``, or the exception it raised; a call still
    running after ``seconds`` (far past any deadline a test sets) fails the test."""
    found: list[object] = []

    def call() -> None:
        try:
            found.append(compute_score("calculator", COMPLETION, url=url, token=TOKEN))
        except Exception as error:
            found.append(error)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(seconds)
    assert found, f"the reward function still waits on {url} after {seconds} s"
    return found[0]


@pytest.mark.parametrize(
    "answer",
    [
        ok(b'{"verdicts": [{"reward": NaN}]}'),
        ok(b'{"verdicts": [{"reward": 7}]}'),
        ok(b'{"verdicts": [{"reward": -1.0}]}'),
        ok(b'{"verdicts": [{"reward": Infinity}]}'),
        ok(b'{"verdicts": [{"reward": "1.0"}]}'),
        ok(b'{"verdicts": [{"reward": true}]}'),
        ok(b'{"verdicts": [{"reward": 1.0}, {"reward": 1.0}]}'),  # one more than asked
        ok(b'{"verdicts": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
        ok(b"not json"),
        b"HELLO\r\n\r\n",  # no HTTP status line
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 200 + b"\r\n",  # more headers than read
        b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000 + b"\r\n\r\n",  # a header line too long
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",  # cut short
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # bad chunk
        b"HTTP/1.1 429 Busy\r\nRetry-After: nan\r\nContent-Length: 0\r\n\r\n",
    ],
)
def test_a_hostile_servers_answer_is_no_reward_never_a_crash(
    hostile: Callable[..., Hostile], monkeypatch: pytest.MonkeyPatch, answer: bytes
) -> None:
    monkeypatch.setattr(rewards, "REMOTE_TRIES", 2)
    assert score_within(hostile(answering(answer)).url) is None


def drip(head: bytes, then: bytes) -> Callable[[socket.socket], None]:
    def answer(connection: socket.socket) -> None:
        connection.sendall(head)
        while True:  # until the client goes away
            connection.sendall(then)
            time.sleep(0.05)

    return answer


@pytest.mark.parametrize(
    "answer",
    [
        drip(b"HTTP/1.1 200 OK\r\n", b"X: y\r\n"[:1]),  # headers a byte at a time
        drip(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n", b" "),  # the body
        drip(b"HTTP/1.1 200 OK\r\n\r\n", b" "),  # a body with no end
    ],
)
def test_a_server_that_drips_its_answer_is_given_up_at_the_deadline(
    hostile: Callable[..., Hostile], monkeypatch: pytest.MonkeyPatch, answer: Any
) -> None:
    monkeypatch.setattr(rewards, "REMOTE_SECONDS", 1.0)
    assert score_within(hostile(answer).url) is None


def test_an_answer_longer_than_the_bound_is_no_reward(
    hostile: Callable[..., Hostile], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rewards, "REMOTE_MAX_BYTES", 1000)
    verdicts = json.dumps({"verdicts": [{"reward": 1.0, "test_output": "x" * 5000}]})
    assert score_within(hostile(answering(ok(verdicts.encode()))).url) is None
    monkeypatch.setattr(rewards, "REMOTE_MAX_BYTES", 10_000)
    assert score_within(hostile(answering(ok(verdicts.encode()))).url) == 1.0


def test_a_server_that_says_busy_for_ever_is_no_reward_at_the_deadline(
    hostile: Callable[..., Hostile], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rewards, "REMOTE_SECONDS", 1.0)
    busy = b"HTTP/1.1 429 Busy\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n"
    assert score_within(hostile(answering(busy)).url) is None


def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else(
    hostile: Callable[..., Hostile],
) -> None:
    elsewhere = hostile(answering(ok(b'{"verdicts": [{"reward": 1.0}]}')))
    moved = b"HTTP/1.1 307 Moved\r\nLocation: " + elsewhere.url.encode() + b"/v1/verify/batch"
    server = hostile(answering(moved + b"\r\nContent-Length: 0\r\n\r\n"))
    found = score_within(server.url)
    assert isinstance(found, rewards.VerifyError)
    assert "307" in str(found)
    assert elsewhere.heard == []
    assert f"Bearer {TOKEN}".encode() in server.heard[0]


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GET /v1/health HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", 431),
        (b"GET /v1/health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", 431),
        (b"GET /" + b"v" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"PUT /v1/verify HTTP/1.1\r\n\r\n", 501),
    ],
)
def test_what_http_server_itself_refuses_is_answered_in_json(
    serving: Callable[..., VerdictServer], data: bytes, status: int
) -> None:
    found, answer = exchange(serving(), data)

    assert found == status
    assert answer["error"]["message"]


def test_a_connection_carries_one_request_however_many_are_sent_on_it(
    serving: Callable[..., VerdictServer], judged: Judged
) -> None:
    server = serving(jobs=1, queue=0)
    one = (
        f"POST /v1/verify HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Connection: keep-alive\r\nContent-Length: {len(GOOD)}\r\n\r\n"
    ).encode() + GOOD

    status, answer = exchange(server, one * 5)  # pipelined: past jobs + queue if all ran

    assert status == 200, answer
    assert len(judged.calls) == 1


def test_one_address_holding_connections_open_does_not_lock_others_out(
    serving: Callable[..., VerdictServer], judged: Judged
) -> None:
    server = serving(jobs=1, queue=1)  # 2 * 2 + 4 = 8 connections, 4 from one address
    held = []
    for _ in range(server.max_connections):  # connects, and never sends a byte
        connection = socket.socket()
        connection.bind(("127.0.0.2", 0))  # another loopback address
        connection.connect(server.server_address[:2])
        held.append(connection)
    # Accepted in the order they came: all of those before this one.
    status, answer = post(server, GOOD)

    assert status == 200, answer
    for connection in held:
        connection.close()


def test_a_client_that_never_reads_its_answer_holds_no_place_and_its_connection_ends(
    serving: Callable[..., VerdictServer],
) -> None:
    judged = threading.Event()

    def wordy(**arguments: Any) -> Verdict:  # an answer far larger than socket buffers
        judged.set()
        return Verdict(seed="calculator", passed=True, reward=1.0, test_output="x" * 50_000_000)

    server = serving(judge=wordy, read_seconds=1.0)
    connection = socket.create_connection(server.server_address[:2])
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    connection.sendall(
        f"POST /v1/verify HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Length: {len(GOOD)}\r\n\r\n".encode()
        + GOOD
    )

    assert judged.wait(60)
    assert wait_until(lambda: server._by_address == {}, timeout=60)
    assert server.admission.admitted == 0
    connection.close()

"""``agent serve``: verdicts over HTTP, each test against a real server on 127.0.0.1 that
the test starts on a free port (``sandboxed_coding_agent.server``)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, FIXED_CALCULATOR, wait_until

SLOW = "import time\ntime.sleep(60)\n\n\ndef add(left, right):\n    return left + right\n"
BROKEN = "def add(left, right):\n    return left * right\n"
TOKEN = "s3cret-token-for-the-test"


class Server:
    """An ``agent serve`` process and how to talk to it."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        self.host, port = url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)

    def call(
        self,
        method: str,
        path: str,
        body: object = None,
        token: str | None = TOKEN,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, Any], Mapping[str, str]]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=120)
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        connection.request(method, path, body=data, headers=sent)
        answer = connection.getresponse()
        payload = json.loads(answer.read() or b"{}")
        connection.close()
        return answer.status, payload, dict(answer.getheaders())

    def verify(self, content: str, seed: str = "calculator", **more: Any) -> dict[str, Any]:
        status, payload, _ = self.call("POST", "/v1/verify", _request(content, seed, **more))
        assert status == 200, payload
        return payload


def _request(content: str, seed: str = "calculator", **more: Any) -> dict[str, Any]:
    plan = {"files": [{"path": "calculator.py", "content": content}]}
    return {"seed": seed, "plan": plan, **more}


def _descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid``, with its start time (to tell a reused PID apart)."""
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        started[int(entry)] = fields[19]
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = started[child]
            todo.append(child)
    return found


def _alive(processes: Mapping[int, str]) -> list[int]:
    alive = []
    for pid, start in processes.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            alive.append(pid)
    return alive


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")

    def start(*args: str, token: bool = True) -> Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODING_AGENT_")}
        env["XDG_STATE_HOME"] = str(tmp_path / "state")
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        argv = [str(AGENT), "serve", "--port", "0", *args]
        if token:
            argv += ["--token-file", str(token_file)]
        process = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:"), process.stderr.read()
        return Server(process, line.split()[-1])

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_a_plan_gets_its_verdict_and_its_reward(start_server: Any) -> None:
    server = start_server("--jobs", "2")

    passed = server.verify(FIXED_CALCULATOR)
    failed = server.verify(BROKEN)
    status, patch, _ = server.call(
        "POST",
        "/v1/verify",
        {"seed": "calculator", "patch": "not a diff at all"},
    )

    assert (passed["passed"], passed["reward"], passed["evidence"]) == (True, 1.0, "framework")
    assert passed["run_id"].startswith("run-")
    assert passed["error"] is None
    assert (failed["passed"], failed["reward"]) == (False, 0.0)
    assert status == 200
    assert patch["reward"] == 0.0
    assert patch["error"]["kind"] == "policy"
    status, health, _ = server.call("GET", "/v1/health")
    assert status == 200
    assert health["status"] == "ok"
    assert health["seeds"] == ["calculator"]
    status, open_health, _ = server.call("GET", "/v1/health", token=None)
    assert status == 200
    assert "seeds" not in open_health


def test_a_request_without_the_token_is_refused(start_server: Any) -> None:
    server = start_server()

    missing = server.call("POST", "/v1/verify", _request(FIXED_CALCULATOR), token=None)
    wrong = server.call("POST", "/v1/verify", _request(FIXED_CALCULATOR), token="guess")

    assert missing[0] == 401
    assert missing[1]["error"]["kind"] == "unauthorized"
    assert missing[2]["WWW-Authenticate"] == "Bearer"
    assert wrong[0] == 401


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(AGENT), "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
    )

    assert done.returncode == 2
    assert "needs a token: give --token-file FILE" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "seed",
    ["/etc", "../calculator", "seed_projects/calculator", "nonesuch", 7],
)
def test_a_request_names_only_a_seed_the_server_offers(start_server: Any, seed: object) -> None:
    server = start_server()

    status, payload, _ = server.call("POST", "/v1/verify", _request(FIXED_CALCULATOR, seed=seed))  # type: ignore[arg-type]

    assert status == 400
    assert f"seed {json.dumps(seed)} is not one this server offers" in payload["error"]["message"]
    assert "it offers: calculator" in payload["error"]["message"]


def test_a_seeds_folder_offers_its_seeds_by_name(start_server: Any, tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    (seeds / "tiny").mkdir(parents=True)
    (seeds / "tiny" / "seed.toml").write_text(
        'name = "tiny"\ndescription = "a tiny seed"\ndefault_prompt = "Fix add."\n'
        'editable = ["calc.py"]\ntests = ["test_calc.py"]\n'
        'test_command = ["python", "-m", "unittest", "-q"]\n'
    )
    (seeds / "tiny" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (seeds / "tiny" / "test_calc.py").write_text(
        "import unittest\nfrom calc import add\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    server = start_server("--seeds", str(seeds))
    plan = {"files": [{"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}]}

    status, payload, _ = server.call("POST", "/v1/verify", {"seed": "tiny", "plan": plan})
    _, health, _ = server.call("GET", "/v1/health")

    assert status == 200, payload
    assert payload["reward"] == 1.0, payload
    assert payload["seed"] == "tiny"
    assert health["seeds"] == ["calculator", "tiny"]


def test_a_request_the_server_cannot_read_gets_one_clear_answer(start_server: Any) -> None:
    server = start_server("--max-body-bytes", "2000")

    not_json = server.call("POST", "/v1/verify", raw=b"{nope")
    misspelt = server.call("POST", "/v1/verify", {"seed": "calculator", "plann": {}})
    both = server.call("POST", "/v1/verify", {"seed": "calculator", "plan": {}, "patch": ""})
    too_large = server.call("POST", "/v1/verify", _request("#" * 5000))
    no_route = server.call("POST", "/v1/nothing", {})
    deep = server.call("POST", "/v1/verify", raw=b"[" * 1500)
    no_length = server.call("POST", "/v1/verify", raw=b"{}", headers={"Content-Length": "-1"})

    assert not_json[0] == 400
    assert "not JSON" in not_json[1]["error"]["message"]
    assert misspelt[0] == 400
    assert 'unknown key "plann" (did you mean "plan"?)' in misspelt[1]["error"]["message"]
    assert both[0] == 400
    assert "exactly one of plan and patch" in both[1]["error"]["message"]
    assert too_large[0] == 413
    assert "larger than 2000 bytes" in too_large[1]["error"]["message"]
    assert no_route[0] == 404
    assert deep[0] in (400, 413)
    assert no_length[0] == 411
    assert server.call("GET", "/v1/health")[0] == 200  # and it still serves


def test_a_runtime_that_cannot_be_built_answers_no_reward(
    start_server: Any, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds"
    (seeds / "needs").mkdir(parents=True)
    # A runtime on a Python that no machine has: the runtime cannot be made.
    (seeds / "needs" / "seed.toml").write_text(
        'name = "needs"\ndescription = "a seed whose runtime cannot be built"\n'
        'default_prompt = "Fix add."\neditable = ["calc.py"]\ntests = ["test_calc.py"]\n'
        'test_command = ["python", "-m", "unittest", "-q"]\n'
        '[runtime]\npython = "3.99"\n'
    )
    (seeds / "needs" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (seeds / "needs" / "test_calc.py").write_text("import unittest\n")
    server = start_server("--seeds", str(seeds))
    plan = {"files": [{"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}]}

    status, payload, _ = server.call("POST", "/v1/verify", {"seed": "needs", "plan": plan})

    assert status == 200, payload
    assert payload["reward"] is None
    assert payload["passed"] is False
    assert payload["error"]["kind"] in ("sandbox", "configuration"), payload["error"]


def test_beyond_jobs_and_queue_a_request_is_told_to_come_back(start_server: Any) -> None:
    server = start_server("--jobs", "1", "--queue", "0")
    slow = threading.Thread(target=_ignore_errors, args=(server, _request(SLOW)))
    slow.daemon = True
    slow.start()
    assert wait_until(lambda: server.call("GET", "/v1/health")[1]["running"] == 1, timeout=60)

    status, payload, headers = server.call("POST", "/v1/verify", _request(FIXED_CALCULATOR))

    assert status == 429
    assert payload["error"]["kind"] == "busy"
    assert headers["Retry-After"] == "1"


def test_concurrent_requests_and_a_batch_are_all_answered_right(start_server: Any) -> None:
    server = start_server("--jobs", "2", "--queue", "8")
    contents = [FIXED_CALCULATOR, BROKEN, FIXED_CALCULATOR, BROKEN]
    answers: dict[int, dict[str, Any]] = {}

    def one(n: int) -> None:
        answers[n] = server.verify(contents[n])

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(contents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    status, batch, _ = server.call(
        "POST", "/v1/verify/batch", {"items": [_request(c) for c in reversed(contents)]}
    )

    assert [answers[n]["reward"] for n in range(4)] == [1.0, 0.0, 1.0, 0.0]
    assert status == 200
    assert [v["reward"] for v in batch["verdicts"]] == [0.0, 1.0, 0.0, 1.0]
    too_many = server.call("POST", "/v1/verify/batch", {"items": [_request(BROKEN)] * 11})
    assert too_many[0] == 400
    assert "at most 10 items" in too_many[1]["error"]["message"]


def test_a_slow_client_is_cut_off_and_others_are_served(start_server: Any) -> None:
    server = start_server("--jobs", "1", "--queue", "1")
    # Sends its headers, promises a body, and never sends it.
    stalled = socket.create_connection((server.host, server.port))
    stalled.sendall(
        b"POST /v1/verify HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + TOKEN.encode()
        + b"\r\nContent-Length: 100\r\n\r\n{"
    )

    served = server.verify(FIXED_CALCULATOR)
    stalled.settimeout(60)
    answer = stalled.recv(4096)  # the server's deadline ends it (READ_SECONDS)

    assert served["reward"] == 1.0
    assert answer.startswith(b"HTTP/1.0 400"), answer
    stalled.close()


def test_a_flood_of_connections_is_turned_away_without_a_thread_each(start_server: Any) -> None:
    # jobs 1 + queue 1: at most 2 * 2 + 4 = 8 connections open at once, 4 from one address.
    server = start_server("--jobs", "1", "--queue", "1")
    held = [socket.create_connection((server.host, server.port)) for _ in range(8)]
    time.sleep(0.5)  # each accepted and waiting for its request
    extra = socket.create_connection((server.host, server.port))
    extra.settimeout(30)

    answer = extra.recv(4096)

    assert answer.startswith(b"HTTP/1.0 503"), answer
    assert b"too many open connections" in answer
    for connection in [*held, extra]:
        connection.close()
    # Once they are gone the server serves again.
    assert wait_until(lambda: server.call("GET", "/v1/health")[0] == 200, timeout=30)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_the_server_and_every_sandbox(start_server: Any, stop: int) -> None:
    server = start_server("--jobs", "2")
    slow = threading.Thread(target=lambda: _ignore_errors(server, _request(SLOW)))
    slow.daemon = True
    slow.start()
    assert wait_until(lambda: server.call("GET", "/v1/health")[1]["running"] == 1, timeout=60)
    assert wait_until(lambda: any(_descendants(server.process.pid)), timeout=30)
    time.sleep(1)
    below = _descendants(server.process.pid)

    server.process.send_signal(stop)
    _, stderr = server.process.communicate(timeout=30)

    assert server.process.returncode == 0, stderr
    assert "stopped" in stderr
    assert "Traceback" not in stderr
    assert wait_until(lambda: not _alive(below), timeout=10), _alive(below)


def _ignore_errors(server: Server, request: dict[str, Any]) -> None:
    """Send ``request``; a server stopped on purpose ends it with no answer."""
    with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
        server.call("POST", "/v1/verify", request)


def test_the_reward_functions_ask_a_server_given_its_address(start_server: Any) -> None:
    from test_rewards import FAILING, GOOD, PATCHLESS

    from sandboxed_coding_agent.rewards import compute_score, trl_reward
    from sandboxed_coding_agent.verification import VerifyError

    server = start_server("--jobs", "2")
    reward_func = trl_reward(url=server.url, token=TOKEN)

    rewards = reward_func(
        prompts=["fix it"] * 3, completions=[GOOD, FAILING, PATCHLESS], seed=["calculator"] * 3
    )
    scored = compute_score("calculator", GOOD, url=server.url, token=TOKEN)
    with pytest.raises(VerifyError, match=r"refused the request \(401\)") as refused:
        compute_score("calculator", GOOD, url=server.url, token="wrong")
    with pytest.raises(VerifyError, match="not one this server offers"):
        compute_score("/etc", GOOD, url=server.url, token=TOKEN)
    with pytest.raises(VerifyError, match="runner are the server's"):
        trl_reward(url=server.url, token=TOKEN, runner="local")

    assert rewards == [1.0, 0.0, 0.0]
    assert scored == 1.0
    assert "wrong" not in str(refused.value)
    # A server that cannot be reached gives no verdict: None, never 0.0.
    server.process.kill()
    server.process.wait()
    assert compute_score("calculator", GOOD, url=server.url, token=TOKEN) is None

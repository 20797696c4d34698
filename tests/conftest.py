"""Shared fixtures: a real OpenAI-compatible HTTP server on loopback and the real ``agent`` CLI."""

from __future__ import annotations

import functools
import json
import os
import signal
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

from sandboxed_coding_agent.core.verdicts.evidence import GUARD_CAPABILITIES
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

API_KEY = "sk-test-4f9c2e7a1b5d8e3f6a0c9b2d"
MODEL = "test-model"
AGENT = Path(sys.executable).with_name("agent")
#: Holds a ``sitecustomize`` that notes each process an ``agent`` starts (see there).
PROCESS_STARTS = Path(__file__).with_name("process_starts")

FIXED_CALCULATOR = (
    '"""A tiny calculator used as the built-in seed project."""\n\n\n'
    "def add(left, right):\n"
    '    """Return the sum of left and right."""\n'
    "    return left + right\n"
)


# A suite started in the background of a script inherits SIGINT ignored, and so would every
# agent it starts: the Ctrl-C tests would then wait for an agent that cannot hear them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@functools.cache
def control_groups_here() -> tuple[frozenset[str], dict[str, str]]:
    """The controllers (``pids``, ``memory``) a sandbox's group can be made for by this caller,
    and why not for the others: found by making one, as the agent and ``agent doctor`` do."""
    from sandboxed_coding_agent.plugins.local_sandbox import new_sandbox_id
    from sandboxed_coding_agent.plugins.local_sandbox.cgroups import SandboxGroups

    groups = SandboxGroups(new_sandbox_id(), max_processes=16, memory_bytes=256 * 1024 * 1024)
    try:
        return frozenset(groups.groups), dict(groups.problems)
    finally:
        groups.kill_and_remove()


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
    #: Seconds to wait before answering, as a slow model would (requests are served at once).
    delay: float = 0.0


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
                if reply.delay:
                    time.sleep(reply.delay)
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

    def reply_calls(self, *calls: tuple[str, Any], content: str | None = None) -> None:
        """An assistant message calling functions: each ``(name, arguments)``, the
        arguments a dict (sent as JSON) or raw text."""
        tool_calls = [
            {
                "id": f"call_{len(self.replies)}_{index}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for index, (name, arguments) in enumerate(calls)
        ]
        message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        self.reply(200, completion(content, choices=[choice]))

    def reply_bash(self, command: str) -> None:
        self.reply_calls(("bash", {"command": command}))


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
    #: The command line of every process the agent started, in order.
    processes: tuple[tuple[str, ...], ...] = ()

    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def sandboxes(self) -> list[tuple[str, ...]]:
        """The processes that were a sandbox: the local runner starts each through ``bwrap``."""
        return [argv for argv in self.processes if any(Path(a).name == "bwrap" for a in argv)]

    @property
    def tested_sandboxes(self) -> list[tuple[str, ...]]:
        """The sandboxes that tested a plan: all of them but the one that ran the unpatched
        seed to list the tests a verdict needs, when the run had no list kept yet."""
        listed = "listing the unpatched seed's tests" in self.stderr
        return self.sandboxes[1:] if listed else self.sandboxes


def install_plugin(
    site: Path, distribution: str, version: str, entry_points: Mapping[str, str]
) -> dict[str, str]:
    """Put a ``.dist-info`` for ``distribution`` in ``site``, declaring the agent's
    ``entry_points`` (name -> module), as ``pip install --target`` leaves one; the
    plugin's modules are the caller's to write there.

    Plain ``.dist-info`` folders are enough for ``importlib.metadata`` to find their
    entry points on ``PYTHONPATH``; no installer needed.

    :returns: the ``PYTHONPATH`` of an ``agent`` that finds it (``site`` first).
    """
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n", encoding="utf-8"
    )
    declared = "".join(f"{name} = {module}\n" for name, module in entry_points.items())
    (info / "entry_points.txt").write_text(
        f"[sandboxed_coding_agent]\n{declared}", encoding="utf-8"
    )
    path = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path)}


def processes_started(log: Path) -> tuple[tuple[str, ...], ...]:
    """The command lines an ``agent`` run with ``AGENT_TEST_PROCESS_LOG=log`` started."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return ()
    return tuple(tuple(json.loads(line)) for line in lines)


def noting_processes(env: Mapping[str, str], log: Path) -> dict[str, str]:
    """``env`` for an ``agent`` that notes every process it starts in ``log``."""
    path = [str(PROCESS_STARTS), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path), "AGENT_TEST_PROCESS_LOG": str(log)}


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
def run_agent(agent_env: dict[str, str], tmp_path: Path) -> Callable[..., AgentRun]:
    """Run the installed ``agent`` console script as a user would, noting what it starts."""
    counter = iter(range(1_000_000))

    def run(*args: str, env: Mapping[str, str] | None = None, timeout: float = 120) -> AgentRun:
        log = tmp_path / f"processes-{next(counter)}.jsonl"
        merged = noting_processes(agent_env, log)
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
        return AgentRun(
            done.returncode,
            done.stdout,
            done.stderr,
            Path(merged["TMPDIR"]),
            processes_started(log),
        )

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


def host_processes_with(text: str) -> list[int]:
    """PIDs of host processes whose command line contains ``text`` (a test's marker)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture
def walls_seed(tmp_path: Path) -> Path:
    """The calculator seed as a folder whose ``[guard]`` allows everything: these tests prove
    the sandbox's own walls, which hold whatever the guard in the test's process lets by."""
    folder = tmp_path / "calculator-walls"
    folder.mkdir()
    for name in ("calculator.py", "check_calculator.py"):
        (folder / name).write_bytes((calculator_seed().root / name).read_bytes())
    allow = ", ".join(f'"{capability}"' for capability in GUARD_CAPABILITIES)
    (folder / "seed.toml").write_text(
        'name = "calculator-walls"\ndescription = "the calculator, guard off"\n'
        'tests = ["check_calculator.py"]\neditable = ["calculator.py"]\n'
        'test_command = ["python", "-m", "unittest", "-v", "check_calculator"]\n'
        f'default_prompt = "Fix add."\n[guard]\nallow = [{allow}]\n'
    )
    return folder


#: The modules of ``uv run pytest -m "not slow"``, the suite's fast part: each takes a few
#: seconds at most (measured with ``--durations=0``), and together they touch every area (the
#: contract and policies, plans and edits, seeds, a few real sandboxes, the provider, the CLI,
#: records, plugins, the docs) in under two minutes on two cores. Every other module is marked
#: ``slow``, a new one too until it is measured and listed here; ``uv run pytest`` runs all.
FAST_MODULES = frozenset(
    {
        "test_ast_policy",
        "test_ast_policy_forgery",
        "test_attempts",
        "test_batch_events",
        "test_cli_help",
        "test_cli_start",
        "test_contract",
        "test_contract_messages",
        "test_docs_site",
        "test_doctor",
        "test_edits",
        "test_evidence_tiers",
        "test_extension_docs",
        "test_extension_mistakes",
        "test_extension_policies",
        "test_fast_subset",
        "test_git_seeds_hostile",
        "test_guard_origins",
        "test_hidden_tests",
        "test_hook_reference",
        "test_import_graph",
        "test_package_layout",
        "test_limit_decisions",
        "test_manifest",
        "test_patterns",
        "test_planner_context",
        "test_plugin_type_check",
        "test_project_metadata",
        "test_provider_encoding",
        "test_provider_messages",
        "test_record_text",
        "test_sandbox_shared_memory",
        "test_sandbox_start",
        "test_sandbox_stdlib_only",
        "test_sandbox_stress",
        "test_seed_files",
        "test_serialization",
        "test_swebench_specs",
        "test_testing_api",
        "test_rewards",
        "test_verify_api",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.stem not in FAST_MODULES:
            item.add_marker(pytest.mark.slow)

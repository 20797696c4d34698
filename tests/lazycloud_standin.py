"""A stand-in for the LazyCloud control plane, on 127.0.0.1, for tests of the LazyCloud backend.

No real LazyCloud control plane is reachable from the test machine, so this module serves
the control plane's HTTP protocol itself and the REAL SDK (``lazycloud-client 0.1.145``)
is pointed at it with ``LAZYCLOUD_ENDPOINT``. The protocol was read from that SDK's own
source (``lazycloud/clients/api.py``, ``clients/workloads.py``, ``session/*.py``,
``abstractions/*.py``) and every answer is shaped to validate against its pydantic models
in ``lazycloud/contracts/api.py``.

What it really does:

- stores secrets, source archives (by sha256), releases and deployed workload specs;
- runs each task of a deployed function as a local subprocess of ``sys.executable``
  (this test venv's Python), with the function's source archive unzipped on
  ``PYTHONPATH`` and an environment holding only the secrets and environment the
  workload spec names, plus a minimal ``PATH``/``HOME``/``LANG``; the handler's return
  value (or the exception it raised) comes back through the SDK as from the real service;
- gives each sandbox a private temporary folder standing for its filesystem (remote
  ``/x/y`` is ``<root>/x/y``) and runs each sandbox command as a local subprocess there,
  with the process timeout, TERM/KILL and stop semantics the SDK relies on.

What it does NOT do: isolate anything. Handlers and sandbox commands run as ordinary
processes of the test user, with the network open; ``block_network``, ``allow_list``,
CPU and memory limits are recorded, never enforced. Enforcing them is the real
service's job; tests assert that the spec the backend sends ASKS for them.

Use it from a test module by importing the fixtures explicitly::

    from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
        ControlPlane,
        control_plane_fixture,
        lazycloud_env_fixture,
        lazycloud_sdk_fixture,
    )

and naming ``control_plane``, ``lazycloud_env`` or ``lazycloud_sdk`` as a test's parameter.

``lazycloud_sdk`` points the SDK in this process at the stand-in (environment set with
monkeypatch, the SDK's settings cache reset before and after); for a subprocess such as
the ``agent`` CLI, pass ``subprocess_environment(lazycloud_env)`` as its environment.

What the SDK does that a backend and its tests must allow for (read in its source):

- Waiting on a task (``GET tasks/{id}``) and every sandbox process call retry connection
  errors and 502/503/504 for 600 s (``lazycloud.session.task._TRANSIENT_BUDGET_SECONDS``);
  no setting shortens that, only the pause between attempts
  (``LAZYCLOUD_RETRY_DELAY_SECONDS``, 0.05 here). The backend must put its own deadline
  around every remote wait. Submitting a task (``POST .../tasks``) is not retried: a 503
  there fails at once.
- App slugs are ``^[a-z][a-z0-9_]{0,62}$``: no hyphens (function and sandbox names may
  have them).
- The image is resolved but not honoured: everything runs on this venv's Python; a
  leading ``python``/``python3`` in a sandbox command is ``sys.executable``, and an
  absolute argument under a top-level folder that exists in the sandbox (``/workspace/...``)
  is mapped into its root. A sandbox process gets the sandbox spec's environment and
  named secrets, then the request's ``env``; one ended by a signal reports 128 + the
  signal's number. Retry delays are not waited out; ``max_attempts`` and ``retry_on`` are.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import pickle
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import attrs
import pytest

WORKSPACE = "sca-standin"
TOKEN = "lct_standin_7d3f9a1c5e2b8d4f6a0c"

#: Variables that would make the SDK read another profile, talk to a container API socket,
#: or believe it runs inside a LazyCloud container. Removed wherever the stand-in is used.
SDK_VARIABLES_TO_CLEAR = (
    "LAZYCLOUD_CONTAINER_API",
    "LAZYCLOUD_PROFILE",
    "LAZYCLOUD_TLS",
    "LAZYCLOUD_DEBUG",
    "CONTAINER_ID",
    "TASK_ID",
    "ROOT_TASK_ID",
    "IMPORTING_USER_CODE",
    "GATEWAY_HTTP_URL",
    "GATEWAY_TOKEN",
    "WORKSPACE_ID",
    "WORKSPACE_NAME",
)

#: Most a long poll is held, whatever the client asks (the real API allows 60 s).
MAX_HOLD_SECONDS = 60.0
#: Most a ``hang`` fault holds a request before closing the connection unanswered.
MAX_HANG_SECONDS = 120.0
#: Captured output kept per stream of a sandbox process; the rest is dropped and flagged.
OUTPUT_LIMIT_BYTES = 1 << 20

_SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,239}")
_EMPTY_ZIP = b"PK\x05\x06" + b"\x00" * 18


def _now() -> datetime:
    return datetime.now(UTC)


def _stamp(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _minimal_environment(home: Path) -> dict[str, str]:
    """What every process the stand-in starts gets besides what its spec or request names."""
    return {
        "PATH": os.pathsep.join(
            (str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin")
        ),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


# --------------------------------------------------------------------------- records


@attrs.define
class RecordedRequest:
    """One request as the stand-in received it (the upload PUTs included)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@attrs.define
class Fault:
    """A scripted misbehaviour for requests whose method and path match.

    ``times`` None answers every match; otherwise the first ``times`` matches, after
    which requests pass through again. ``hang_seconds`` > 0 holds the request that long
    and then closes the connection without an answer. ``reset`` resets the connection
    (the client sees "Connection reset by peer") instead of answering: before doing
    anything, or with ``after`` once the request's work is done (a lost answer).
    """

    method: str
    path: re.Pattern[str]
    status: int = 503
    body: Any = None
    times: int | None = None
    hang_seconds: float = 0.0
    reset: bool = False
    after: bool = False
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return self.method in ("*", method) and self.path.search(path) is not None


@attrs.define
class InjectedFailure:
    kind: str
    type: str | None
    message: str


@attrs.define
class Release:
    id: str
    app: str
    name: str
    version: int | None
    spec: dict[str, Any]
    created_at: datetime

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "created_at": _stamp(self.created_at),
            "spec": self.spec,
        }


@attrs.define
class Workload:
    """A deployed workload: its active release and every version deployed."""

    id: str
    app: str
    name: str
    kind: str
    releases: list[Release]
    created_at: datetime
    state: str = "active"

    @property
    def release(self) -> Release:
        return self.releases[-1]

    @property
    def spec(self) -> dict[str, Any]:
        return self.release.spec

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "app": self.app,
            "name": self.name,
            "kind": self.kind,
            "state": self.state,
            "running_containers": 0,
            "version": self.release.version,
            "release_id": self.release.id,
            "created_at": _stamp(self.created_at),
            "deployed_at": _stamp(self.release.created_at),
        }


@attrs.define
class DeploymentRecord:
    """One ``POST apps/{app}/deployments`` as received."""

    app: str
    specs: list[dict[str, Any]]
    prune: bool


@attrs.define
class TaskRecord:
    """A task of a function; ``env`` is the environment its last attempt's process got."""

    id: str
    app: str
    function: str
    release: Release
    input_data: bytes
    created_at: datetime
    status: str = "queued"
    attempts: int = 0
    max_attempts: int = 1
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result_data: bytes | None = None
    failure: dict[str, Any] | None = None
    stdout: str = ""
    stderr: str = ""
    env: dict[str, str] = attrs.Factory(dict)
    done: threading.Event = attrs.Factory(threading.Event)
    process: subprocess.Popen[bytes] | None = None

    @property
    def args(self) -> tuple[Any, ...]:
        return tuple(_decode_input(self.input_data).get("args", ()))

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(_decode_input(self.input_data).get("kwargs", {}))

    @property
    def value(self) -> Any:
        """The handler's return value, decoded here; only for picklable plain data."""
        assert self.result_data is not None, f"task {self.id} has no result ({self.status})"
        return pickle.loads(self.result_data)

    def view(self) -> dict[str, Any]:
        failure = dict(self.failure) if self.failure is not None else None
        return {
            "id": self.id,
            "app": self.app,
            "function": self.function,
            "release_id": self.release.id,
            "version": self.release.version,
            "status": self.status,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "preemptions": 0,
            "root_task_id": self.id,
            "created_at": _stamp(self.created_at),
            "started_at": _stamp(self.started_at),
            "finished_at": _stamp(self.finished_at),
            "failure": failure,
        }


@attrs.define
class ProcessRecord:
    """A command run in a sandbox: ``args``, ``cwd`` and ``env`` as the client sent them."""

    process_id: str
    pid: int
    args: list[str]
    cwd: str
    env: dict[str, str]
    popen: subprocess.Popen[bytes]
    started_at: datetime
    exit_code: int | None = None
    stdout: bytearray = attrs.Factory(bytearray)
    stderr: bytearray = attrs.Factory(bytearray)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    signals: list[str] = attrs.Factory(list)
    done: threading.Event = attrs.Factory(threading.Event)

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def view(self) -> dict[str, Any]:
        return {
            "process_id": self.process_id,
            "pid": self.pid,
            "command": " ".join(self.args),
            "cwd": self.cwd,
            "running": self.running,
            "exit_code": self.exit_code,
            "stdout": self.stdout.decode("utf-8", "replace"),
            "stderr": self.stderr.decode("utf-8", "replace"),
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
        }


@attrs.define
class SandboxRecord:
    """A sandbox container: the spec it was created from, what was put in it and run in it."""

    id: str
    app: str
    name: str
    release: Release
    root: Path
    created_at: datetime
    status: str = "running"
    stopped_at: datetime | None = None
    files: dict[str, bytes] = attrs.Factory(dict)
    directories: list[str] = attrs.Factory(list)
    processes: list[ProcessRecord] = attrs.Factory(list)

    @property
    def spec(self) -> dict[str, Any]:
        return self.release.spec

    @property
    def stopped(self) -> bool:
        return self.status == "stopped"

    def local_path(self, remote: str) -> Path:
        """Where remote ``remote`` lives under the sandbox root; ``..`` is refused."""
        posix = PurePosixPath(remote if remote.startswith("/") else f"/workspace/{remote}")
        if ".." in posix.parts:
            raise _ApiFailure(400, "invalid_request", f"path {remote!r} contains '..'")
        return self.root.joinpath(*posix.parts[1:])

    def instance_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "release_id": self.release.id,
            "app": self.app,
            "name": self.name,
            "kind": "sandbox",
            "state": "stopped" if self.stopped else "ready",
            "timeout_seconds": self.spec.get("keep_warm_seconds"),
            "stop_reason": "stopped" if self.stopped else None,
            "created_at": _stamp(self.created_at),
            "ready_at": _stamp(self.created_at),
        }

    def container_view(self) -> dict[str, Any]:
        resources = self.spec.get("resources", {})
        return {
            "id": self.id,
            "app": self.app,
            "function": self.name,
            "release_id": self.release.id,
            "state": "stopped" if self.stopped else "ready",
            "stop_reason": "stopped" if self.stopped else None,
            "slots": 1,
            "running_tasks": 0,
            "cpu_millis": resources.get("cpu_millis", 125),
            "memory_mib": resources.get("memory_mib", 128),
            "created_at": _stamp(self.created_at),
            "ready_at": _stamp(self.created_at),
            "stopped_at": _stamp(self.stopped_at),
            "kind": "sandbox",
            "purpose": "instance",
        }

    def row_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "release_id": self.release.id,
            "app": self.app,
            "name": self.name,
            "status": self.status,
            "gpu": [],
            "created_at": _stamp(self.created_at),
            "ready_at": _stamp(self.created_at),
            "stopped_at": _stamp(self.stopped_at),
        }


class _ApiFailure(Exception):
    """Answered as ``{"code", "message"}`` with this status."""

    def __init__(
        self, status: int, code: str, message: str, refusals: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.refusals = refusals


def _decode_input(data: bytes) -> dict[str, Any]:
    decoded = pickle.loads(data)
    return decoded if isinstance(decoded, dict) else {}


# --------------------------------------------------------------------------- the task runner

# Runs in the task's subprocess: imports the handler from the unzipped source, calls it
# with the cloudpickled arguments, and writes the outcome as JSON to the path given.
_RUNNER = r"""
import base64, importlib, json, pickle, sys, traceback

def _pickled(value):
    import cloudpickle
    return base64.b64encode(cloudpickle.dumps(value)).decode()

def main():
    handler, input_path, output_path = sys.argv[1:4]
    with open(input_path, "rb") as source:
        payload = pickle.load(source)
    module_name, _, qualname = handler.partition(":")
    try:
        target = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except BaseException as exc:
        outcome = {"kind": "load_error", "type": type(exc).__name__, "message": str(exc),
                   "traceback": traceback.format_exc()}
    else:
        call = getattr(target, "local", target)
        try:
            value = call(*payload.get("args", ()), **payload.get("kwargs", {}))
        except BaseException as exc:
            outcome = {"kind": "user_error", "type": type(exc).__name__, "message": str(exc),
                       "traceback": traceback.format_exc()}
            try:
                outcome["exception"] = _pickled(exc)
            except Exception:
                pass
        else:
            try:
                outcome = {"data": _pickled(value)}
            except Exception as exc:
                outcome = {"kind": "user_error", "type": type(exc).__name__,
                           "message": "the result could not be serialized: %s" % exc,
                           "traceback": traceback.format_exc()}
    with open(output_path, "w") as sink:
        json.dump(outcome, sink)

main()
"""


# --------------------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self) -> None:
        self.server.plane._handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _dispatch


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], plane: ControlPlane) -> None:
        self.plane = plane
        super().__init__(address, _Handler)


Route = Callable[..., Any]


class ControlPlane:
    """The stand-in control plane: a ThreadingHTTPServer on 127.0.0.1 and its recorded state.

    Public state, for tests to assert on (read it after the SDK call returned):

    - ``requests``: every ``RecordedRequest``, in arrival order;
    - ``secrets``: name → value;
    - ``sources``: sha256 → zip bytes (``source_files(sha)`` lists a source's file names);
    - ``deployments``: every ``DeploymentRecord``; ``workloads``: function name → ``Workload``
      (``.spec`` is the active WorkloadSpec as JSON); ``releases``: id → ``Release``;
    - ``tasks``: id → ``TaskRecord`` (``.args``, ``.kwargs``, ``.env``, ``.status``,
      ``.failure``, ``.value``, ``.stdout``, ``.stderr``, ``.attempts``);
    - ``sandboxes``: id → ``SandboxRecord`` (``.spec``, ``.status``, ``.stopped``,
      ``.files`` remote path → bytes, ``.processes`` with args/cwd/env/exit code);
    - ``unhandled``: requests that matched no route (a call the stand-in does not serve).

    Failure knobs: ``fail()``, ``hang()``, ``reset()``, ``refuse_connections()`` /
    ``accept_connections()``,
    ``fail_next_task()``; ``answer_next_task()`` replaces a task's returned value.
    """

    def __init__(self, state_root: Path, *, workspace: str = WORKSPACE, token: str = TOKEN) -> None:
        self.workspace = workspace
        self.token = token
        self.state_root = state_root
        self.requests: list[RecordedRequest] = []
        self.unhandled: list[RecordedRequest] = []
        self.secrets: dict[str, str] = {}
        self.secret_times: dict[str, tuple[datetime, datetime]] = {}
        self.sources: dict[str, bytes] = {}
        self.images: list[dict[str, Any]] = []
        self.apps: dict[str, tuple[str, datetime]] = {}
        self.releases: dict[str, Release] = {}
        self.deployments: list[DeploymentRecord] = []
        self.workloads: dict[str, Workload] = {}
        self.tasks: dict[str, TaskRecord] = {}
        self.sandboxes: dict[str, SandboxRecord] = {}
        self.faults: list[Fault] = []
        self.injected_failures: dict[str, list[InjectedFailure]] = {}
        self.replaced_answers: dict[str, list[Any]] = {}
        self._upload_key = secrets.token_hex(16)
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self._routes = self._route_table()

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._server = _Server(("127.0.0.1", self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="lazycloud-standin",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        self._closing.set()
        self._stop_server()
        for sandbox in list(self.sandboxes.values()):
            self._stop_sandbox(sandbox)
        for task in list(self.tasks.values()):
            if task.process is not None and task.process.poll() is None:
                task.process.kill()
            task.done.wait(5)

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    @property
    def endpoint(self) -> str:
        """The value for ``LAZYCLOUD_ENDPOINT``: scheme, host and port, no path."""
        return f"http://127.0.0.1:{self.port}"

    # ----------------------------------------------------------------- failure knobs

    def fail(
        self,
        method: str,
        path: str,
        *,
        status: int = 503,
        body: Any = None,
        times: int | None = None,
        after: bool = False,
    ) -> Fault:
        """Answer requests matching ``method`` (or ``"*"``) and the regex ``path`` with ``status``.

        ``path`` is searched in the full request path, e.g. ``r"/tasks/[^/]+$"``. ``body``
        defaults to ``{"code": ..., "message": ...}`` for the status; a ``bytes`` body is
        sent as is. ``times=None`` answers forever, ``times=1`` once. ``after``: the
        request's work is done first (a gateway's 502/504 after the work happened).
        """
        fault = Fault(
            method.upper(), re.compile(path), status=status, body=body, times=times, after=after
        )
        with self._lock:
            self.faults.append(fault)
        return fault

    def hang(self, method: str, path: str, *, seconds: float, times: int | None = 1) -> Fault:
        """Hold matching requests ``seconds`` (at most MAX_HANG_SECONDS), then close unanswered."""
        seconds = min(seconds, MAX_HANG_SECONDS)
        fault = Fault(method.upper(), re.compile(path), times=times, hang_seconds=seconds)
        with self._lock:
            self.faults.append(fault)
        return fault

    def reset(self, method: str, path: str, *, times: int | None = 1, after: bool = False) -> Fault:
        """Reset the connection of matching requests (TCP RST, no answer), the first
        ``times`` of them: before the request is served, or ``after`` it was (its work
        done, its answer lost), as a flaky network or a restarting control plane does."""
        fault = Fault(method.upper(), re.compile(path), times=times, reset=True, after=after)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def refuse_connections(self) -> None:
        """Close the listening socket: new connections to the endpoint are refused."""
        self._stop_server()

    def accept_connections(self) -> None:
        """Listen again on the same port after ``refuse_connections``."""
        if self._server is None:
            self.start()

    def fail_next_task(
        self,
        function: str,
        *,
        type: str = "RuntimeError",
        message: str = "injected failure",
        kind: str = "user_error",
    ) -> None:
        """Make the next task of ``function`` fail so, without running its handler."""
        with self._lock:
            self.injected_failures.setdefault(function, []).append(
                InjectedFailure(kind=kind, type=type, message=message)
            )

    def answer_next_task(self, function: str, value: Any) -> None:
        """Make the next task of ``function`` that succeeds return ``value`` (plain data,
        pickled with the standard library) instead of what its handler returned: a
        control plane answering whatever it likes."""
        with self._lock:
            self.replaced_answers.setdefault(function, []).append(value)

    def _replaced_answer(self, function: str) -> bytes | None:
        with self._lock:
            waiting = self.replaced_answers.get(function)
            return pickle.dumps(waiting.pop(0)) if waiting else None

    # ----------------------------------------------------------------- helpers for tests

    def source_files(self, sha256: str) -> list[str]:
        with zipfile.ZipFile(io.BytesIO(self.sources[sha256])) as archive:
            return sorted(archive.namelist())

    def spec(self, name: str) -> dict[str, Any]:
        """The active WorkloadSpec (JSON) of the deployed workload ``name``."""
        return self.workloads[name].spec

    def requests_to(self, method: str, path: str) -> list[RecordedRequest]:
        pattern = re.compile(path)
        return [r for r in self.requests if r.method == method and pattern.search(r.path)]

    def live_sandboxes(self) -> list[SandboxRecord]:
        return [sandbox for sandbox in self.sandboxes.values() if not sandbox.stopped]

    def wait_for_tasks(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for task in list(self.tasks.values()):
            assert task.done.wait(max(0.0, deadline - time.monotonic())), f"task {task.id} runs on"

    # ----------------------------------------------------------------- request handling

    def _handle(self, handler: _Handler) -> None:
        split = urlsplit(handler.path)
        path = unquote(split.path)
        query = {key: values[-1] for key, values in parse_qs(split.query).items()}
        body = self._read_body(handler)
        request = RecordedRequest(
            method=handler.command,
            path=path,
            query=query,
            headers=dict(handler.headers.items()),
            body=body,
        )
        with self._lock:
            self.requests.append(request)
            fault = next((f for f in self.faults if f.matches(request.method, path)), None)
            if fault is not None:
                fault.hits += 1
        if fault is not None and not fault.after:
            self._answer_fault(handler, fault)
            return
        try:
            status, payload = self._route(request)
        except _ApiFailure as failure:
            error: dict[str, Any] = {"code": failure.code, "message": failure.message}
            if failure.refusals:
                error["refusals"] = failure.refusals
            status, payload = failure.status, error
        if fault is not None:
            self._answer_fault(handler, fault)
            return
        self._send(handler, status, payload)

    def _read_body(self, handler: _Handler) -> bytes:
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = bytearray()
            while True:
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    return bytes(chunks)
                chunks += handler.rfile.read(size)
                handler.rfile.readline()
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length else b""

    def _answer_fault(self, handler: _Handler, fault: Fault) -> None:
        if fault.reset:
            import socket
            import struct

            handler.close_connection = True
            with contextlib.suppress(OSError):
                # Linger 0: close() sends RST, so the client reads ECONNRESET.
                handler.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                handler.connection.close()
            return
        if fault.hang_seconds > 0:
            self._closing.wait(fault.hang_seconds)
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(2)
            return
        body = fault.body
        if body is None:
            code = {401: "unauthenticated", 404: "not_found", 409: "conflict"}.get(
                fault.status, "unavailable" if fault.status in (502, 503, 504) else "internal"
            )
            body = {"code": code, "message": f"stand-in fault: HTTP {fault.status}"}
        self._send(handler, fault.status, body)

    def _send(self, handler: _Handler, status: int, payload: Any) -> None:
        if isinstance(payload, bytes):
            data, content_type = payload, "application/octet-stream"
        elif isinstance(payload, _NdJson):
            data, content_type = payload.data, "application/x-ndjson"
        else:
            data, content_type = json.dumps(payload).encode(), "application/json"
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            handler.close_connection = True

    def _route(self, request: RecordedRequest) -> tuple[int, Any]:
        if request.path.startswith("/uploads/"):
            return self._put_upload(request)
        prefix = f"/v1/workspaces/{self.workspace}/"
        if request.path.startswith("/v1/"):
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                raise _ApiFailure(401, "unauthenticated", "a valid bearer token is required")
            if not request.path.startswith(prefix):
                raise _ApiFailure(404, "not_found", "workspace not found")
        rest = request.path[len(prefix) :]
        for method, pattern, route in self._routes:
            if method != request.method:
                continue
            matched = pattern.fullmatch(rest)
            if matched is not None:
                return route(request, **matched.groupdict())
        with self._lock:
            self.unhandled.append(request)
        raise _ApiFailure(
            404, "not_found", f"the stand-in serves no {request.method} {request.path}"
        )

    def _route_table(self) -> list[tuple[str, re.Pattern[str], Route]]:
        segment = r"[^/]+"
        table: list[tuple[str, str, Route]] = [
            ("POST", r"images/resolve", self._resolve_image),
            ("POST", r"images", self._resolve_image),
            ("GET", rf"images/(?P<image_id>{segment})", self._get_image),
            ("POST", rf"images/(?P<image_id>{segment})/prepare", self._prepare_image),
            ("POST", r"sources", self._create_source_upload),
            ("POST", rf"apps/(?P<app>{segment})/deployment-plan", self._plan_deployment),
            ("POST", rf"apps/(?P<app>{segment})/deployments", self._deploy),
            ("POST", rf"apps/(?P<app>{segment})/releases", self._prepare_release),
            ("GET", r"apps", self._list_apps),
            ("GET", rf"apps/(?P<app>{segment})", self._get_app),
            ("DELETE", rf"apps/(?P<app>{segment})", self._delete_app),
            ("GET", r"workloads", self._list_workloads),
            (
                "GET",
                rf"apps/(?P<app>{segment})/workloads/(?P<kind>{segment})/(?P<name>{segment})",
                self._get_workload,
            ),
            (
                "DELETE",
                rf"apps/(?P<app>{segment})/workloads/(?P<kind>{segment})/(?P<name>{segment})",
                self._delete_workload,
            ),
            (
                "POST",
                rf"apps/(?P<app>{segment})/workloads/function/(?P<name>{segment})/tasks",
                self._submit_tasks,
            ),
            (
                "POST",
                rf"apps/(?P<app>{segment})/workloads/function/(?P<name>{segment})/run",
                self._run_function,
            ),
            ("GET", r"tasks", self._list_tasks),
            ("POST", r"tasks/wait", self._wait_tasks),
            ("GET", rf"tasks/(?P<task_id>{segment})", self._get_task),
            ("GET", rf"tasks/(?P<task_id>{segment})/result", self._get_task_result),
            ("GET", rf"tasks/(?P<task_id>{segment})/logs", self._get_task_logs),
            ("POST", rf"tasks/(?P<task_id>{segment})/cancel", self._cancel_task),
            ("POST", r"instances", self._create_instance),
            ("POST", rf"containers/(?P<cid>{segment})/connect", self._connect),
            ("GET", rf"containers/(?P<cid>{segment})", self._get_container),
            ("POST", rf"containers/(?P<cid>{segment})/stop", self._stop_container),
            ("POST", rf"containers/(?P<cid>{segment})/directories", self._create_directory),
            ("DELETE", rf"containers/(?P<cid>{segment})/directories", self._delete_path),
            ("PUT", rf"containers/(?P<cid>{segment})/files/content", self._upload_file),
            ("GET", rf"containers/(?P<cid>{segment})/files/content", self._download_file),
            ("GET", rf"containers/(?P<cid>{segment})/files", self._list_files),
            ("GET", rf"containers/(?P<cid>{segment})/files/stat", self._stat_file),
            ("DELETE", rf"containers/(?P<cid>{segment})/files", self._delete_path),
            ("POST", rf"containers/(?P<cid>{segment})/processes", self._start_process),
            ("GET", rf"containers/(?P<cid>{segment})/processes", self._list_processes),
            (
                "GET",
                rf"containers/(?P<cid>{segment})/processes/(?P<process_id>{segment})",
                self._get_process,
            ),
            (
                "POST",
                rf"containers/(?P<cid>{segment})/processes/(?P<process_id>{segment})/kill",
                self._kill_process,
            ),
            ("GET", r"sandboxes", self._list_sandboxes),
            ("GET", r"secrets", self._list_secrets),
            ("POST", r"secrets", self._create_secret),
            ("GET", rf"secrets/(?P<name>{segment})", self._get_secret),
            ("PUT", rf"secrets/(?P<name>{segment})", self._set_secret),
            ("PATCH", rf"secrets/(?P<name>{segment})", self._update_secret),
            ("DELETE", rf"secrets/(?P<name>{segment})", self._delete_secret),
            ("GET", rf"secrets/(?P<name>{segment})/value", self._get_secret_value),
        ]
        return [(method, re.compile(pattern), route) for method, pattern, route in table]

    # ----------------------------------------------------------------- images and sources

    def _image_view(self, definition: Mapping[str, Any]) -> dict[str, Any]:
        digest = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()
        version = str(definition.get("python_version", "3.11"))
        return {
            "id": f"img_{digest[:24]}",
            "python_version": ".".join(version.split(".")[:2]),
            "architecture": definition.get("architecture", "amd64"),
            "ready": True,
            "created_at": _stamp(_now()),
            "ready_at": _stamp(_now()),
        }

    def _resolve_image(self, request: RecordedRequest) -> tuple[int, Any]:
        definition = request.json()
        with self._lock:
            self.images.append(definition)
        return 200, {"image": self._image_view(definition), "build": None}

    def _get_image(self, request: RecordedRequest, image_id: str) -> tuple[int, Any]:
        return 200, {**self._image_view({}), "id": image_id}

    def _prepare_image(self, request: RecordedRequest, image_id: str) -> tuple[int, Any]:
        return 200, {"image": {**self._image_view({}), "id": image_id}, "build": None}

    def _create_source_upload(self, request: RecordedRequest) -> tuple[int, Any]:
        sha256 = request.json()["sha256"]
        with self._lock:
            present = sha256 in self.sources
        answer: dict[str, Any] = {"sha256": sha256, "present": present}
        if not present:
            answer["upload"] = {
                "url": f"{self.endpoint}/uploads/{sha256}?key={self._upload_key}",
                "method": "PUT",
                "headers": {"Content-Type": "application/zip"},
                "expires_at": _stamp(_now() + timedelta(hours=1)),
            }
        return 200, answer

    def _put_upload(self, request: RecordedRequest) -> tuple[int, Any]:
        sha256 = request.path.rsplit("/", 1)[-1]
        if request.method != "PUT" or request.query.get("key") != self._upload_key:
            raise _ApiFailure(403, "forbidden", "the upload URL is not valid")
        if hashlib.sha256(request.body).hexdigest() != sha256:
            raise _ApiFailure(400, "invalid_request", "the archive does not match its sha256")
        with self._lock:
            self.sources[sha256] = request.body
        return 200, {}

    # ----------------------------------------------------------------- apps, releases, deploys

    def _app_record(self, app: str) -> tuple[str, datetime]:
        with self._lock:
            return self.apps.setdefault(app, (str(uuid.uuid4()), _now()))

    def _app_view(self, app: str, state: str = "active") -> dict[str, Any]:
        app_id, created_at = self._app_record(app)
        count = sum(1 for w in self.workloads.values() if w.app == app and w.state == "active")
        return {
            "id": app_id,
            "name": app,
            "state": state,
            "workloads": count,
            "running_containers": 0,
            "created_at": _stamp(created_at),
        }

    def _refusals(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        refusals = []
        for spec in specs:
            missing = [name for name in spec.get("secrets") or () if name not in self.secrets]
            if missing:
                refusals.append(
                    {
                        "kind": spec["kind"],
                        "name": spec["name"],
                        "gate": "missing_secrets",
                        "message": f"secrets not found in workspace: {', '.join(missing)}",
                        "remedy": "create them with `lazycloud secret set NAME`",
                    }
                )
        return refusals

    def _check_specs(self, specs: list[dict[str, Any]]) -> None:
        for spec in specs:
            sha256 = spec["source"]["sha256"]
            if sha256 not in self.sources:
                raise _ApiFailure(400, "invalid_request", f"source {sha256} is not stored")
        refusals = self._refusals(specs)
        if refusals:
            raise _ApiFailure(
                400, "invalid_request", "the deployment was refused", refusals=refusals
            )

    def _plan_deployment(self, request: RecordedRequest, app: str) -> tuple[int, Any]:
        body = request.json()
        items = []
        for workload in body.get("workloads", []):
            existing = self.workloads.get(workload["name"])
            deployed = existing is not None and existing.app == app and existing.state == "active"
            item: dict[str, Any] = {
                "kind": workload["kind"],
                "name": workload["name"],
                "action": "redeploy" if deployed else "add",
                "versions": len(existing.releases) if deployed and existing else 0,
            }
            refusals = self._refusals([workload])
            if refusals:
                item["refusals"] = refusals
            items.append(item)
        return 200, {"app": app, "prune": bool(body.get("prune")), "items": items}

    def _deploy(self, request: RecordedRequest, app: str) -> tuple[int, Any]:
        body = request.json()
        specs: list[dict[str, Any]] = body.get("workloads", [])
        prune = bool(body.get("prune"))
        with self._lock:
            self._check_specs(specs)
            self.deployments.append(DeploymentRecord(app=app, specs=specs, prune=prune))
            releases = []
            for spec in specs:
                existing = self.workloads.get(spec["name"])
                if existing is None or existing.app != app or existing.state != "active":
                    existing = Workload(
                        id=str(uuid.uuid4()),
                        app=app,
                        name=spec["name"],
                        kind=spec["kind"],
                        releases=[],
                        created_at=_now(),
                    )
                    self.workloads[spec["name"]] = existing
                release = Release(
                    id=str(uuid.uuid4()),
                    app=app,
                    name=spec["name"],
                    version=len(existing.releases) + 1,
                    spec=spec,
                    created_at=_now(),
                )
                existing.releases.append(release)
                self.releases[release.id] = release
                releases.append(release.view())
            pruned, removed = [], 0
            if prune:
                listed = {spec["name"] for spec in specs}
                for workload in self.workloads.values():
                    live = workload.app == app and workload.state == "active"
                    if live and workload.name not in listed:
                        workload.state = "deleted"
                        pruned.append(workload.name)
                        removed += len(workload.releases)
            return 200, {
                "app": self._app_view(app),
                "releases": releases,
                "pruned": pruned,
                "removed_versions": removed,
            }

    def _prepare_release(self, request: RecordedRequest, app: str) -> tuple[int, Any]:
        spec = request.json()
        with self._lock:
            self._check_specs([spec])
            self._app_record(app)
            release = Release(
                id=str(uuid.uuid4()),
                app=app,
                name=spec["name"],
                version=None,
                spec=spec,
                created_at=_now(),
            )
            self.releases[release.id] = release
        return 200, release.view()

    def _list_apps(self, request: RecordedRequest) -> tuple[int, Any]:
        return 200, {"apps": [self._app_view(app) for app in self.apps]}

    def _get_app(self, request: RecordedRequest, app: str) -> tuple[int, Any]:
        if app not in self.apps:
            raise _ApiFailure(404, "not_found", f"app {app} not found")
        return 200, self._app_view(app)

    def _delete_app(self, request: RecordedRequest, app: str) -> tuple[int, Any]:
        with self._lock:
            if app not in self.apps:
                raise _ApiFailure(404, "not_found", f"app {app} not found")
            for workload in self.workloads.values():
                if workload.app == app:
                    workload.state = "deleted"
            view = self._app_view(app, state="deleted")
            del self.apps[app]
        return 200, view

    def _active_workload(self, app: str, name: str) -> Workload:
        workload = self.workloads.get(name)
        if workload is None or workload.app != app or workload.state != "active":
            raise _ApiFailure(404, "not_found", f"workload {app}/{name} not found")
        return workload

    def _list_workloads(self, request: RecordedRequest) -> tuple[int, Any]:
        query = request.query
        found = [
            workload.view()
            for workload in self.workloads.values()
            if workload.state == "active"
            and query.get("app", workload.app) == workload.app
            and query.get("name", workload.name) == workload.name
            and query.get("kind", workload.kind) == workload.kind
            and query.get("id", workload.id) == workload.id
        ]
        return 200, {"workloads": found[: int(query.get("limit", 100))]}

    def _get_workload(
        self, request: RecordedRequest, app: str, kind: str, name: str
    ) -> tuple[int, Any]:
        workload = self._active_workload(app, name)
        return 200, {"workload": workload.view(), "release": workload.release.view()}

    def _delete_workload(
        self, request: RecordedRequest, app: str, kind: str, name: str
    ) -> tuple[int, Any]:
        with self._lock:
            workload = self._active_workload(app, name)
            workload.state = "deleted"
        return 200, workload.view()

    # ----------------------------------------------------------------- tasks

    def _submit_tasks(self, request: RecordedRequest, app: str, name: str) -> tuple[int, Any]:
        body = request.json()
        tasks = [self._admit(app, name, body.get("release_id"), item) for item in body["inputs"]]
        return 200, {"tasks": [task.view() for task in tasks]}

    def _run_function(self, request: RecordedRequest, app: str, name: str) -> tuple[int, Any]:
        """``POST .../run`` (what ``fn.remote()`` sends): the task's events as NDJSON.

        Sent whole once the task finished or the wait passed, not line by line.
        """
        body = request.json()
        task = self._admit(app, name, body.get("release_id"), body["input"])
        admitted = task.view()
        task.done.wait(min(float(request.query.get("wait_seconds", 60)), MAX_HOLD_SECONDS))
        events: list[dict[str, Any]] = [{"task": admitted}]
        events += [{"log": entry} for entry in self._log_entries(task)]
        final: dict[str, Any] = {"task": task.view()}
        if task.status == "succeeded":
            final["result"] = self._result_payload(task)
        events.append(final)
        return 200, _NdJson(b"".join(json.dumps(event).encode() + b"\n" for event in events))

    def _admit(
        self, app: str, name: str, release_id: str | None, task_input: dict[str, Any]
    ) -> TaskRecord:
        with self._lock:
            if release_id is not None:
                release = self.releases.get(release_id)
                if release is None or release.app != app or release.name != name:
                    raise _ApiFailure(404, "not_found", f"release {release_id} not found")
            else:
                release = self._active_workload(app, name).release
            if task_input.get("encoding") != "cloudpickle":
                raise _ApiFailure(400, "unsupported", "the stand-in takes cloudpickle input")
            policy = release.spec.get("retry_policy") or {}
            task = TaskRecord(
                id=str(uuid.uuid4()),
                app=app,
                function=name,
                release=release,
                input_data=base64.b64decode(task_input["data"]),
                created_at=_now(),
                max_attempts=int(policy.get("max_attempts", 1)),
            )
            self.tasks[task.id] = task
            injected = self.injected_failures.get(name)
            failure = injected.pop(0) if injected else None
        threading.Thread(
            target=self._run_task, args=(task, failure), name=f"task-{task.id}", daemon=True
        ).start()
        return task

    def _run_task(self, task: TaskRecord, injected: InjectedFailure | None) -> None:
        try:
            task.status = "running"
            task.started_at = _now()
            if injected is not None:
                task.attempts = 1
                self._finish_task(task, failure=attrs.asdict(injected))
                return
            retry_on = set((task.release.spec.get("retry_policy") or {}).get("retry_on") or ())
            retry_on = retry_on or {"user_error", "timeout", "lost"}
            while True:
                task.attempts += 1
                outcome = self._run_attempt(task)
                if "data" in outcome:
                    task.result_data = self._replaced_answer(task.function) or base64.b64decode(
                        outcome["data"]
                    )
                    self._finish_task(task, failure=None)
                    return
                if (
                    task.status == "cancelled"
                    or task.attempts >= task.max_attempts
                    or outcome["kind"] not in retry_on
                    or self._closing.is_set()
                ):
                    self._finish_task(task, failure=outcome)
                    return
        except Exception as exc:  # a stand-in bug must still end the task, visibly
            self._finish_task(
                task, failure={"kind": "system", "type": type(exc).__name__, "message": str(exc)}
            )

    def _finish_task(self, task: TaskRecord, *, failure: dict[str, Any] | None) -> None:
        if task.status != "cancelled":
            task.failure = failure
            task.status = "failed" if failure is not None else "succeeded"
        task.finished_at = _now()
        task.done.set()

    def _run_attempt(self, task: TaskRecord) -> dict[str, Any]:
        spec = task.release.spec
        work = Path(tempfile.mkdtemp(prefix=f"task-{task.id[:8]}-", dir=self.state_root))
        source = work / "source"
        with zipfile.ZipFile(io.BytesIO(self.sources[spec["source"]["sha256"]])) as archive:
            archive.extractall(source)
        (work / "home").mkdir()
        (work / "input.pickle").write_bytes(task.input_data)
        env = {
            **(spec.get("environment") or {}),
            **{name: self.secrets.get(name, "") for name in spec.get("secrets") or ()},
            **_minimal_environment(work / "home"),
            "PYTHONPATH": str(source),
        }
        task.env = env
        outcome_path = work / "outcome.json"
        timeout = float(spec.get("timeout_seconds", 3600))
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _RUNNER,
                spec["handler"],
                str(work / "input.pickle"),
                str(outcome_path),
            ],
            cwd=source,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        task.process = process
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process, signal.SIGKILL)
            stdout, stderr = process.communicate()
            task.stdout, task.stderr = (
                stdout.decode(errors="replace"),
                stderr.decode(errors="replace"),
            )
            return {"kind": "timeout", "message": f"the task ran past its {timeout:g} s timeout"}
        task.stdout, task.stderr = stdout.decode(errors="replace"), stderr.decode(errors="replace")
        if task.status == "cancelled":
            return {"kind": "system", "message": "the task was cancelled"}
        if not outcome_path.exists():
            return {
                "kind": "lost",
                "message": f"the runner exited with {process.returncode} and no outcome",
                "traceback": task.stderr[-4000:] or None,
            }
        outcome: dict[str, Any] = json.loads(outcome_path.read_text())
        return outcome

    def _task(self, task_id: str) -> TaskRecord:
        task = self.tasks.get(task_id)
        if task is None:
            raise _ApiFailure(404, "not_found", f"task {task_id} not found")
        return task

    def _hold(self, request: RecordedRequest) -> float:
        return min(float(request.query.get("wait_seconds", 0) or 0), MAX_HOLD_SECONDS)

    def _get_task(self, request: RecordedRequest, task_id: str) -> tuple[int, Any]:
        task = self._task(task_id)
        task.done.wait(self._hold(request))
        return 200, task.view()

    def _result_payload(self, task: TaskRecord) -> dict[str, Any]:
        assert task.result_data is not None
        return {"encoding": "cloudpickle", "data": base64.b64encode(task.result_data).decode()}

    def _get_task_result(self, request: RecordedRequest, task_id: str) -> tuple[int, Any]:
        task = self._task(task_id)
        if task.status != "succeeded":
            raise _ApiFailure(409, "task_not_finished", f"task {task_id} is {task.status}")
        return 200, self._result_payload(task)

    def _wait_tasks(self, request: RecordedRequest) -> tuple[int, Any]:
        body = request.json()
        ids = body["task_ids"]
        known = [self.tasks[i] for i in ids if i in self.tasks]
        deadline = time.monotonic() + min(float(body.get("wait_seconds", 0)), MAX_HOLD_SECONDS)
        while known and not any(t.done.is_set() for t in known) and time.monotonic() < deadline:
            time.sleep(0.02)
        finished = [
            {
                "task": t.view(),
                "result": self._result_payload(t) if t.status == "succeeded" else None,
                "result_omitted": False,
            }
            for t in known
            if t.done.is_set()
        ]
        return 200, {"tasks": finished, "missing_task_ids": [i for i in ids if i not in self.tasks]}

    def _list_tasks(self, request: RecordedRequest) -> tuple[int, Any]:
        query = request.query
        found = [
            task.view()
            for task in self.tasks.values()
            if query.get("app", task.app) == task.app
            and query.get("function", task.function) == task.function
            and query.get("status", task.status) == task.status
        ]
        return 200, {"tasks": found[: int(query.get("limit", 100))]}

    def _log_entries(self, task: TaskRecord, after: int = 0) -> list[dict[str, Any]]:
        """The task's output as LogEntry objects, stdout lines then stderr lines."""
        lines = [("stdout", line) for line in task.stdout.splitlines()]
        lines += [("stderr", line) for line in task.stderr.splitlines()]
        return [
            {
                "id": n,
                "task_id": task.id,
                "attempt": max(task.attempts, 1),
                "stream": stream,
                "data": data,
                "time": _stamp(task.finished_at or _now()),
            }
            for n, (stream, data) in enumerate(lines, start=1)
            if n > after
        ]

    def _get_task_logs(self, request: RecordedRequest, task_id: str) -> tuple[int, Any]:
        task = self._task(task_id)
        if request.query.get("follow") == "true":
            task.done.wait(MAX_HOLD_SECONDS)
        entries = self._log_entries(task, after=int(request.query.get("after", 0)))
        tail = request.query.get("tail")
        if tail is not None:
            entries = entries[-int(tail) :] if int(tail) else []
        return 200, _NdJson(b"".join(json.dumps(entry).encode() + b"\n" for entry in entries))

    def _cancel_task(self, request: RecordedRequest, task_id: str) -> tuple[int, Any]:
        task = self._task(task_id)
        if not task.done.is_set():
            task.status = "cancelled"
            if task.process is not None and task.process.poll() is None:
                _kill_group(task.process, signal.SIGKILL)
            task.done.wait(10)
        return 200, task.view()

    # ----------------------------------------------------------------- sandboxes

    def _create_instance(self, request: RecordedRequest) -> tuple[int, Any]:
        body = request.json()
        release = self.releases.get(body.get("release_id") or "")
        if release is None:
            raise _ApiFailure(404, "not_found", "release not found")
        if (release.spec.get("pod") or {}).get("kind") != "sandbox":
            raise _ApiFailure(400, "invalid_request", "the stand-in starts only sandboxes")
        sandbox_id = str(uuid.uuid4())
        root = self.state_root / "sandboxes" / sandbox_id
        for folder in ("workspace", "tmp", "root"):
            (root / folder).mkdir(parents=True)
        source = self.sources.get(release.spec["source"]["sha256"], _EMPTY_ZIP)
        with zipfile.ZipFile(io.BytesIO(source)) as archive:
            archive.extractall(root / "workspace")
        sandbox = SandboxRecord(
            id=sandbox_id,
            app=release.app,
            name=release.name,
            release=release,
            root=root,
            created_at=_now(),
        )
        with self._lock:
            self.sandboxes[sandbox_id] = sandbox
        return 200, sandbox.instance_view()

    def _sandbox(self, cid: str, *, running: bool = True) -> SandboxRecord:
        sandbox = self.sandboxes.get(cid)
        if sandbox is None:
            raise _ApiFailure(404, "not_found", f"container {cid} not found")
        if running and sandbox.stopped:
            raise _ApiFailure(409, "conflict", f"container {cid} is stopped")
        return sandbox

    def _connect(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        return 200, self._sandbox(cid).instance_view()

    def _get_container(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        return 200, self._sandbox(cid, running=False).container_view()

    def _stop_container(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        sandbox = self._sandbox(cid, running=False)
        self._stop_sandbox(sandbox)
        return 200, sandbox.container_view()

    def _stop_sandbox(self, sandbox: SandboxRecord) -> None:
        for process in sandbox.processes:
            if process.running:
                _kill_group(process.popen, signal.SIGKILL)
                process.done.wait(5)
        if not sandbox.stopped:
            sandbox.status = "stopped"
            sandbox.stopped_at = _now()

    def _list_sandboxes(self, request: RecordedRequest) -> tuple[int, Any]:
        app = request.query.get("app")
        rows = [s.row_view() for s in self.sandboxes.values() if app in (None, s.app)]
        rows.reverse()
        return 200, {"sandboxes": rows[: int(request.query.get("limit", 100))]}

    def _create_directory(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        sandbox = self._sandbox(cid)
        path = request.query["path"]
        target = sandbox.local_path(path)
        target.mkdir(parents=True, exist_ok=True)
        target.chmod(int(request.query.get("mode", 0o755)))
        sandbox.directories.append(path)
        return 200, {}

    def _upload_file(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        sandbox = self._sandbox(cid)
        path = request.query["path"]
        target = sandbox.local_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
        staged.write_bytes(request.body)
        staged.chmod(int(request.query.get("mode", 0o644)))
        staged.replace(target)
        sandbox.files[path] = request.body
        return 200, {}

    def _existing(self, sandbox: SandboxRecord, path: str) -> Path:
        target = sandbox.local_path(path)
        if not target.exists():
            raise _ApiFailure(404, "not_found", f"{path} does not exist")
        return target

    def _download_file(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        target = self._existing(self._sandbox(cid), request.query["path"])
        if target.is_dir():
            raise _ApiFailure(400, "invalid_request", f"{request.query['path']} is a directory")
        return 200, target.read_bytes()

    def _file_view(self, target: Path) -> dict[str, Any]:
        status = target.stat()
        return {
            "name": target.name,
            "mode": status.st_mode,
            "size": status.st_size,
            "mod_time": _stamp(datetime.fromtimestamp(status.st_mtime, UTC)),
            "owner": str(status.st_uid),
            "group": str(status.st_gid),
            "is_dir": target.is_dir(),
            "permissions": status.st_mode & 0o777,
        }

    def _list_files(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        target = self._existing(self._sandbox(cid), request.query["path"])
        entries = sorted(target.iterdir()) if target.is_dir() else [target]
        return 200, {"files": [self._file_view(entry) for entry in entries], "truncated": False}

    def _stat_file(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        return 200, self._file_view(self._existing(self._sandbox(cid), request.query["path"]))

    def _delete_path(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        target = self._existing(self._sandbox(cid), request.query["path"])
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
        return 200, {}

    def _start_process(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        sandbox = self._sandbox(cid)
        body = request.json()
        args: list[str] = list(body["args"])
        remote_cwd: str = body.get("cwd", "/workspace")
        requested_env: dict[str, str] = dict(body.get("env") or {})
        cwd = sandbox.local_path(remote_cwd)
        if not cwd.is_dir():
            raise _ApiFailure(400, "invalid_request", f"cwd {remote_cwd} is not a directory")
        spec = sandbox.spec
        env = {
            **_minimal_environment(sandbox.root / "root"),
            "TMPDIR": str(sandbox.root / "tmp"),
            **(spec.get("environment") or {}),
            **{name: self.secrets.get(name, "") for name in spec.get("secrets") or ()},
            **requested_env,
        }
        argv = [self._local_argument(sandbox, n, arg) for n, arg in enumerate(args)]
        try:
            popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise _ApiFailure(400, "invalid_request", f"cannot start {args[0]}: {exc}") from exc
        process = ProcessRecord(
            process_id=f"proc_{uuid.uuid4().hex[:16]}",
            pid=popen.pid,
            args=args,
            cwd=remote_cwd,
            env=requested_env,
            popen=popen,
            started_at=_now(),
        )
        with self._lock:
            sandbox.processes.append(process)
        readers = [
            threading.Thread(target=_drain, args=(popen.stdout, process, "stdout"), daemon=True),
            threading.Thread(target=_drain, args=(popen.stderr, process, "stderr"), daemon=True),
        ]
        for reader in readers:
            reader.start()
        threading.Thread(target=_reap, args=(process, readers), daemon=True).start()
        return 200, process.view()

    def _local_argument(self, sandbox: SandboxRecord, position: int, argument: str) -> str:
        """``python``/``python3`` first is this venv's Python; a path into the sandbox is mapped."""
        if position == 0 and argument in ("python", "python3"):
            return sys.executable
        if argument.startswith("/") and ".." not in PurePosixPath(argument).parts:
            top = PurePosixPath(argument).parts[1:2]
            if top and (sandbox.root / top[0]).exists():
                return str(sandbox.local_path(argument))
        return argument

    def _process(self, sandbox: SandboxRecord, process_id: str) -> ProcessRecord:
        for process in sandbox.processes:
            if process_id in (process.process_id, str(process.pid)):
                return process
        raise _ApiFailure(404, "not_found", f"process {process_id} not found")

    def _get_process(self, request: RecordedRequest, cid: str, process_id: str) -> tuple[int, Any]:
        sandbox = self._sandbox(cid, running=False)
        process = self._process(sandbox, process_id)
        process.done.wait(self._hold(request))
        return 200, process.view()

    def _list_processes(self, request: RecordedRequest, cid: str) -> tuple[int, Any]:
        sandbox = self._sandbox(cid)
        summaries = []
        for process in sandbox.processes:
            view = process.view()
            summaries.append(
                {
                    key: view[key]
                    for key in ("process_id", "pid", "command", "cwd", "running", "exit_code")
                }
            )
        return 200, {"processes": summaries}

    def _kill_process(self, request: RecordedRequest, cid: str, process_id: str) -> tuple[int, Any]:
        sandbox = self._sandbox(cid)
        process = self._process(sandbox, process_id)
        name = (request.json() if request.body else {}).get("signal", "TERM")
        process.signals.append(name)
        if process.running:
            _kill_group(process.popen, getattr(signal, f"SIG{name}"))
        return 200, {}

    # ----------------------------------------------------------------- secrets

    def _secret_view(self, name: str) -> dict[str, Any]:
        created, updated = self.secret_times[name]
        used_by = [
            {"app": w.app, "kind": w.kind, "name": w.name}
            for w in self.workloads.values()
            if w.state == "active" and name in (w.spec.get("secrets") or ())
        ]
        return {
            "name": name,
            "created_at": _stamp(created),
            "updated_at": _stamp(updated),
            "used_by": used_by,
        }

    def _store_secret(self, name: str, value: str) -> None:
        if not _SECRET_NAME.fullmatch(name) or name.startswith("LAZYCLOUD_"):
            raise _ApiFailure(400, "invalid_request", f"invalid secret name: {name}")
        if len(value) > 65536:
            raise _ApiFailure(
                400, "invalid_request", "a secret value holds at most 65,536 characters"
            )
        with self._lock:
            created = self.secret_times.get(name, (_now(), _now()))[0]
            self.secrets[name] = value
            self.secret_times[name] = (created, _now())

    def _known_secret(self, name: str) -> None:
        if name not in self.secrets:
            raise _ApiFailure(404, "not_found", f"secret {name} not found")

    def _list_secrets(self, request: RecordedRequest) -> tuple[int, Any]:
        return 200, {"secrets": [self._secret_view(name) for name in sorted(self.secrets)]}

    def _create_secret(self, request: RecordedRequest) -> tuple[int, Any]:
        body = request.json()
        if body["name"] in self.secrets:
            raise _ApiFailure(409, "conflict", f"secret {body['name']} exists")
        self._store_secret(body["name"], body["value"])
        return 201, self._secret_view(body["name"])

    def _get_secret(self, request: RecordedRequest, name: str) -> tuple[int, Any]:
        self._known_secret(name)
        return 200, self._secret_view(name)

    def _set_secret(self, request: RecordedRequest, name: str) -> tuple[int, Any]:
        self._store_secret(name, request.json()["value"])
        return 200, self._secret_view(name)

    def _update_secret(self, request: RecordedRequest, name: str) -> tuple[int, Any]:
        self._known_secret(name)
        self._store_secret(name, request.json()["value"])
        return 200, self._secret_view(name)

    def _delete_secret(self, request: RecordedRequest, name: str) -> tuple[int, Any]:
        with self._lock:
            self._known_secret(name)
            del self.secrets[name]
            del self.secret_times[name]
        return 200, {}

    def _get_secret_value(self, request: RecordedRequest, name: str) -> tuple[int, Any]:
        self._known_secret(name)
        created, updated = self.secret_times[name]
        return 200, {
            "name": name,
            "value": self.secrets[name],
            "created_at": _stamp(created),
            "updated_at": _stamp(updated),
        }


@attrs.frozen
class _NdJson:
    data: bytes


def _kill_group(popen: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, sig)


def _drain(stream: Any, process: ProcessRecord, name: str) -> None:
    buffer: bytearray = getattr(process, name)
    while chunk := stream.read1(65536):
        room = OUTPUT_LIMIT_BYTES - len(buffer)
        if len(chunk) > room:
            setattr(process, f"{name}_truncated", True)
            chunk = chunk[: max(room, 0)]
        buffer += chunk
    stream.close()


def _reap(process: ProcessRecord, readers: list[threading.Thread]) -> None:
    code = process.popen.wait()
    for reader in readers:
        reader.join()
    # A process ended by a signal reports 128 + the signal's number, as a shell would.
    process.exit_code = code if code >= 0 else 128 - code
    process.done.set()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(name="control_plane")
def control_plane_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A started stand-in control plane; stopped (and every process it ran killed) afterwards."""
    plane = ControlPlane(tmp_path_factory.mktemp("lazycloud-standin"))
    plane.start()
    try:
        yield plane
    finally:
        plane.close()


@pytest.fixture(name="lazycloud_env")
def lazycloud_env_fixture(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The variables that point the SDK at ``control_plane`` and away from ``~/.lazycloud``.

    Also remove SDK_VARIABLES_TO_CLEAR wherever these are applied
    (``subprocess_environment`` and ``lazycloud_sdk`` do).
    """
    home = tmp_path_factory.mktemp("lazycloud-home")
    return {
        "LAZYCLOUD_ENDPOINT": control_plane.endpoint,
        "LAZYCLOUD_TOKEN": control_plane.token,
        "LAZYCLOUD_WORKSPACE": control_plane.workspace,
        "LAZYCLOUD_HOME": str(home),
        "LAZYCLOUD_CONFIG": str(home / "config.yaml"),
        # Transient failures are retried after 0.05 s, 0.1 s, ... instead of 0.5 s, 1 s, ...
        "LAZYCLOUD_RETRY_DELAY_SECONDS": "0.05",
    }


def subprocess_environment(
    lazycloud_env: Mapping[str, str], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (default os.environ) without SDK_VARIABLES_TO_CLEAR, plus ``lazycloud_env``."""
    source = os.environ if base is None else base
    kept = {key: value for key, value in source.items() if key not in SDK_VARIABLES_TO_CLEAR}
    return {**kept, **lazycloud_env}


def reset_sdk_settings() -> None:
    """Forget the settings the SDK cached from the environment (``lazycloud.config``)."""
    from lazycloud.config import reset_settings_cache

    reset_settings_cache()


@pytest.fixture(name="lazycloud_sdk")
def lazycloud_sdk_fixture(
    monkeypatch: pytest.MonkeyPatch, lazycloud_env: dict[str, str], control_plane: ControlPlane
) -> Iterator[ControlPlane]:
    """Point the SDK in this process at the stand-in for the test; yields the control plane."""
    for name in SDK_VARIABLES_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    for name, value in lazycloud_env.items():
        monkeypatch.setenv(name, value)
    reset_sdk_settings()
    try:
        yield control_plane
    finally:
        reset_sdk_settings()

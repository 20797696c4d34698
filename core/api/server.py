"""``agent serve``: verdicts over HTTP, for trainers and services that are not Python or
not on this machine.

Three routes, JSON in and out:

* ``POST /v1/verify``: ``{"seed": NAME, "plan": PLAN}`` (or ``"patch": DIFF_TEXT``), and
  optionally ``partial_credit`` and ``policies`` (more policies to switch on). Answers
  the :class:`~sandboxed_coding_agent.verification.Verdict` as JSON, status 200 whatever
  the verdict: ``reward`` is ``1.0``, ``0.0`` (a failure or a refused plan) or ``null``
  (no verdict was reached; ``error`` says why).
* ``POST /v1/verify/batch``: ``{"items": [REQUEST, ...]}``; answers ``{"verdicts": [...]}``
  in the same order.
* ``GET /v1/health``: ``{"status": "ok", ...}`` with the server's bounds and load, and
  (given the token) the seeds it offers.

What a client may not choose: a seed the server was not started with (a request names a
seed, never a path of the server's machine), the runner, the limits, or a policy to
switch off: those are the server's, set when it starts. Bounds: ``jobs`` sandboxes at
once, ``queue`` more requests waiting (beyond them, 429 with ``Retry-After``), a body of
at most ``max_body_bytes`` (413) sent within ``read_seconds`` of connecting, and at most
``MAX_CONNECTIONS_PER_SLOT`` open connections per admitted request, half of them at most
from one client address (beyond them, 503).
With a token, every route but ``/v1/health`` needs ``Authorization: Bearer TOKEN``
(without it, the health answer leaves out the seeds).

Errors are JSON too: ``{"error": {"kind": ..., "message": ...}}`` with the status: 400 a
request that is wrong (the message names what), 401 no or a wrong token, 404, 405, 411,
413, 429, 500 (the verification failed unexpectedly: no verdict), 503. Nothing is
printed but the ``listening on`` line.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from sandboxed_coding_agent.core.serialization import to_jsonable, unknown_keys
from sandboxed_coding_agent.verification import Verdict, VerifyError, verify

#: The port ``agent serve`` listens on unless told.
DEFAULT_PORT = 8787
#: Requests waiting for a sandbox, beyond those running, unless told.
DEFAULT_QUEUE = 64
#: The largest request body, unless told: a plan is at most 1 MiB; a batch holds several.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
#: Seconds a client has, from connecting, to send its whole request.
READ_SECONDS = 10.0
#: Open connections allowed per request the server may admit (``jobs + queue``): room for
#: clients that connect before they send, never a thread per connection without bound.
MAX_CONNECTIONS_PER_SLOT = 2
#: What ``Retry-After`` says to a client turned away for load, in seconds.
RETRY_AFTER_SECONDS = 1
#: The keys a verify request may hold.
REQUEST_KEYS = ("seed", "plan", "patch", "partial_credit", "policies")


class ServeError(ValueError):
    """The server cannot start as asked (its message says why; ``agent serve`` exits 2)."""


@attrs.frozen
class ServerSettings:
    """How ``agent serve`` runs.

    :ivar host: the address to bind (``127.0.0.1`` unless told).
    :ivar port: the port; 0 picks a free one.
    :ivar token: the bearer token requests must carry; ``None``: none needed (loopback only).
    :ivar jobs: sandboxes at once.
    :ivar queue: requests waiting beyond those running.
    :ivar seeds: the seeds a request may name: name -> what :func:`verify` is given (the
        name of an installed seed, or the folder of one under ``--seeds DIR``).
    :ivar options: :func:`verify`'s options that are the server's (runner, limits,
        policies switched off, policy parameters).
    :ivar max_body_bytes: the largest request body.
    :ivar read_seconds: seconds a client has, from connecting, to send its whole request.
    """

    host: str
    port: int
    token: str | None
    jobs: int
    queue: int
    seeds: Mapping[str, str]
    options: Mapping[str, Any] = attrs.field(factory=dict)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    read_seconds: float = READ_SECONDS


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str | os.PathLike[str]) -> str:
    """The token in ``path`` (surrounding whitespace removed).

    :raises ServeError: the file cannot be read, is empty or too long, or is not one line.
    """
    try:
        with open(path, "rb") as file:
            data = file.read(4097)
    except OSError as error:
        raise ServeError(f"cannot read the token file {path}: {error.strerror}") from None
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ServeError(f"the token file {path} is not ASCII text") from None
    if not token or len(data) > 4096 or any(c.isspace() for c in token):
        raise ServeError(f"the token file {path} must hold one token of 1 to 4096 characters")
    return token


def check_settings(settings: ServerSettings) -> None:
    """:raises ServeError: a setting that would make the server unsafe or useless."""
    if settings.token is not None and (
        not settings.token or settings.token != settings.token.strip()
    ):
        raise ServeError("the token must not be empty nor begin or end with white space")
    if settings.token is None and not is_loopback(settings.host):
        raise ServeError(
            f"binding {settings.host}, which other machines may reach, needs a token: "
            "give --token-file FILE (or bind 127.0.0.1)"
        )
    if not settings.seeds:
        raise ServeError("no seed to offer: install a seed package or give --seeds DIR")
    if settings.jobs < 1 or settings.queue < 0 or settings.max_body_bytes < 1:
        raise ServeError("--jobs must be at least 1, --queue and --max-body-bytes not negative")
    if not 0 < settings.read_seconds < float("inf"):
        raise ServeError("the read deadline must be a positive number of seconds")


class Admission:
    """At most ``jobs`` verifications at once and ``queue`` more waiting; no more."""

    def __init__(self, jobs: int, queue: int) -> None:
        self.jobs, self.queue = jobs, queue
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(jobs)
        self.admitted = 0
        self.running = 0

    def admit(self, count: int = 1) -> bool:
        """Take ``count`` places (a batch takes one per item), all or none."""
        with self._lock:
            if self.admitted + count > self.jobs + self.queue:
                return False
            self.admitted += count
            return True

    def leave(self, count: int = 1) -> None:
        with self._lock:
            self.admitted -= count

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the ``jobs`` places while a plan is verified."""
        with self._slots:
            with self._lock:
                self.running += 1
            try:
                yield
            finally:
                with self._lock:
                    self.running -= 1


class HttpError(Exception):
    """A request answered with an error status and ``{"error": {...}}``."""

    def __init__(self, status: int, kind: str, message: str, **headers: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers


def verify_arguments(
    request: object, settings: ServerSettings, where: str = "the request"
) -> tuple[str, dict[str, Any]]:
    """The seed as one request names it, and :func:`verify`'s arguments for the request:
    its seed, plan and own options.

    :raises HttpError: 400 naming what is wrong (a seed the server does not offer above all).
    """
    if not isinstance(request, Mapping):
        raise HttpError(400, "usage", f"{where} must be a JSON object")
    unknown = [key for key in request if key not in REQUEST_KEYS]
    if unknown:
        raise HttpError(400, "usage", f"{where}: {unknown_keys(unknown, REQUEST_KEYS)}")
    seed = request.get("seed")
    if not isinstance(seed, str) or seed not in settings.seeds:
        offered = ", ".join(sorted(settings.seeds))
        raise HttpError(
            400,
            "usage",
            f"{where}: seed {json.dumps(seed)} is not one this server offers "
            f"(a request names a seed, never a path); it offers: {offered}",
        )
    if ("plan" in request) == ("patch" in request):
        raise HttpError(400, "usage", f"{where} must hold exactly one of plan and patch")
    plan = request["plan"] if "plan" in request else request["patch"]
    if "patch" in request and not isinstance(plan, str):
        raise HttpError(400, "usage", f"{where}: patch must be the text of a unified diff")
    partial = request.get("partial_credit", False)
    policies = request.get("policies", [])
    if not isinstance(partial, bool):
        raise HttpError(400, "usage", f"{where}: partial_credit must be true or false")
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        raise HttpError(400, "usage", f"{where}: policies must be a list of policy names")
    return seed, {
        "seed": settings.seeds[seed],
        "plan": plan,
        "partial_credit": partial,
        "policies": [*settings.options.get("policies", ()), *policies],
        **{key: value for key, value in settings.options.items() if key != "policies"},
    }


def verdict_json(verdict: Verdict, seed: str) -> dict[str, Any]:
    """The verdict as the server answers it, named by the seed as the client named it."""
    answer: dict[str, Any] = to_jsonable(verdict)
    answer["seed"] = seed
    return answer


class VerdictServer(ThreadingHTTPServer):
    """The HTTP server: one thread per connection, and a bound on connections."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, settings: ServerSettings, judge: Callable[..., Verdict] = verify) -> None:
        self.settings = settings
        self.judge = judge
        self.admission = Admission(settings.jobs, settings.queue)
        self.max_connections = MAX_CONNECTIONS_PER_SLOT * (settings.jobs + settings.queue) + 4
        # Half of them per client address: room for every request one client may have
        # admitted, and one host that holds its connections open cannot lock others out.
        self.max_connections_per_address = self.max_connections // 2
        self._connections = threading.BoundedSemaphore(self.max_connections)
        self._by_address: dict[str, int] = {}
        self._by_address_lock = threading.Lock()
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        self.address_family = family
        super().__init__((settings.host, settings.port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}"

    def process_request(self, request: Any, client_address: Any) -> None:
        address = str(client_address[0])
        with self._by_address_lock:
            held = self._by_address.get(address, 0)
            room = held < self.max_connections_per_address
            if room and self._connections.acquire(blocking=False):
                self._by_address[address] = held + 1
            else:
                room = False
        if not room:
            # No thread for it: a short answer, and the connection closed.
            with suppress(OSError):
                request.sendall(_raw_response(503, "busy", "too many open connections"))
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(address)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(str(client_address[0]))

    def _release(self, address: str) -> None:
        with self._by_address_lock:
            left = self._by_address.pop(address) - 1
            if left:
                self._by_address[address] = left
        self._connections.release()


def _raw_response(status: int, kind: str, message: str) -> bytes:
    body = json.dumps({"error": {"kind": kind, "message": message}}).encode()
    head = (
        f"HTTP/1.0 {status} {kind}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class _Handler(BaseHTTPRequestHandler):
    server: VerdictServer
    server_version = "sandboxed-coding-agent"
    sys_version = ""
    timeout = READ_SECONDS

    def setup(self) -> None:
        super().setup()
        seconds = self.server.settings.read_seconds
        self.connection.settimeout(seconds)
        # The whole request must arrive within read_seconds, however slowly it trickles in.
        self._deadline = threading.Timer(seconds, self._cut)
        self._deadline.daemon = True
        self._deadline.start()

    def _cut(self) -> None:
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RD)

    def finish(self) -> None:
        self._deadline.cancel()
        super().finish()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a request line or a header too long, a method it
        has no handler for, an HTTP/0.9 POST) in JSON too, as every other answer."""
        self.close_connection = True
        kind = "too-large" if code in (413, 414, 431) else "usage"
        text = message or HTTPStatus(code).phrase
        data = json.dumps({"error": {"kind": kind, "message": text}}).encode()
        with suppress(OSError):
            self.send_response(code, message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing on the terminal per request: the records keep what each one did."""

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        self._answer(self._post)

    def _answer(self, route: Callable[[], object]) -> None:
        try:
            status, body, headers = 200, route(), {}
        except HttpError as error:
            status, headers = error.status, error.headers
            body = {"error": {"kind": error.kind, "message": error.message}}
        except Exception as error:
            # No verdict was reached: an answer the client reads as such (5xx), no traceback.
            status, headers = 500, {}
            message = f"no verdict: {type(error).__name__}"
            body = {"error": {"kind": "internal", "message": message}}
        data = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client went away; its verdict is in the records

    def _get(self) -> object:
        if self.path != "/v1/health":
            raise HttpError(404, "not-found", f"no route {self.path}; see GET /v1/health")
        admission = self.server.admission
        health: dict[str, object] = {
            "status": "ok",
            "jobs": admission.jobs,
            "queue": admission.queue,
            "running": admission.running,
            "waiting": admission.admitted - admission.running,
        }
        try:
            self._check_token()
        except HttpError:
            return health  # open to a load balancer's check; what it offers is not
        return {**health, "seeds": sorted(self.server.settings.seeds)}

    def _post(self) -> object:
        if self.path not in ("/v1/verify", "/v1/verify/batch"):
            raise HttpError(404, "not-found", f"no route {self.path}")
        self._check_token()
        request = self._body()
        self._deadline.cancel()
        settings = self.server.settings
        if self.path == "/v1/verify":
            named, arguments = verify_arguments(request, settings)
            with self._admitted(1):
                return self._verdict(named, arguments)
        if not isinstance(request, Mapping) or set(request) != {"items"}:
            raise HttpError(400, "usage", 'a batch must be {"items": [request, ...]}')
        items = request["items"]
        if not isinstance(items, list) or not items:
            raise HttpError(400, "usage", "items must be a list of at least one request")
        most = settings.jobs + settings.queue
        if len(items) > most:
            raise HttpError(400, "usage", f"a batch may hold at most {most} items (jobs + queue)")
        every = [verify_arguments(item, settings, f"item {n}") for n, item in enumerate(items)]
        with self._admitted(len(every)), ThreadPoolExecutor(settings.jobs) as pool:
            found = pool.map(lambda checked: self._verdict(*checked), every)
            return {"verdicts": list(found)}

    def _check_token(self) -> None:
        token = self.server.settings.token
        if token is None:
            return
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            value.strip().encode("utf-8", "surrogateescape"), token.encode()
        ):
            raise HttpError(
                401, "unauthorized", "this server needs Authorization: Bearer TOKEN",
                WWW_Authenticate="Bearer",
            )  # fmt: skip

    def _body(self) -> object:
        if self.headers.get("Transfer-Encoding"):
            raise HttpError(411, "length-required", "send the body with a Content-Length")
        given = self.headers.get("Content-Length", "").strip()
        # ASCII digits only ("²" is a digit to str.isdigit, not to int), and few of them.
        if not (given.isascii() and given.isdigit()):
            raise HttpError(411, "length-required", "send the body with a Content-Length")
        digits = given.lstrip("0") or "0"
        bound = self.server.settings.max_body_bytes
        if len(digits) > len(str(bound)) or int(digits) > bound:
            raise HttpError(413, "too-large", f"the body is larger than {bound} bytes")
        length = int(digits)
        data = self.rfile.read(length)
        if len(data) != length:
            raise HttpError(400, "usage", "the body ended before its Content-Length")
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as error:
            raise HttpError(400, "usage", f"the body is not JSON: {error}") from None

    @contextmanager
    def _admitted(self, count: int) -> Iterator[None]:
        admission = self.server.admission
        if not admission.admit(count):
            raise HttpError(
                429, "busy", "every sandbox is busy and the queue is full; try again",
                Retry_After=str(RETRY_AFTER_SECONDS),
            )  # fmt: skip
        try:
            yield
        finally:
            admission.leave(count)

    def _verdict(self, seed: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        with self.server.admission.slot():
            try:
                verdict = self.server.judge(**arguments)
            except VerifyError as error:
                raise HttpError(400, "usage", error.message) from None
        return verdict_json(verdict, seed)


def offered_seeds(installed: Sequence[str], folder: str | None) -> dict[str, str]:
    """The seeds a server offers: each installed seed by name, and each seed folder under
    ``folder`` (a folder holding a ``seed.toml``; not a symbolic link to one, and not one
    whose name is not printable UTF-8 text) by its folder's name, which wins."""
    seeds = {name: name for name in installed}
    if folder is not None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as error:
            raise ServeError(f"cannot read --seeds {folder}: {error.strerror}") from None
        for entry in entries:
            if not entry.name.isprintable() or not _is_utf8(entry.name):
                continue  # a name no JSON answer could carry as it is, and no record either
            if entry.is_dir(follow_symlinks=False) and os.path.isfile(
                os.path.join(entry.path, "seed.toml")
            ):
                seeds[entry.name] = os.path.abspath(entry.path)
    return seeds


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def serve(settings: ServerSettings, said: Callable[[str], None]) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM raise :class:`KeyboardInterrupt`).

    :param said: told ``listening on URL`` once the socket is bound.
    :raises ServeError: the settings are unsafe, or the address cannot be bound.
    """
    check_settings(settings)
    try:
        server = VerdictServer(settings)
    except OSError as error:
        where = f"{settings.host}:{settings.port}"
        raise ServeError(f"cannot listen on {where}: {error.strerror}") from None
    with server:
        said(f"listening on {server.url}")
        server.serve_forever(poll_interval=0.2)

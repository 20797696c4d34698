"""Talking to the LazyCloud control plane: a deadline on every wait, and its failures as ours.

The SDK retries connection errors and 502/503/504 answers for up to 600 s,
whatever timeout it was given, and some of its waits have no timeout at all.
So every remote call here runs in a worker thread that the agent stops
waiting for at its own deadline (:func:`bounded`); the thread is a daemon and
ends with the command. Ctrl-C reaches the waiting main thread at once.

:func:`translated` turns whatever the SDK raises into one of the agent's
errors: a missing login or workspace, or a refused token, is a configuration
error (exit 2) saying to run ``lazycloud login``; anything else that goes wrong
remotely is of the kind the caller names (a provider error for the planner,
a sandbox error for the runner), with the message of the control plane.
"""

from __future__ import annotations

import contextvars
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs

from sandboxed_coding_agent.core.errors import AgentError, ConfigurationError

from .names import TIMEOUT_ENV

T = TypeVar("T")

LOGIN_HINT = (
    "run `lazycloud login` (or set LAZYCLOUD_TOKEN and LAZYCLOUD_WORKSPACE); "
    "LAZYCLOUD_ENDPOINT names another control plane"
)


@attrs.frozen
class Deadlines:
    """How long the agent waits for each kind of remote work, in seconds.

    :ivar call: one control-plane operation (a secret, a listing, a file, a stop).
    :ivar start: making something ready: a deploy (image build included) or a
        sandbox (image build, release, container).
    :ivar planner: the planner task, from submission to its result (the
        function itself may run 120 s).
    """

    call: float = 60.0
    start: float = 600.0
    planner: float = 300.0

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Deadlines:
        """The defaults, each lowered to ``SANDBOXED_CODING_AGENT_LAZYCLOUD_TIMEOUT`` if set.

        :raises ConfigurationError: the variable is not a positive number.
        """
        text = environ.get(TIMEOUT_ENV, "").strip()
        if not text:
            return cls()
        try:
            cap = float(text)
        except ValueError:
            cap = float("nan")
        if not cap > 0 or cap == float("inf"):
            raise ConfigurationError(f"{TIMEOUT_ENV} must be a positive number of seconds")
        default = cls()
        return cls(min(default.call, cap), min(default.start, cap), min(default.planner, cap))


class RemoteTimeout(Exception):
    """A remote wait passed its deadline; the work may still go on remotely."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} did not finish within {seconds:g} s")
        self.what = what
        self.seconds = seconds


class Stopped(Exception):
    """The agent no longer wants the sandbox (``run_test_until``'s stop event was set)."""


#: How often a wait that may be stopped looks at its stop event.
STOP_POLL_SECONDS = 0.05


def bounded(
    call: Callable[[], T], seconds: float, what: str, stop: threading.Event | None = None
) -> T:
    """``call()``'s result (or exception), or :class:`RemoteTimeout` after ``seconds``,
    or :class:`Stopped` within :data:`STOP_POLL_SECONDS` of ``stop`` being set."""
    answers: queue.SimpleQueue[tuple[bool, object]] = queue.SimpleQueue()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            answers.put((True, context.run(call)))
        except BaseException as error:
            answers.put((False, error))

    if stop is not None and stop.is_set():
        raise Stopped(what)
    threading.Thread(target=work, name=f"lazycloud: {what}", daemon=True).start()
    deadline = time.monotonic() + seconds
    while True:
        left = max(0.0, deadline - time.monotonic())
        try:
            ok, value = answers.get(timeout=min(left, STOP_POLL_SECONDS) if stop else left)
            break
        except queue.Empty:
            if stop is not None and stop.is_set():
                raise Stopped(what) from None
            if time.monotonic() >= deadline:
                raise RemoteTimeout(what, seconds) from None
    if ok:
        return value  # type: ignore[return-value]
    assert isinstance(value, BaseException)
    raise value


#: Statuses worth asking again: the control plane (or a proxy before it) was busy or down.
TRANSIENT_STATUSES = frozenset({408, 429, 502, 503, 504})
#: The first pause between attempts, doubled each time up to :data:`MAX_RETRY_PAUSE`,
#: and drawn at random below that ("full jitter"), so forty sandboxes do not retry in step.
FIRST_RETRY_PAUSE = 0.25
MAX_RETRY_PAUSE = 8.0


def is_transient(error: BaseException) -> bool:
    """Whether asking again may succeed: a connection reset or refused, a timeout, or one
    of :data:`TRANSIENT_STATUSES`. Any other answer (a 4xx) is final."""
    from lazycloud.clients.api import ApiConnectionError, ApiError

    for cause in _causes(error):
        if isinstance(cause, ApiError):
            return cause.status_code in TRANSIENT_STATUSES
        if isinstance(cause, ApiConnectionError | ConnectionError | TimeoutError | RemoteTimeout):
            return True
    return False


def never_sent(error: BaseException) -> bool:
    """Whether the request certainly did not reach the control plane (no connection was
    made, or it answered that it did nothing: 429), so that even a create may be sent again."""
    import httpx
    from lazycloud.clients.api import ApiError

    for cause in _causes(error):
        if isinstance(cause, ApiError):
            return cause.status_code == 429
        if isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout | ConnectionRefusedError):
            return True
    return False


def retried(
    call: Callable[[], T],
    seconds: float,
    what: str,
    *,
    stop: threading.Event | None = None,
    again: Callable[[BaseException], bool] = is_transient,
) -> T:
    """``call()``, asked again after a transient failure (``again``) until ``seconds`` pass.

    Only for calls that may be repeated: reads, uploads to a path, a stop, a release
    (a second one is harmless). Each attempt is :func:`bounded` by what is left; the
    last failure is raised as it is.
    """
    deadline = time.monotonic() + seconds
    pause = FIRST_RETRY_PAUSE
    while True:
        left = deadline - time.monotonic()
        try:
            return bounded(call, max(left, 0.001), what, stop)
        except Stopped:
            raise
        except Exception as error:
            if isinstance(error, RemoteTimeout) or not again(error):
                raise
            if time.monotonic() + pause / 2 >= deadline:
                raise
            pause = pause_before_retry(pause, stop, what)


def pause_before_retry(pause: float, stop: threading.Event | None, what: str) -> float:
    """Wait a random time below ``pause`` ("full jitter", so that forty sandboxes do not
    retry in step), or until ``stop`` is set (:class:`Stopped`); the next pause's bound."""
    wait = random.uniform(0, pause)  # noqa: S311 - jitter, not a secret
    if stop is not None:
        if stop.wait(wait):
            raise Stopped(what)
    else:
        time.sleep(wait)
    return min(pause * 2, MAX_RETRY_PAUSE)


def endpoint_in_use() -> str:
    """The control plane's URL the SDK would talk to, or why there is none."""
    try:
        from lazycloud.control import resolve_control_client_config

        return resolve_control_client_config().endpoint
    except Exception as error:
        return f"(unknown: {error})"


@contextmanager
def translated(
    remote_error: type[AgentError],
    doing: str,
    *,
    planner_task_id: str | None = None,
    sandbox_id: str | None = None,
    redact: Callable[[str], str] = lambda text: text,
) -> Iterator[None]:
    """Turn SDK failures inside the block into the agent's errors.

    :param remote_error: the kind for a remote failure (``ProviderError``, ``SandboxError``).
    :param doing: what was being done, for the message ("creating the sandbox").
    """
    ids: dict[str, Any] = {"planner_task_id": planner_task_id, "sandbox_id": sandbox_id}
    try:
        yield
    except (AgentError, Stopped):
        raise
    except RemoteTimeout as timeout:
        raise remote_error(
            f"{doing}: the LazyCloud control plane at {endpoint_in_use()} gave no answer "
            f"within {timeout.seconds:g} s (the agent's deadline; {TIMEOUT_ENV} lowers it)",
            **ids,
        ) from None
    except Exception as error:
        configuration, message = describe(error)
        kind = ConfigurationError if configuration else remote_error
        raise kind(f"{doing}: {redact(message)}", **ids) from None


def describe(error: BaseException) -> tuple[bool, str]:
    """Whether ``error`` is a configuration problem, and what to tell the user."""
    from lazycloud.clients.api import ApiConnectionError, ApiError
    from lazycloud.exceptions import ConfigurationError as NotConfigured

    chain = list(_causes(error))
    for cause in chain:
        if isinstance(cause, NotConfigured):
            reason = _one_line(cause).split(";")[0]
            return True, f"LazyCloud is not set up ({reason}); {LOGIN_HINT}"
    for cause in chain:
        if isinstance(cause, ApiConnectionError):
            return False, (
                f"cannot reach the LazyCloud control plane at {endpoint_in_use()} "
                f"({cause.reason}); check the network, or LAZYCLOUD_ENDPOINT"
            )
    for cause in chain:
        if isinstance(cause, ApiError):
            if cause.status_code in (401, 403):
                return True, (
                    f"the LazyCloud control plane refused the credentials "
                    f"(HTTP {cause.status_code}: {_one_line(cause.message)}); {LOGIN_HINT}"
                )
            return False, f"the LazyCloud control plane answered {_one_line(cause)}"
    return False, f"{type(error).__name__}: {_one_line(error)}"


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _one_line(error: object) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= 500 else text[:497] + "..."

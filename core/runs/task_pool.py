"""Running many tasks at once, and stopping them when the user asks.

:class:`StopRequest` is how an interrupt reaches every run of a batch: once it is
made, no run starts a planner call, an attempt or a sandbox, and the sandboxes
running are stopped (a run listens with :meth:`StopRequest.listen`).
:func:`run_tasks` runs a batch's tasks in worker threads and, on the first Ctrl-C
or SIGTERM, makes the request, waits a few seconds for the running tasks to end
(their results are kept), and gives up on those still waiting on a planner; a
second signal ends the wait at once.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from ..errors import Interrupted

#: What :func:`run_tasks` runs, and what each task gives.
Job = TypeVar("Job")
Done = TypeVar("Done")

#: How long an interrupted batch waits for its running tasks: their sandboxes are stopped
#: at once, so only a task waiting on a planner call (bounded by --provider-timeout) takes
#: longer; that one is given up, and ``--resume`` runs it again.
GRACE_SECONDS = 5.0


class StopRequest:
    """A request to stop, shared by a batch and its runs (or by one run)."""

    def __init__(self) -> None:
        self._made = threading.Event()
        self._lock = threading.Lock()
        self._listeners: set[threading.Event] = set()

    def is_set(self) -> bool:
        return self._made.is_set()

    def request(self) -> None:
        """Make the request: every run listening is told at once (its ``stop`` is set)."""
        with self._lock:
            self._made.set()
            listeners = list(self._listeners)
        for event in listeners:
            event.set()

    @contextlib.contextmanager
    def listen(self, stop: threading.Event) -> Iterator[None]:
        """Set ``stop`` when the request is made (at once if it was made already)."""
        with self._lock:
            if self._made.is_set():
                stop.set()
            self._listeners.add(stop)
        try:
            yield
        finally:
            with self._lock:
                self._listeners.discard(stop)


def run_tasks(
    tasks: Sequence[Job],
    run_one: Callable[[Job], Done],
    *,
    jobs: int,
    started: Callable[[Job], None],
    finished: Callable[[Done], None],
    interrupted: Callable[[int], None],
    stop: StopRequest | None = None,
    gave_up: Callable[[int], None] | None = None,
    grace_seconds: float = GRACE_SECONDS,
) -> None:
    """Run ``tasks``, at most ``jobs`` at once, calling ``finished`` as each ends.

    Tasks and results may be of any type: ``agent swebench evaluate`` runs its
    instances through it too.

    On Ctrl-C (``KeyboardInterrupt``, which SIGTERM raises too) no further task
    starts and ``stop`` is requested, which stops the runs that listen to it (pass
    it to :func:`~.orchestrator.run`). ``interrupted`` is told how many tasks are
    running; they are waited for at most ``grace_seconds`` (a second Ctrl-C ends the
    wait at once), ``gave_up`` is told how many still run then, and the
    ``KeyboardInterrupt`` is raised again. The threads of tasks given up on are
    daemons: they end with the process. A task whose ``run_one`` raises
    :class:`~.errors.Interrupted` (a run the request stopped) has no result:
    ``finished`` is not called for it.
    """
    request = stop or StopRequest()
    waiting: queue.SimpleQueue[Job] = queue.SimpleQueue()
    for task in tasks:
        waiting.put(task)
    running = [0]
    failures: list[BaseException] = []
    changed = threading.Condition()

    def work() -> None:
        while not request.is_set():
            try:
                task = waiting.get_nowait()
            except queue.Empty:
                return
            with changed:
                running[0] += 1
            try:
                started(task)
                finished(run_one(task))
            except Interrupted:
                pass  # stopped by the request: no result, --resume runs it again
            except BaseException as error:  # a bug: the batch stops and the main thread raises it
                failures.append(error)
                request.request()
            finally:
                with changed:
                    running[0] -= 1
                    changed.notify_all()

    threads = [
        threading.Thread(target=work, name=f"agent-batch-{number}", daemon=True)
        for number in range(max(1, min(jobs, len(tasks))))
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
        if failures:
            raise failures[0]
    except KeyboardInterrupt:
        request.request()
        with changed:
            still = running[0]
        if still:
            interrupted(still)
            left = _wait(threads, running, changed, grace_seconds)
            if left and gave_up is not None:
                gave_up(left)
        raise


def _wait(
    threads: Sequence[threading.Thread],
    running: list[int],
    changed: threading.Condition,
    grace_seconds: float,
) -> int:
    """Wait for the running tasks, at most ``grace_seconds``; how many still run."""
    deadline = time.monotonic() + grace_seconds
    try:
        with changed:
            while running[0] and time.monotonic() < deadline:
                changed.wait(min(0.2, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:
        pass  # the second signal: at once
    return running[0]

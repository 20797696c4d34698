"""Stopping sandboxes the agent left behind, and finding one whose create's answer was lost.

Used by the runner (before its first sandbox, it stops those of the ledger whose
agent process is gone) and by ``agent lazycloud sandboxes [stop]``. Every ID
that reaches the control plane from here has the shape of a sandbox ID (a UUID)
and goes only to the SDK's stop call.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import AgentWarning, SandboxError

from .ledger import Entry, Ledger, sandbox_id_shape
from .names import APP_SLUG, SANDBOX_NAME
from .remote import Deadlines, retried, translated

#: Slack on the clocks when matching a lost create to the sandboxes created meanwhile.
CLOCK_SLACK_SECONDS = 5.0


@attrs.frozen
class Where:
    """The control plane and workspace the SDK talks to, and its client."""

    endpoint: str
    workspace: str
    client: Any = attrs.field(eq=False, repr=False)

    @classmethod
    def current(cls) -> Where:
        from lazycloud.control import (
            require_workspace,
            resolve_control_client_config,
            workloads_client,
        )

        config = resolve_control_client_config()
        return cls(config.endpoint, require_workspace(config), workloads_client(config))

    def holds(self, entry: Entry) -> bool:
        return (entry.endpoint, entry.workspace) == (self.endpoint, self.workspace)


def stop_sandbox(where: Where, sandbox_id: str, deadlines: Deadlines) -> bool:
    """Stop ``sandbox_id``; whether it was still there (a 404 means it is gone already)."""
    from lazycloud.clients.api import ApiError

    container = uuid.UUID(sandbox_id_shape(sandbox_id))
    try:
        retried(
            lambda: where.client.api.stop_container(where.workspace, container),
            deadlines.call,
            f"stopping {sandbox_id}",
        )
    except ApiError as error:
        if error.status_code == 404:
            return False
        raise
    return True


def running_rows(where: Where, deadlines: Deadlines, limit: int = 1000) -> list[Any]:
    """The app's sandboxes of ``test-patch`` the control plane lists, newest first."""

    def listing() -> list[Any]:
        rows: list[Any] = []
        cursor: str | None = None
        while len(rows) < limit:
            page = where.client.list_sandboxes(
                app=APP_SLUG, limit=min(1000, limit - len(rows)), cursor=cursor
            )
            rows.extend(page.sandboxes)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        return rows

    rows = retried(listing, deadlines.call, "listing the sandboxes")
    return [row for row in rows if row.name == SANDBOX_NAME]


def created_meanwhile(
    where: Where,
    deadlines: Deadlines,
    release_id: str,
    since: float,
    until: float,
    known: Iterable[str],
) -> list[str]:
    """The running sandboxes of ``release_id`` created between ``since`` and ``until``
    (seconds since the epoch, with :data:`CLOCK_SLACK_SECONDS`) that no ledger entry names:
    what a create whose answer was lost may have made."""
    taken = set(known)
    found = []
    for row in running_rows(where, deadlines):
        created = row.created_at.timestamp()
        if (
            str(row.release_id) == release_id
            and row.stopped_at is None
            and since - CLOCK_SLACK_SECONDS <= created <= until + CLOCK_SLACK_SECONDS
            and str(row.id) not in taken
        ):
            found.append(str(row.id))
    return found


def known_ids(ledger: Ledger) -> set[str]:
    """The sandboxes the ledger names, and those this process's creates were answered with
    (a moment before the ledger names them)."""
    noted = {entry.sandbox_id for entry in ledger.entries() if entry.sandbox_id is not None}
    return noted | creates.answered()


def others_creating(
    ledger: Ledger, run_id: str, release_id: str, since: float, until: float
) -> bool:
    """Whether another agent process's entry was creating a sandbox of ``release_id``
    then, so that a sandbox created meanwhile may be its (and cannot be told apart).
    This process's own creates are told apart by :data:`creates`."""
    return any(
        entry.run_id != run_id
        and entry.pid != os.getpid()
        and entry.sandbox_id is None
        and entry.release_id == release_id
        and since - CLOCK_SLACK_SECONDS <= entry.created_at <= until + CLOCK_SLACK_SECONDS
        for entry in ledger.entries()
    )


class Creates:
    """This process's sandbox creates: how many are in flight, and the IDs they were
    answered with, so that a create whose answer was lost is never matched to a
    sibling thread's sandbox."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._in_flight = 0
        self._answered: set[str] = set()

    def send(self, create: Callable[[], Any]) -> Any:
        with self._changed:
            self._in_flight += 1
        try:
            response = create()
            with self._changed:
                self._answered.add(str(response.id))
            return response
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def settle(self, seconds: float) -> None:
        """Wait (at most ``seconds``) until no create of this process is in flight."""
        with self._changed:
            self._changed.wait_for(lambda: self._in_flight == 0, timeout=seconds)

    def answered(self) -> set[str]:
        with self._changed:
            return set(self._answered)

    def claim(self, candidates: Iterable[str]) -> str | None:
        """The first of ``candidates`` no create of this process has (claiming it), if any:
        two threads whose answers were both lost each take one of the sandboxes made."""
        with self._changed:
            for candidate in candidates:
                if candidate not in self._answered:
                    self._answered.add(candidate)
                    return candidate
        return None


creates = Creates()


@attrs.frozen
class Stopped:
    """What a sweep did with one entry of the ledger."""

    run_id: str
    sandbox_ids: tuple[str, ...]
    note: str


def stop_entries(
    ledger: Ledger, deadlines: Deadlines, which: Callable[[Entry], bool]
) -> list[Stopped]:
    """Stop the sandboxes of the ledger's entries ``which`` selects (in this workspace),
    and forget those entries; what was done. An entry whose create's answer was lost is
    matched to the sandbox created meanwhile of its release, if exactly one fits."""
    with translated(SandboxError, "stopping the sandboxes of the ledger"):
        where = Where.current()
        entries = [entry for entry in ledger.entries() if which(entry)]
        done = []
        for entry in entries:
            if not where.holds(entry):
                continue
            if entry.sandbox_id is not None:
                ids = [entry.sandbox_id]
                note = "stopped"
            elif entry.release_id is not None:
                since, until = entry.created_at, entry.created_at + deadlines.call
                ids = created_meanwhile(
                    where, deadlines, entry.release_id, since, until, known_ids(ledger)
                )
                if ids and others_creating(ledger, entry.run_id, entry.release_id, since, until):
                    ids, note = [], "another create of its release was under way; none stopped"
                elif len(ids) > 1:  # another agent's too: leave them (each stops once idle)
                    ids, note = [], "several sandboxes match its create; none stopped"
                else:
                    note = "its create's sandbox stopped" if ids else "its create made none"
            else:
                ids, note = [], "it never reached a create"
            stopped = [each for each in ids if stop_sandbox(where, each, deadlines)]
            if not stopped and ids:
                note = "gone already"
            ledger.forget(entry.run_id)
            done.append(Stopped(entry.run_id, tuple(ids), note))
        return done


_swept = threading.Lock()
_swept_ids: set[str] = set()


def sweep_once(ledger: Ledger, deadlines: Deadlines) -> None:
    """Once per process and ledger, before the first sandbox: stop the sandboxes whose agent
    process is gone (killed before it could stop them). Never fails the run: a sandbox
    that cannot be stopped now is warned about and stays in the ledger."""
    with _swept:
        if str(ledger.folder) in _swept_ids:
            return
        _swept_ids.add(str(ledger.folder))
        if not any(not entry.agent_alive() for entry in ledger.entries()):
            return
        started = time.monotonic()
        try:
            done = stop_entries(ledger, deadlines, lambda entry: not entry.agent_alive())
        except Exception as error:
            warnings.warn(
                f"could not stop the sandboxes left by agents that are gone ({error}); "
                "`agent lazycloud sandboxes stop --stale` stops them",
                AgentWarning,
                stacklevel=2,
            )
            return
        stopped = [sandbox_id for item in done for sandbox_id in item.sandbox_ids]
        if stopped:
            warnings.warn(
                f"stopped {len(stopped)} LazyCloud sandbox(es) left running by an agent that "
                f"is gone: {', '.join(stopped)} ({time.monotonic() - started:.1f} s)",
                AgentWarning,
                stacklevel=2,
            )

"""The ``lazycloud`` runner: one ``test-patch`` sandbox per run, terminated whatever happens.

A run: find the sandbox's release (one per definition, see :mod:`.releases`),
note the sandbox in the ledger (:mod:`.ledger`), create the container and wait
until it is ready, note its ID, upload the seed files with the replacement
(nothing else), run the seed's test command in the folder holding them, and
terminate the sandbox in a ``finally``: after a pass, a failure, a timeout, an
upload error, Ctrl-C or a stop request (``run_test_until``); then forget it.
Every wait has its own deadline (:mod:`.remote`), and transient failures of
calls that may be repeated are retried within it; a sandbox created while the
agent stopped waiting is terminated as soon as its ID is known. Before its
first sandbox, a process stops those of the ledger whose agent is gone.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.core.output import BoundedOutput

from .ledger import Entry, Ledger, this_process
from .names import SANDBOX_NAME
from .remote import (
    FIRST_RETRY_PAUSE,
    Deadlines,
    Stopped,
    bounded,
    endpoint_in_use,
    is_transient,
    never_sent,
    pause_before_retry,
    retried,
    translated,
)

#: Where the seed's files go in the sandbox, and where the test runs.
WORKDIR = "/workspace/seed"
#: Where the harness's files, its settings and its report go (outside the seed's folder).
HARNESS_DIR = "/workspace/.harness"
#: The same, as the harness sees it from :data:`WORKDIR` (its paths are relative).
HARNESS_FROM_WORKDIR = "../.harness"
#: The most of the harness's report the agent downloads.
MAX_REPORT_BYTES = 8 * 1024 * 1024
#: The most a stopped test's output is waited for before its sandbox is terminated.
STOPPED_OUTPUT_SECONDS = 2.0


@attrs.frozen
class LazyCloudRunner:
    """Runs the test in a LazyCloud sandbox: no network, no secrets, no environment, no ports.

    The sandbox's image holds the seed's Python (the agent's own for a seed
    without a runtime) and the seed's requirements, and nothing else. A seed whose
    runtime has ``project = true`` is refused. A stoppable runner: ``run_test_until``
    terminates the sandbox within a fraction of a second of its stop event.
    """

    name: str = "lazycloud"
    description: str = (
        "a LazyCloud sandbox (test-patch): network blocked, no secrets, 1 CPU, 512 MiB; "
        "its image holds the seed's Python and requirements only"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        return self._test(job, None)

    def run_test_until(self, job: SandboxJob, stop: threading.Event) -> SandboxOutcome:
        """``run_test``, with the sandbox terminated once ``stop`` is set."""
        return self._test(job, stop)

    def _test(self, job: SandboxJob, stop: threading.Event | None) -> SandboxOutcome:
        from .app import test_patch_sandbox
        from .sandboxes import sweep_once

        if job.runtime is not None and job.runtime.project:
            # The project's folder would have to be on the image's sys.path, which only an
            # image build command could arrange, unseen and untested here.
            raise SandboxError(
                "the LazyCloud runner cannot test a seed whose [runtime] has project = true "
                "(the project under test on the sandbox's import path); "
                "run it with the local sandbox (--runner local)"
            )
        if job.tree is not None:
            # The tree would have to reach the sandbox as an upload of every file, which is
            # what a git seed's read-only tree exists to avoid.
            raise SandboxError(
                f"the LazyCloud runner cannot test a git seed (commit {job.tree.commit[:12]} "
                f"of {job.tree.repository}) yet; run it with the local sandbox (--runner local)"
            )
        deadlines = Deadlines.from_environment(self.environ)
        ledger = Ledger.of(self.environ)
        started = time.monotonic()
        sandbox = _Sandbox(test_patch_sandbox(job.runtime), deadlines, ledger, stop, self.environ)
        if stop is not None and stop.is_set():
            return sandbox.stopped(started)
        sweep_once(ledger, deadlines)
        try:
            sandbox.create(job.limits.test_timeout_seconds)
            sandbox.upload(job.files, read_only=_fixed_files(job))
            if job.harness is not None:
                sandbox.upload_harness(job)
            return sandbox.test(job, started)
        except Stopped:
            return sandbox.stopped(started)
        finally:
            sandbox.terminate()


class _Sandbox:
    """One sandbox's life, with the ID known as soon as the control plane gives it."""

    def __init__(
        self,
        definition: Any,
        deadlines: Deadlines,
        ledger: Ledger,
        stop: threading.Event | None,
        environ: Mapping[str, str],
    ) -> None:
        self.definition = definition
        self.deadlines = deadlines
        self.ledger = ledger
        self.stop = stop
        self.environ = environ
        self.instance: Any = None
        self.entry: Entry | None = None
        # A create in flight: its answer, once the control plane gave it.
        self.pending: list[Any] = []
        self.flights: list[threading.Event] = []  # set once each create attempt returned
        # A create failed in a way that may have made a sandbox nobody could find yet:
        # its ledger entry stays, for the next run to look for it.
        self.maybe_created = False
        # Until the control plane names the sandbox, errors name this run.
        self.run_id = f"lazycloud-{uuid.uuid4().hex[:12]}"

    @property
    def sandbox_id(self) -> str:
        return str(self.instance.container_id) if self.instance is not None else self.run_id

    def _translated(self, doing: str) -> Any:
        return translated(SandboxError, doing, sandbox_id=self.sandbox_id)

    def stopped(self, started: float, output: str = "") -> SandboxOutcome:
        """The outcome of a sandbox stopped before its test ended (or began)."""
        return SandboxOutcome(
            runner="lazycloud",
            sandbox_id=self.sandbox_id,
            exit_code=None,
            output=output,
            duration_seconds=round(time.monotonic() - started, 3),
        )

    def release(self) -> tuple[str, str]:
        """The release to create the sandbox from, and its definition's content hash."""
        from . import releases

        definition, deadlines = self.definition, self.deadlines
        with self._translated(f"preparing the {SANDBOX_NAME} sandbox (its image and release)"):
            workspace = definition.control_client.workspace
            key = releases.definition_key(definition, endpoint_in_use(), workspace)
            definition.metadata = {**definition.metadata, releases.METADATA_KEY: key}
            release = releases.release_for(
                key,
                lambda: retried(
                    definition.prepare, deadlines.start, f"preparing {SANDBOX_NAME}", stop=self.stop
                ),
                self.environ,
            )
        return release, key

    def create(self, test_timeout: float) -> None:
        from lazycloud.abstractions.sandbox import SandboxInstance
        from lazycloud.clients.api import ApiError

        from . import releases

        definition, deadlines = self.definition, self.deadlines
        release, key = self.release()
        now = time.time()
        self.entry = Entry(
            run_id=self.run_id,
            created_at=now,
            # Past this, nobody is using the sandbox even if its agent still runs.
            stale_after=now + deadlines.start + test_timeout + 6 * deadlines.call + 60,
            endpoint=endpoint_in_use(),
            workspace=definition.control_client.workspace,
            release_id=release,
            **this_process(),
        )
        self.ledger.note(self.entry)  # before the create: a sandbox is never unknown
        with self._translated(f"creating the {SANDBOX_NAME} sandbox"):
            try:
                response = self._create(release)
            except ApiError as error:
                if error.status_code != 404:
                    raise
                # The control plane no longer has the release it was given: make a new one.
                releases.forget(key, release, self.environ)
                release, key = self.release()
                self.entry = attrs.evolve(self.entry, release_id=release)
                self.ledger.note(self.entry)
                response = self._create(release)
        self.ledger.note(attrs.evolve(self.entry, sandbox_id=str(response.id)))
        self.instance = SandboxInstance(
            container_id=str(response.id),
            stub_id=release,
            client=definition.control_client,
        )
        with self._translated(f"waiting for sandbox {self.sandbox_id} to be ready"):
            retried(
                lambda: definition.connect(self.sandbox_id, timeout_seconds=deadlines.start),
                deadlines.start + deadlines.call,
                f"sandbox {self.sandbox_id} to be ready",
                stop=self.stop,
            )

    def _create(self, release: str) -> Any:
        """The create's answer (or the sandbox it made, found again after its answer was
        lost). A create is sent again only when it certainly did not reach the control
        plane; when it may have, the sandboxes created meanwhile are looked at first."""
        from lazycloud.contracts.api import CreateInstanceRequest

        from .sandboxes import creates

        client = self.definition.control_client
        request = CreateInstanceRequest(release_id=uuid.UUID(release))
        deadline = time.monotonic() + self.deadlines.call

        def create_container() -> Any:
            settled = threading.Event()
            self.flights.append(settled)
            try:
                response = creates.send(lambda: client.create_instance(request))
                self.pending.append(response)
                return response
            finally:
                settled.set()

        def left() -> float:
            return max(deadline - time.monotonic(), 0.001)

        pause = FIRST_RETRY_PAUSE
        while True:
            sent = time.time()
            try:
                return retried(
                    create_container,
                    left(),
                    f"creating {SANDBOX_NAME}",
                    stop=self.stop,
                    again=lambda error: is_transient(error) and never_sent(error),
                )
            except Stopped:
                raise
            except Exception as error:
                if not is_transient(error) or time.monotonic() >= deadline:
                    if is_transient(error) and not never_sent(error):
                        self.maybe_created = True
                    raise
            # The answer was lost: look before creating again, so that no sandbox is
            # made twice or left unknown.
            self.maybe_created = True
            creates.settle(left())  # every sibling's create claims its sandbox first
            if self.pending:  # the answer came after all
                return self.pending[0]
            made = retried(
                partial(self._created_since, release, sent),
                left(),
                "looking for the sandbox a lost create made",
                stop=self.stop,
            )
            claimed = creates.claim(made)
            if claimed is not None:
                self.maybe_created = False
                return _Made(claimed, release)
            self.maybe_created = False
            pause = pause_before_retry(pause, self.stop, f"creating {SANDBOX_NAME}")

    def _created_since(self, release: str, sent: float) -> list[str]:
        """The sandboxes of ``release`` created since ``sent`` that no one claims.

        :raises SandboxError: another agent was creating one meanwhile: which is whose
            cannot be told, and none is used (each stops once idle).
        """
        from .sandboxes import Where, created_meanwhile, known_ids, others_creating

        now, where, known = time.time(), Where.current(), known_ids(self.ledger)
        made = created_meanwhile(where, self.deadlines, release, sent, now, known)
        if made and others_creating(self.ledger, self.run_id, release, sent, now):
            raise SandboxError(
                f"creating the {SANDBOX_NAME} sandbox: its answer was lost, and another "
                f"agent was creating one of the same release meanwhile; none of "
                f"{', '.join(made)} is used (each stops once idle)",
                sandbox_id=self.sandbox_id,
            )
        return made

    def upload(self, files: Mapping[str, bytes], read_only: frozenset[str] = frozenset()) -> None:
        """Put each file under :data:`WORKDIR` (the control plane makes the folders); the
        ``read_only`` ones (the tests) without write permission."""
        client, container = self.instance.client, uuid.UUID(self.sandbox_id)
        with self._translated(f"uploading the seed files to sandbox {self.sandbox_id}"):
            for path, data in files.items():
                target = f"{WORKDIR}/{path}"
                mode = 0o444 if path in read_only else 0o644
                upload = partial(client.upload_file, container, target, data, mode=mode)
                retried(upload, self.deadlines.call, f"uploading {path}", stop=self.stop)

    def upload_harness(self, job: SandboxJob) -> None:
        """Put the harness and its settings (the report's key among them) in the sandbox.

        The harness reads the settings and deletes them before any seed code runs, and
        writes its signed report to a file the agent downloads once the test has ended.
        """
        from sandboxed_coding_agent.core import harness
        from sandboxed_coding_agent.core.verdicts import verdict

        client, container = self.instance.client, uuid.UUID(self.sandbox_id)
        settings = verdict.harness_settings(
            job,
            list(job.test_command),
            -1,
            # The seed's folder and the temporary folders; the image's Python may be
            # writable too (a container's root), which the guard's write-code rule covers.
            writable=(".", "/tmp", "/var/tmp", "/dev/shm"),  # noqa: S108 - the sandbox's own
            report_path=f"{HARNESS_FROM_WORKDIR}/report",
        )
        files = {**harness.files(), "setup.json": settings}
        with self._translated(f"uploading the test harness to sandbox {self.sandbox_id}"):
            for name, data in files.items():
                upload = partial(
                    client.upload_file, container, f"{HARNESS_DIR}/{name}", data, mode=0o644
                )
                retried(
                    upload, self.deadlines.call, f"uploading the harness's {name}", stop=self.stop
                )

    def report(self) -> str:
        """What the harness wrote to its report; empty when there is none to read."""
        client, container = self.instance.client, uuid.UUID(self.sandbox_id)
        try:
            content = retried(
                partial(client.download_file, container, f"{HARNESS_DIR}/report"),
                self.deadlines.call,
                "reading the harness's report",
            )
        except Exception:  # no report (the test removed it, or it never started): missing
            return ""
        data = bytes(content.data[: MAX_REPORT_BYTES + 1])
        # A report the control plane cut is no report: an unsigned last line says so.
        tail = "\nthe report was cut\n" if content.truncated else ""
        return data.decode("utf-8", errors="replace") + tail

    def test(self, job: SandboxJob, started: float) -> SandboxOutcome:
        from lazycloud.abstractions.sandbox import SandboxProcessTimeoutError

        timeout = job.limits.test_timeout_seconds
        manager = self.instance.process
        command = list(job.test_command)
        if job.harness is not None:
            # The harness runs the test command (or the framework) and reports; it is the
            # sandbox's interpreter either way.
            command = ["python", "-I", "-B", f"{HARNESS_DIR}/main.py", "--setup-file"]
            command.append(f"{HARNESS_DIR}/setup.json")
        with self._translated(f"starting the test in sandbox {self.sandbox_id}"):
            # Not retried by the agent: a second start would run the test twice (the SDK
            # retries it only where it knows the first never started).
            process = bounded(
                lambda: manager.exec(*command, cwd=WORKDIR),
                self.deadlines.call,
                "starting the test",
                self.stop,
            )
        timed_out = False
        response = None
        with self._translated(f"running the test in sandbox {self.sandbox_id}"):
            try:
                response = bounded(
                    lambda: process.result(timeout),
                    timeout + self.deadlines.call,
                    "the test",
                    self.stop,
                )
            except SandboxProcessTimeoutError:
                timed_out = True
            except Stopped:
                # As far as it got: what it printed, then the sandbox is terminated.
                so_far = BoundedOutput(job.limits.max_output_bytes)
                so_far.feed(self._output_so_far(process, STOPPED_OUTPUT_SECONDS))
                return self.stopped(started, so_far.text())
        output = BoundedOutput(job.limits.max_output_bytes)
        if response is not None:
            output.feed(response.stdout.encode("utf-8", errors="replace"))
            output.feed(response.stderr.encode("utf-8", errors="replace"))
            clipped = response.stdout_truncated or response.stderr_truncated
        else:
            output.feed(self._output_so_far(process))
            clipped = False
        exit_code = None if timed_out or response is None else response.exit_code
        if exit_code is not None and exit_code < 0:
            exit_code = None  # the SDK's -1: the process gave no exit code
        text = output.text()
        if clipped:
            text += "\n[output truncated by LazyCloud]\n"
        report = self.report() if job.harness is not None else None
        return SandboxOutcome(
            runner="lazycloud",
            sandbox_id=self.sandbox_id,
            exit_code=exit_code,
            output=text,
            output_truncated=output.truncated or clipped,
            timed_out=timed_out,
            duration_seconds=round(time.monotonic() - started, 3),
            limit_hit="timeout" if timed_out else None,
            report=report,
        )

    def _output_so_far(self, process: Any, seconds: float = 10.0) -> bytes:
        """What a test stopped at its timeout had printed, if the control plane still says."""
        try:
            text = bounded(
                lambda: process.stdout.read() + process.stderr.read(),
                min(seconds, self.deadlines.call),
                "reading the output",
            )
        except Exception:
            return b""
        return str(text).encode("utf-8", errors="replace")

    def terminate(self) -> None:
        """Stop the sandbox, whatever state the run left it in, and forget it once stopped;
        never raises (a sandbox that could not be stopped stays in the ledger)."""
        self._wait_for_creates()
        made = [self.instance] if self.instance is not None else []
        known = {str(self.instance.container_id)} if self.instance is not None else set()
        for response in self.pending:  # answers that came after the agent stopped waiting
            if str(response.id) not in known:
                known.add(str(response.id))
                made.append(_late_instance(self.definition, response))
        if self.instance is None and made:
            self.instance = made[0]
        stopped = all([self._terminate(instance) for instance in made])
        if self.entry is not None and stopped and (made or not self.maybe_created):
            self.ledger.forget(self.run_id)

    def _wait_for_creates(self) -> None:
        """Let a create still in flight answer (within the call deadline), so that the
        sandbox it makes is stopped now rather than left to the next run."""
        deadline = time.monotonic() + self.deadlines.call
        for settled in list(self.flights):
            settled.wait(max(deadline - time.monotonic(), 0))

    def _terminate(self, instance: Any) -> bool:
        sandbox_id = str(instance.container_id)
        try:
            retried(instance.terminate, self.deadlines.call, f"stopping {sandbox_id}")
        except BaseException as error:
            if _gone(error):
                return True
            import warnings

            from sandboxed_coding_agent.core.errors import AgentWarning

            warnings.warn(
                f"sandbox {sandbox_id} could not be stopped ({type(error).__name__}: "
                f"{error}); LazyCloud stops it once idle, or stop it with "
                f"`agent lazycloud sandboxes stop {sandbox_id}`",
                AgentWarning,
                stacklevel=3,
            )
            if isinstance(error, KeyboardInterrupt):
                raise
            return False
        return True


@attrs.frozen
class _Made:
    """A sandbox found again after its create's answer was lost."""

    id: str
    release_id: str


def _gone(error: BaseException) -> bool:
    """Whether a stop failed because the control plane no longer knows the sandbox."""
    from lazycloud.clients.api import ApiError

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ApiError):
            return seen.status_code == 404
        seen = seen.__cause__
    return False


def _late_instance(definition: Any, response: Any) -> Any:
    from lazycloud.abstractions.sandbox import SandboxInstance

    return SandboxInstance(
        container_id=str(response.id),
        stub_id=str(response.release_id),
        client=definition.control_client,
    )


def _fixed_files(job: SandboxJob) -> frozenset[str]:
    """The files the test may not change: every one that is not editable."""
    if job.harness is None:
        return frozenset()
    editable = set(job.harness.editable)
    return frozenset(path for path in job.files if path not in editable)

"""The ``lazycloud`` runner: one ``test-patch`` sandbox per run, terminated whatever happens.

A run: prepare the sandbox's release (its image built from the seed's
runtime), create the container and wait until it is ready, upload the seed
files with the replacement (nothing else), run the seed's test command in the
folder holding them, and terminate the sandbox in a ``finally``: after a pass,
a failure, a timeout, an upload error or Ctrl-C. Every wait has its own
deadline (:mod:`.remote`); a sandbox created while the agent stopped waiting
is terminated as soon as its ID is known.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.core.output import BoundedOutput

from .names import SANDBOX_NAME
from .remote import Deadlines, bounded, translated

#: Where the seed's files go in the sandbox, and where the test runs.
WORKDIR = "/workspace/seed"
#: Where the harness's files, its settings and its report go (outside the seed's folder).
HARNESS_DIR = "/workspace/.harness"
#: The same, as the harness sees it from :data:`WORKDIR` (its paths are relative).
HARNESS_FROM_WORKDIR = "../.harness"
#: The most of the harness's report the agent downloads.
MAX_REPORT_BYTES = 8 * 1024 * 1024


@attrs.frozen
class LazyCloudRunner:
    """Runs the test in a LazyCloud sandbox: no network, no secrets, no environment, no ports.

    The sandbox's image holds the seed's Python (the agent's own for a seed
    without a runtime) and the seed's requirements, and nothing else. A seed whose
    runtime has ``project = true`` is refused.
    """

    name: str = "lazycloud"
    description: str = (
        "a LazyCloud sandbox (test-patch): network blocked, no secrets, 1 CPU, 512 MiB; "
        "its image holds the seed's Python and requirements only"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        from .app import test_patch_sandbox

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
        definition = test_patch_sandbox(job.runtime)
        started = time.monotonic()
        sandbox = _Sandbox(definition, deadlines)
        try:
            sandbox.create()
            sandbox.upload(job.files, read_only=_fixed_files(job))
            if job.harness is not None:
                sandbox.upload_harness(job)
            return sandbox.test(job, started)
        finally:
            sandbox.terminate()


class _Sandbox:
    """One sandbox's life, with the ID known as soon as the control plane gives it."""

    def __init__(self, definition: Any, deadlines: Deadlines) -> None:
        self.definition = definition
        self.deadlines = deadlines
        self.instance: Any = None
        self.pending: list[Any] = []  # a creation the agent stopped waiting for
        # Until the control plane names the sandbox, errors name this run.
        self.run_id = f"lazycloud-{uuid.uuid4().hex[:12]}"

    @property
    def sandbox_id(self) -> str:
        return str(self.instance.container_id) if self.instance is not None else self.run_id

    def _translated(self, doing: str) -> Any:
        return translated(SandboxError, doing, sandbox_id=self.sandbox_id)

    def create(self) -> None:
        from lazycloud.abstractions.sandbox import SandboxInstance
        from lazycloud.contracts.api import CreateInstanceRequest

        definition, deadlines = self.definition, self.deadlines
        with self._translated(f"preparing the {SANDBOX_NAME} sandbox (its image and release)"):
            release = bounded(definition.prepare, deadlines.start, f"preparing {SANDBOX_NAME}")
        request = CreateInstanceRequest(release_id=uuid.UUID(release))
        created: list[Any] = []

        def create_container() -> Any:
            response = definition.control_client.create_instance(request)
            created.append(response)
            return response

        self.pending = created
        with self._translated(f"creating the {SANDBOX_NAME} sandbox"):
            response = bounded(create_container, deadlines.call, f"creating {SANDBOX_NAME}")
        self.instance = SandboxInstance(
            container_id=str(response.id),
            stub_id=release,
            client=definition.control_client,
        )
        self.pending = []
        with self._translated(f"waiting for sandbox {self.sandbox_id} to be ready"):
            bounded(
                lambda: definition.connect(self.sandbox_id, timeout_seconds=deadlines.start),
                deadlines.start + deadlines.call,
                f"sandbox {self.sandbox_id} to be ready",
            )

    def upload(self, files: Mapping[str, bytes], read_only: frozenset[str] = frozenset()) -> None:
        """Put each file under :data:`WORKDIR` (the control plane makes the folders); the
        ``read_only`` ones (the tests) without write permission."""
        client, container = self.instance.client, uuid.UUID(self.sandbox_id)
        with self._translated(f"uploading the seed files to sandbox {self.sandbox_id}"):
            for path, data in files.items():
                target = f"{WORKDIR}/{path}"
                mode = 0o444 if path in read_only else 0o644
                upload = partial(client.upload_file, container, target, data, mode=mode)
                bounded(upload, self.deadlines.call, f"uploading {path}")

    def upload_harness(self, job: SandboxJob) -> None:
        """Put the harness and its settings (the report's key among them) in the sandbox.

        The harness reads the settings and deletes them before any seed code runs, and
        writes its signed report to a file the agent downloads once the test has ended.
        """
        from sandboxed_coding_agent.core import harness, verdict

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
                bounded(upload, self.deadlines.call, f"uploading the harness's {name}")

    def report(self) -> str:
        """What the harness wrote to its report; empty when there is none to read."""
        client, container = self.instance.client, uuid.UUID(self.sandbox_id)
        try:
            content = bounded(
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
            process = bounded(
                lambda: manager.exec(*command, cwd=WORKDIR),
                self.deadlines.call,
                "starting the test",
            )
        timed_out = False
        response = None
        with self._translated(f"running the test in sandbox {self.sandbox_id}"):
            try:
                response = bounded(
                    lambda: process.result(timeout), timeout + self.deadlines.call, "the test"
                )
            except SandboxProcessTimeoutError:
                timed_out = True
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

    def _output_so_far(self, process: Any) -> bytes:
        """What a test stopped at its timeout had printed, if the control plane still says."""
        try:
            text = bounded(
                lambda: process.stdout.read() + process.stderr.read(),
                min(10.0, self.deadlines.call),
                "reading the output",
            )
        except Exception:
            return b""
        return str(text).encode("utf-8", errors="replace")

    def terminate(self) -> None:
        """Stop the sandbox, whatever state the run left it in; never raises."""
        if self.instance is None and self.pending:
            response = self.pending[0]
            self.instance = _late_instance(self.definition, response)
        if self.instance is None:
            return
        try:
            bounded(self.instance.terminate, self.deadlines.call, f"stopping {self.sandbox_id}")
        except BaseException as error:
            import warnings

            from sandboxed_coding_agent.core.errors import AgentWarning

            warnings.warn(
                f"sandbox {self.sandbox_id} could not be stopped ({type(error).__name__}: "
                f"{error}); LazyCloud stops it once idle, or stop it with "
                "`agent lazycloud sandboxes` and the LazyCloud console",
                AgentWarning,
                stacklevel=2,
            )
            if isinstance(error, KeyboardInterrupt):
                raise


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

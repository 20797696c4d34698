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


@attrs.frozen
class LazyCloudRunner:
    """Runs the test in a LazyCloud sandbox: no network, no secrets, no environment, no ports.

    The sandbox's image holds the seed's Python (the agent's own for a seed
    without a runtime) and the seed's requirements, and nothing else.
    """

    name: str = "lazycloud"
    description: str = (
        "a LazyCloud sandbox (test-patch): network blocked, no secrets, 1 CPU, 512 MiB; "
        "its image holds the seed's Python and requirements only"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        from .app import test_patch_sandbox

        deadlines = Deadlines.from_environment(self.environ)
        definition = test_patch_sandbox(job.runtime)
        started = time.monotonic()
        sandbox = _Sandbox(definition, deadlines)
        try:
            sandbox.create()
            sandbox.upload(job.files)
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

    def upload(self, files: Mapping[str, bytes]) -> None:
        """Put each file under :data:`WORKDIR` (the control plane makes the folders)."""
        client, container = self.instance.client, uuid.UUID(self.sandbox_id)
        with self._translated(f"uploading the seed files to sandbox {self.sandbox_id}"):
            for path, data in files.items():
                target = f"{WORKDIR}/{path}"
                upload = partial(client.upload_file, container, target, data, mode=0o644)
                bounded(upload, self.deadlines.call, f"uploading {path}")

    def test(self, job: SandboxJob, started: float) -> SandboxOutcome:
        from lazycloud.abstractions.sandbox import SandboxProcessTimeoutError

        timeout = job.limits.test_timeout_seconds
        manager = self.instance.process
        with self._translated(f"starting the test in sandbox {self.sandbox_id}"):
            process = bounded(
                lambda: manager.exec(*job.test_command, cwd=WORKDIR),
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
        return SandboxOutcome(
            runner="lazycloud",
            sandbox_id=self.sandbox_id,
            exit_code=exit_code,
            output=text,
            output_truncated=output.truncated or clipped,
            timed_out=timed_out,
            duration_seconds=round(time.monotonic() - started, 3),
            limit_hit="timeout" if timed_out else None,
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

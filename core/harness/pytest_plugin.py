"""pytest under the guard: a plugin that tells the guard how each test ended.

Loaded by the harness inside the sandbox (see :mod:`.main`), never by the agent.
A test's outcome is the worst of its phases (setup, call, teardown), sent to the
guard's audit hook as an event (:mod:`.guard` says when it is believed); a
collection error is a violation of the run.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

EVENT = "sandboxed-coding-agent.test."
audit = sys.audit  # taken before any seed code runs


class Collector:
    """The plugin object handed to ``pytest.main``."""

    def pytest_sessionstart(self, session: Any) -> None:
        audit("sandboxed-coding-agent.snapshot")
        audit("sandboxed-coding-agent.protect", Collector)
        # Its hooks as they are now: a plugin the code under test registers later is seen.
        audit("sandboxed-coding-agent.plugins", session.config.pluginmanager)

    def pytest_collection_finish(self, session: Any) -> None:
        # Every test module is imported by now, and no test has run.
        audit("sandboxed-coding-agent.snapshot-tests")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
        audit(EVENT + "start", item, item.nodeid)
        yield
        audit(EVENT + "stop", item, item.nodeid)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item: Any) -> Any:
        # The innermost wrapper of the call: whatever it raises is seen here, before the
        # wrappers around it (capture, logging, skipping) could swallow it.
        made = yield
        if made.excinfo is not None:
            audit(EVENT + "raised", item, item.nodeid)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_pyfunc_call(self, pyfuncitem: Any) -> Any:
        # What pytest is about to call as the test: a test reported passed that never got
        # here (its call taken away) is not a pass.
        audit(EVENT + "calling", pyfuncitem, pyfuncitem.nodeid, pyfuncitem.obj)
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        made = yield
        report = made.get_result()
        excinfo = call.excinfo
        raised = excinfo.tb if excinfo is not None else None
        if report.passed and report.when == "call" and excinfo is None:
            outcome = "xpassed" if hasattr(report, "wasxfail") else "passed"
        elif report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.failed:
            outcome = "failed" if report.when == "call" else "error"
        else:
            return  # a setup or teardown that passed says nothing on its own
        duration = float(report.duration or 0.0)
        audit(EVENT + "outcome", item, item.nodeid, outcome, duration, raised)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            audit(EVENT + "error", report.nodeid or "<collection>")

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        audit(EVENT + "check")

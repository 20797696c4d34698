"""unittest under the guard: a runner whose result tells the guard how each test ended.

Loaded by the harness inside the sandbox (see :mod:`.main`), never by the agent.
Each outcome goes to the guard's audit hook as an event (:mod:`.guard` says
when it is believed); this module keeps nothing the code under test could use.
"""

from __future__ import annotations

import contextlib
import sys
import time
import unittest

#: The standard library's ``typing`` is imported by no framework run: annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENT = "sandboxed-coding-agent.test."
audit = sys.audit  # taken before any seed code runs
monotonic = time.monotonic


def watch_test_parts() -> None:
    """Tell the guard of a ``_ShouldStop`` a test part raises, which unittest swallows as
    if the part had passed (it is meant for ``subTest`` with ``failfast``): raised by the
    code under test, it would turn a failing test into a success."""
    from unittest import case as loaded

    case: Any = loaded  # its private names are not in the type stubs
    original = case._Outcome.testPartExecutor
    should_stop = case._ShouldStop

    # Its second argument is ``subTest`` from Python 3.11, ``isTest`` before: passed on as given.
    @contextlib.contextmanager
    def testPartExecutor(self: Any, test_case: Any, *args: Any, **kwargs: Any) -> Any:
        with original(self, test_case, *args, **kwargs):
            try:
                yield
            except should_stop as stop:
                audit(EVENT + "stop-raised", getattr(test_case, "id", str)(), stop.__traceback__)
                raise

    case._Outcome.testPartExecutor = testPartExecutor


def watch_test_calls() -> None:
    """Tell the guard what each test's own code raised and which function is called as the
    test, where unittest calls them (under unittest only: pytest's collector tells it for
    the cases pytest runs)."""
    from unittest import case

    for name in ("_callSetUp", "_callTestMethod", "_callTearDown"):
        setattr(case.TestCase, name, _raising_seen(getattr(case.TestCase, name)))


def _raising_seen(call: Any) -> Any:
    """``call`` (a ``TestCase`` method that runs the test's own code), telling the guard when
    that code raises: a test part that raised and is then reported a success was swallowed
    by something between the test and the framework (a patched context manager). For the
    test's method itself it also tells the guard what is about to be called, at the moment
    it is called (a method swapped on the test's class for the span of the test, and put
    back before any comparison, is seen there)."""
    method = call.__name__ == "_callTestMethod"

    def called(self: Any, *args: Any) -> Any:
        if method and args:
            audit(EVENT + "calling", self, self.id(), args[0])
        try:
            return call(self, *args)
        except BaseException:
            audit(EVENT + "raised", self, self.id())
            raise

    called.__name__ = called.__qualname__ = call.__name__
    return called


def runner_class() -> Any:
    """A ``TextTestRunner`` whose results report to the guard."""
    results: list[Any] = []
    watch_test_parts()
    watch_test_calls()

    class GuardedResult(unittest.TextTestResult):
        def startTestRun(self) -> None:
            # Every test module is imported by now, and no test has run.
            audit("sandboxed-coding-agent.snapshot-tests")
            super().startTestRun()

        def startTest(self, test: Any) -> None:
            audit(EVENT + "start", test, test.id())
            self._agent_started = monotonic()
            self._agent_current = test
            super().startTest(test)

        def _seconds(self) -> float:
            started = getattr(self, "_agent_started", None)
            return 0.0 if started is None else monotonic() - started

        def addSuccess(self, test: Any) -> None:
            super().addSuccess(test)
            audit(EVENT + "outcome", test, test.id(), "passed", self._seconds(), None)

        def addSkip(self, test: Any, reason: str) -> None:
            # From Python 3.12 a test skipped by its decorator is never started (but is
            # stopped): it starts here.
            current = getattr(self, "_agent_current", None)
            if current is not test and isinstance(test, unittest.TestCase):
                audit(EVENT + "start", test, test.id())
                self._agent_started = monotonic()
                self._agent_current = test
            super().addSkip(test, reason)
            raised = sys.exc_info()[2]
            audit(EVENT + "outcome", test, test.id(), "skipped", self._seconds(), raised)

        def addExpectedFailure(self, test: Any, err: Any) -> None:
            super().addExpectedFailure(test, err)
            audit(EVENT + "outcome", test, test.id(), "xfailed", self._seconds(), err[2])

        def addUnexpectedSuccess(self, test: Any) -> None:
            super().addUnexpectedSuccess(test)
            # unittest counts it as a failure of the run.
            audit(EVENT + "outcome", test, test.id(), "failed", self._seconds(), None)

        def addFailure(self, test: Any, err: Any) -> None:
            super().addFailure(test, err)
            audit(EVENT + "outcome", test, test.id(), "failed", self._seconds(), None)

        def addError(self, test: Any, err: Any) -> None:
            super().addError(test, err)
            # An error of a class or module fixture concerns no test under way.
            if isinstance(test, unittest.TestCase):
                audit(EVENT + "outcome", test, test.id(), "error", self._seconds(), None)
            else:
                audit(EVENT + "error", str(test))

        def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
            super().addSubTest(test, subtest, err)
            if err is not None:
                failed = issubclass(err[0], test.failureException)
                outcome = "failed" if failed else "error"
                audit(EVENT + "outcome", test, test.id(), outcome, self._seconds(), None)

        def stopTest(self, test: Any) -> None:
            super().stopTest(test)
            self._agent_current = None
            audit(EVENT + "stop", test, test.id())

        def stopTestRun(self) -> None:
            super().stopTestRun()
            audit(EVENT + "check")
            results.append(self)

    class GuardedRunner(unittest.TextTestRunner):
        resultclass = GuardedResult  # type: ignore[assignment]

    GuardedRunner.results = results  # type: ignore[attr-defined]
    return GuardedRunner

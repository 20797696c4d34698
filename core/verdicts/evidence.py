"""What the test framework reported, as the agent verified it: the evidence behind a verdict.

A run passes only when the test command exits 0 **and**, for a test command of
a framework the agent knows (``unittest``, ``pytest``), the framework reported
through the harness's signed report that it ran at least one test and that
none failed or errored, and the guard saw nothing refused. A test command of
no known framework is judged by its exit status alone, and the report says so
(``framework`` is ``None``).
"""

from __future__ import annotations

import attrs
from attrs import validators as v

#: How one test ended. ``failed`` and ``error`` fail a run; the others do not,
#: but a run needs at least one ``passed``.
TEST_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
#: How bad each outcome is, for a test reported more than once: it keeps its worst.
OUTCOME_RANKS = {"passed": 0, "xpassed": 1, "skipped": 1, "xfailed": 1, "failed": 2, "error": 2}
#: What became of the framework's report.
#:
#: * ``complete``: the framework ran to its end and reported.
#: * ``missing``: the test ended before the framework's report (an early exit, a
#:   ``SystemExit`` at import, an ``exec``, a signal, a timeout, a limit).
#: * ``aborted``: the framework stopped on an exception before its report.
#: * ``tampered``: the report was not the harness's (a line not signed with the
#:   run's key, out of order, or too large).
#: * ``exit-status``: no framework report is expected; the exit status decides.
REPORT_STATUSES = ("complete", "missing", "aborted", "tampered", "exit-status")
#: The test frameworks whose reports the harness reads.
FRAMEWORKS = ("unittest", "unittest-script", "pytest")
#: What a verdict rests on, weakest first (see :func:`evidence_tier`):
#:
#: * ``exit-status``: nothing but the test command's exit status, which code under
#:   test can fake (``os._exit(0)``).
#: * ``framework``: the framework's per-test report, signed by the harness, held to
#:   the trusted list, with the guard as a tripwire: code under test runs in the
#:   framework's process, so it is strong evidence, not a proof.
#: * ``output``: output tests, whose expected values never enter the sandbox and are
#:   compared by the agent outside it.
EVIDENCE_TIERS = ("exit-status", "framework", "output")
#: What the guard may refuse, and a seed's ``[guard] allow`` may name.
GUARD_CAPABILITIES = ("introspection", "native-code", "processes", "test-files", "write-code")


@attrs.frozen
class TestCaseResult:
    """One test the framework ran, and how it ended.

    :ivar id: the framework's name for it: a pytest node ID
        (``test_calc.py::test_add``) or a unittest dotted name
        (``check_calculator.AddTest.test_adds_two_numbers``).
    :ivar outcome: one of :data:`TEST_OUTCOMES`.
    :ivar seconds: how long it took, as the framework timed it.
    """

    __test__ = False  # not a pytest test class, whatever its name says

    id: str
    outcome: str = attrs.field(validator=v.in_(TEST_OUTCOMES))
    seconds: float = 0.0


@attrs.frozen
class GuardFinding:
    """Something the guard refused, or a change to the test framework it found.

    :ivar capability: one of :data:`GUARD_CAPABILITIES`, or ``framework``.
    :ivar event: the audit event (``sys._getframe``, ``open``...) or what changed.
    :ivar detail: what was asked for, shortened.
    """

    capability: str
    event: str
    detail: str = ""


def evidence_tier(
    report: TestReport | None, *, test_command: bool = True, output_tests: bool = False
) -> str:
    """The tier of :data:`EVIDENCE_TIERS` a verdict rests on: the weakest of what decided it
    (the test command, judged by its framework's report or its exit status, and the seed's
    output tests)."""
    tiers = []
    if test_command:
        tiers.append("exit-status" if report is None or report.framework is None else "framework")
    if output_tests:
        tiers.append("output")
    return min(tiers, key=EVIDENCE_TIERS.index) if tiers else "exit-status"


@attrs.frozen
class UnmetTest:
    """A test the trusted list needs that the run did not report as it must (see
    :mod:`~.trusted_tests`).

    :ivar id: the test, as the unpatched run reported it.
    :ivar outcome: how the run reported it, or ``missing`` when it did not.
    :ivar unpatched: how it ended in the unpatched seed.
    """

    __test__ = False

    id: str
    outcome: str
    unpatched: str


@attrs.frozen
class TestReport:
    """The evidence a verdict rests on.

    :ivar framework: ``unittest``, ``unittest-script`` (a script calling
        ``unittest.main``) or ``pytest``; ``None`` when the verdict rests on the
        exit status alone.
    :ivar status: one of :data:`REPORT_STATUSES`.
    :ivar tests: every test the framework reported, in the order they ended.
    :ivar guard: what the guard refused or found changed; any of it fails the run.
    :ivar detail: why the report is not ``complete``, for a person.
    :ivar needed: how many tests the trusted list (the unpatched seed's run) names;
        ``None`` when the verdict rests on no such list (a graded seed, whose lists
        are held to by its grade; no framework).
    :ivar unmet: the needed tests this run did not report as they must be: missing,
        or with an outcome the unpatched seed did not have and that is not ``passed``.
    :ivar list_partial: why the trusted list may lack tests (the unpatched seed could
        not load a test module, or its run did not end); ``None`` when complete.
    """

    __test__ = False

    framework: str | None
    status: str = attrs.field(validator=v.in_(REPORT_STATUSES))
    tests: tuple[TestCaseResult, ...] = ()
    guard: tuple[GuardFinding, ...] = ()
    detail: str | None = None
    needed: int | None = None
    unmet: tuple[UnmetTest, ...] = ()
    list_partial: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        """How many tests ended each way, for the outcomes that occurred."""
        found: dict[str, int] = {}
        for test in self.tests:
            found[test.outcome] = found.get(test.outcome, 0) + 1
        return found

    @property
    def passed(self) -> bool:
        """Whether the evidence supports a pass (the exit status is judged apart)."""
        if self.status == "exit-status":
            return True
        sound = (
            self.status == "complete"
            and not self.guard
            and not any(test.outcome in ("failed", "error") for test in self.tests)
        )
        if self.needed is None:
            return sound and any(test.outcome == "passed" for test in self.tests)
        # The list decides what a pass rests on; a test it does not name counts for
        # nothing, unless the list is partial and the run's own tests must carry it.
        rests_on = self.needed > 0 or (
            self.list_partial is not None and any(t.outcome == "passed" for t in self.tests)
        )
        return sound and not self.unmet and rests_on

    @property
    def summary(self) -> str:
        """One line: ``unittest reported 2 passed``, and why it is not a pass if it is not."""
        reason = self.reason if self.framework is not None else None
        return self.reported if reason is None else f"{self.reported}; not a pass: {reason}"

    @property
    def reported(self) -> str:
        """What the framework reported, ``unittest reported 2 passed, 1 failed``, and no more:
        for a graded run, which the seed's listed tests decide (see :mod:`~.grading`)."""
        if self.framework is None:
            return "the test command's exit status alone (no framework report)"
        counts = ", ".join(f"{n} {outcome}" for outcome, n in self.counts.items()) or "no test"
        said = f"{self.framework} reported {counts}"
        return said if self.status == "complete" else f"{said} ({self.status})"

    @property
    def reason(self) -> str | None:
        """Why the evidence does not support a pass, in a few words; ``None`` when it does."""
        if self.passed:
            return None
        if self.guard:
            named = sorted({finding.capability for finding in self.guard})
            return f"the guard refused the code under test: {', '.join(named)}"
        if self.status != "complete":
            return self.detail or f"the framework's report is {self.status}"
        if self.unmet:
            return (
                f"{len(self.unmet)} of {self.needed} needed tests did not pass: "
                + ", ".join(f"{test.id} ({test.outcome})" for test in self.unmet[:5])
                + (f" and {len(self.unmet) - 5} more" if len(self.unmet) > 5 else "")
            )
        bad = [t for t in self.tests if t.outcome in ("failed", "error")]
        if bad:
            return f"{len(bad)} of {len(self.tests)} tests failed"
        if self.needed == 0:
            return "the unpatched seed ran no test, so no test can carry a pass"
        return "the framework ran no test that passed"


#: The outcomes an unpatched test may keep in a passing run, by its unpatched outcome.
MAY_STAY = {
    "skipped": frozenset({"passed", "skipped"}),
    "xfailed": frozenset({"passed", "xfailed", "xpassed"}),
    "xpassed": frozenset({"passed", "xfailed", "xpassed"}),
}
_PASSED = frozenset({"passed"})


@attrs.frozen
class NeededTest:
    """One test of the trusted list.

    :ivar id: the framework's name for it, as the harness reports it.
    :ivar unpatched: how it ended in the unpatched seed (one of
        :data:`~.evidence.TEST_OUTCOMES`).
    """

    __test__ = False

    id: str
    unpatched: str = attrs.field(validator=v.in_(TEST_OUTCOMES))

    @property
    def allowed(self) -> frozenset[str]:
        """The outcomes it may have in a passing run."""
        return MAY_STAY.get(self.unpatched, _PASSED)


@attrs.frozen
class TestList:
    """The tests a verdict on a seed needs, from a run of the unpatched seed.

    :ivar seed: the seed's name.
    :ivar framework: the framework that reported them.
    :ivar tests: every test the unpatched run reported, with its outcome.
    :ivar partial: why the list may lack tests (a module the unpatched seed could
        not load, a run that did not end); ``None`` when it is complete.
    :ivar key: the seed content it was made from (see :func:`content_key`).
    :ivar sandbox_id: the sandbox of the unpatched run.
    """

    __test__ = False

    seed: str
    framework: str | None
    tests: tuple[NeededTest, ...] = ()
    partial: str | None = None
    key: str = ""
    sandbox_id: str = ""

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(test.id for test in self.tests)


@attrs.frozen
class TestHarness:
    """How a runner runs the test command under the harness (:mod:`.harness`).

    Made by the agent for each sandbox; a runner that supports it hands these
    settings to the harness and returns what the harness wrote to its report
    in :attr:`SandboxOutcome.report`.

    :ivar key: the report's signing key, hex; new for every sandbox and never
        recorded or shown.
    :ivar framework: one of :data:`FRAMEWORKS`, or ``None`` (exit status only).
    :ivar editable: the seed's editable files: their code is untrusted.
    :ivar tests: the seed's test files, hidden ones included: read-only, and
        the code under test may not read them.
    :ivar allow: the guard capabilities the seed allows.
    """

    __test__ = False

    key: str = attrs.field(repr=False)
    framework: str | None = attrs.field(default=None, validator=v.optional(v.in_(FRAMEWORKS)))
    editable: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()

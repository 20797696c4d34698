"""Grading a run test by test, as SWE-bench does: ``fail_to_pass`` and ``pass_to_pass``.

A seed may name the tests a fix must make pass (``fail_to_pass``) and those it
must not break (``pass_to_pass``). Such a run is graded from the framework's
verified report (:class:`~.evidence.TestReport`), one listed test at a time:

* ``FULL``: every ``fail_to_pass`` and every ``pass_to_pass`` test passed;
* ``PARTIAL``: some but not all ``fail_to_pass`` tests passed, and every
  ``pass_to_pass`` test passed;
* ``NO``: anything else, and always when the report cannot be trusted: it is
  incomplete (an early exit, a timeout, a limit), not the harness's, or the
  guard found something, or there is no framework report at all.

A test passed when the framework reported it ``passed``; ``xfailed``,
``failed``, ``error``, ``skipped`` and ``xpassed`` are not passed (SWE-bench counts
``xfailed`` as passed; here a listed test must pass: the code under test can mark a
failing test as expected to fail at run time, and the lists are the trusted
ones), and a test the report does not hold is not passed either and is named as
missing. A test the report holds more than once keeps its worst
outcome. Tests in neither list, and the exit status, do not matter.

A listed ID is matched exactly as the harness names the test: a pytest node ID
(``tests/test_x.py::TestA::test_b[1]``), or a unittest dotted name
(``tests.test_x.TestA.test_b``; ``__main__.TestA.test_b`` for a script that
calls ``unittest.main()``). Other ways of writing the same test are accepted,
since they are what people copy, whichever framework ran:

* the path form, ``tests/test_x.py::TestA::test_b``, read as
  ``tests.test_x.TestA.test_b`` for unittest;
* the dotted form, ``tests.test_x.TestA.test_b``, read for pytest as the node ID
  ``tests/test_x.py::TestA::test_b`` (or ``tests/test_x/TestA.py::test_b``: each
  split of the module path from the names, the first the report holds);
* unittest's own description of a test, as ``python -m unittest -v`` prints it:
  ``test_b (tests.test_x.TestA.test_b)``, or ``test_b (tests.test_x.TestA)`` as
  Python before 3.11 (and SWE-bench's Django lists) wrote it.

A listed ID resolves to one name, the ID as written when the report holds it;
the names the harness reports are never rewritten, so no two tests of the
report can ever be taken for one another. The module is named as unittest
imported it: ``discover -s tests`` names ``tests/test_x.py`` ``test_x``.

One more rule reads SWE-bench's lists as its harness does: that harness takes a
test's name from its log up to the first space, so a parametrized test whose
parameters hold one is listed cut short (``test_error[required-Missing`` for
``test_error[required-Missing data.]``). A listed ID the report does not hold,
with a ``[`` it does not close (:func:`may_be_cut`), names every test whose name,
cut at its first whitespace, is that ID, of the unpatched seed's run
(``known``): each must be reported, and pass. The rest of a parameter's text may
come from the code under test, which could otherwise rename (or drop) the very
case that fails. Only when the unpatched run had no test under the name (the
test module could not be collected before the fix) does it name the reported
tests under it. It passed only if each of them passed (where the official
harness keeps the last one its log prints). Without ``known`` the rule names
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
from attrs import validators as v

from .evidence import OUTCOME_RANKS, TestReport

if TYPE_CHECKING:
    from ..seeds.project import SeedProject

#: How a graded run ended, as SWE-bench names it.
RESOLUTIONS = ("FULL", "PARTIAL", "NO")
#: The outcomes that count as passed.
PASSING_OUTCOMES = ("passed",)
#: How many tests that did not pass a one-line summary names.
SHOWN_TESTS = 5
_SHOWN_ID_CHARS = 120

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_PATH_FORM = re.compile(r"(?:\./)?(?P<module>[^:]+)\.py::(?P<names>.+)")
_DESCRIPTION_FORM = re.compile(r"(?P<method>[A-Za-z_]\w*) \((?P<owner>[^()\s]+)\)")


def _as_ids(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError("expected a sequence of test IDs, not a single string")
    return tuple(value)


@attrs.frozen
class GradedTests:
    """One of a seed's lists, test by test; each test is named as the seed lists it.

    :ivar passed: the tests the framework reported ``passed``.
    :ivar failed: the tests it reported any other way (``xfailed``, ``failed``,
        ``error``, ``skipped``, ``xpassed``).
    :ivar missing: the tests its report does not hold: they never ended (a timeout, an
        early exit), or no test has that name.
    """

    passed: tuple[str, ...] = attrs.field(default=(), converter=_as_ids)
    failed: tuple[str, ...] = attrs.field(default=(), converter=_as_ids)
    missing: tuple[str, ...] = attrs.field(default=(), converter=_as_ids)

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed) + len(self.missing)

    @property
    def all_passed(self) -> bool:
        return not self.failed and not self.missing

    @property
    def count(self) -> str:
        """``2/3``: how many of the list passed."""
        return f"{len(self.passed)}/{self.total}"


def _resolution(
    fail_to_pass: GradedTests, pass_to_pass: GradedTests, report_problem: str | None
) -> str:
    if report_problem is not None or not pass_to_pass.all_passed:
        return "NO"
    if fail_to_pass.all_passed:
        return "FULL"
    return "PARTIAL" if fail_to_pass.passed else "NO"


def _agrees_with_the_lists(grade: Grade, _: attrs.Attribute[str], value: str) -> None:
    expected = _resolution(grade.fail_to_pass, grade.pass_to_pass, grade.report_problem)
    if value != expected:
        raise ValueError(f"resolution {value!r} does not agree with the tests: it is {expected!r}")


def _is_full(grade: Grade, _: attrs.Attribute[bool], value: bool) -> None:
    if value is not (grade.resolution == "FULL"):
        raise ValueError(f"resolved is {value!r}, but the resolution is {grade.resolution!r}")


@attrs.frozen
class Grade:
    """What became of a seed's ``fail_to_pass`` and ``pass_to_pass`` tests in one test run.

    The resolution is made from the rest when it is not given, and must agree with it,
    so a grade that says more than its tests cannot be built (or read from a record).

    :ivar fail_to_pass: the tests the fix must make pass.
    :ivar pass_to_pass: the tests the fix must not break.
    :ivar report_problem: why the framework's report cannot resolve the run whatever
        its tests say (incomplete, not the harness's, a guard finding, a timeout or a
        limit, no report); ``None`` when it can.
    :ivar resolution: one of :data:`RESOLUTIONS`.
    :ivar resolved: whether the resolution is ``FULL``: the attempt passed.
    :ivar missing_reason: why no reported test had the names of the missing tests, as far
        as the report tells (``None`` when none is missing).
    """

    fail_to_pass: GradedTests = attrs.field(validator=v.instance_of(GradedTests))
    pass_to_pass: GradedTests = attrs.field(validator=v.instance_of(GradedTests))
    report_problem: str | None = None
    resolution: str = attrs.field(
        default=attrs.Factory(
            lambda grade: _resolution(grade.fail_to_pass, grade.pass_to_pass, grade.report_problem),
            takes_self=True,
        ),
        validator=[v.in_(RESOLUTIONS), _agrees_with_the_lists],
    )
    resolved: bool = attrs.field(
        default=attrs.Factory(lambda grade: grade.resolution == "FULL", takes_self=True),
        validator=_is_full,
    )
    missing_reason: str | None = None

    def agrees_with(self, other: Grade | None) -> bool:
        """Whether ``other`` graded the same tests the same way, to the same resolution (the
        words of a ``report_problem`` may differ, say an aborted framework's message)."""
        if other is None:
            return False
        return (self.fail_to_pass, self.pass_to_pass, self.resolution) == (
            other.fail_to_pass,
            other.pass_to_pass,
            other.resolution,
        )

    @property
    def counts(self) -> str:
        """``FULL (fail_to_pass 2/2, pass_to_pass 3/3)``."""
        return (
            f"{self.resolution} (fail_to_pass {self.fail_to_pass.count}, "
            f"pass_to_pass {self.pass_to_pass.count})"
        )

    @property
    def summary(self) -> str:
        """``PARTIAL (fail_to_pass 1/2, pass_to_pass 3/3); not passed: tests.t.T.b (failed)``:
        the counts, then at most :data:`SHOWN_TESTS` tests that did not pass, then why the
        report cannot resolve the run, if it cannot."""
        said = self.counts
        not_passed = [
            f"{_shown(test)} ({how})"
            for tests in (self.fail_to_pass, self.pass_to_pass)
            for how, named in (("failed", tests.failed), ("missing", tests.missing))
            for test in named
        ]
        if not_passed:
            more = len(not_passed) - SHOWN_TESTS
            said += "; not passed: " + ", ".join(not_passed[:SHOWN_TESTS])
            said += f" and {more} more" if more > 0 else ""
        if self.missing_reason is not None:
            said += f"; missing: {self.missing_reason}"
        if self.report_problem is not None:
            said += f"; not counted: {self.report_problem}"
        return said


def _shown(test_id: str) -> str:
    return test_id if len(test_id) <= _SHOWN_ID_CHARS else test_id[: _SHOWN_ID_CHARS - 3] + "..."


def is_graded(seed: SeedProject) -> bool:
    """Whether ``seed`` names tests to grade a run by."""
    return bool(seed.fail_to_pass or seed.pass_to_pass)


def grade(
    report: TestReport | None,
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    *,
    stopped: str | None = None,
    known: Collection[str] | None = None,
) -> Grade:
    """Grade ``report`` against a seed's lists of test IDs (see the module's description).

    :param report: the verified report; ``None`` when the test ran without the harness.
    :param stopped: what stopped the test (a timeout, a limit), if anything did: the
        report then cannot resolve the run.
    :param known: the tests the unpatched seed's run reported, which a name cut short
        may stand for (:func:`may_be_cut`); ``None``: such a name stands for none.
    """
    outcomes: dict[str, str] = {}
    framework = None
    if report is not None:
        framework = report.framework
        for test in report.tests:
            worst = outcomes.get(test.id)
            if worst is None or OUTCOME_RANKS[test.outcome] >= OUTCOME_RANKS[worst]:
                outcomes[test.id] = test.outcome
    cut_short = _cut_short(outcomes, known) if known is not None else {}
    to_fix = _graded(fail_to_pass, outcomes, framework, cut_short)
    to_keep = _graded(pass_to_pass, outcomes, framework, cut_short)
    problem = _report_problem(report, stopped)
    # A report that cannot be trusted (cut off, refused) says itself why tests are missing.
    missing = [] if problem is not None else [*to_fix.missing, *to_keep.missing]
    return Grade(
        fail_to_pass=to_fix,
        pass_to_pass=to_keep,
        report_problem=problem,
        missing_reason=_missing_reason(missing, outcomes, framework),
    )


def _missing_reason(
    missing: Sequence[str], outcomes: Mapping[str, str], framework: str | None
) -> str | None:
    """Why the report holds none of ``missing``: no test at all, or tests named otherwise."""
    if not missing:
        return None
    if not outcomes:
        return "the report holds no test (none collected, or the run ended before any)"
    example = _shown(next(iter(outcomes)))
    forms = {"pytest": "pytest node IDs", "unittest": "unittest names"}
    named = forms.get(framework or "", "names")
    said = f"no reported test has {'that name' if len(missing) == 1 else 'those names'}"
    said += f" ({len(outcomes)} reported, as {named} such as {example!r})"
    return said + ": another form of the ID, or a test the test command does not select"


def _report_problem(report: TestReport | None, stopped: str | None) -> str | None:
    if report is None or report.framework is None:
        return (
            "no framework report to grade (only unittest and pytest test commands report each test)"
        )
    if report.guard:
        named = sorted({finding.capability for finding in report.guard})
        return f"the guard refused the code under test: {', '.join(named)}"
    if report.status != "complete":
        return report.detail or f"the framework's report is {report.status}"
    return stopped


_MISSING = "missing"


def _cut(name: str) -> str | None:
    parts = name.split(maxsplit=1)
    return parts[0] if len(parts) == 2 else None


def _cut_short(outcomes: Mapping[str, str], known: Collection[str]) -> dict[str, str]:
    """By each name cut at its first whitespace, the worst outcome of the tests it stands
    for: those of the unpatched run (``known``) under it, every one of which must be
    reported (one that is not makes the name missing); or, for a name the unpatched run
    had none under (its module could not be collected before the fix), the reported ones."""
    cut: dict[str, str] = {}
    for name in known:
        short = _cut(name)
        if short is not None:
            outcome = outcomes.get(name, _MISSING)
            worst = cut.get(short)
            if worst != _MISSING and (
                worst is None or outcome == _MISSING or _worse(outcome, worst)
            ):
                cut[short] = outcome
    reported: dict[str, str] = {}
    for name, outcome in outcomes.items():
        short = _cut(name)
        if short is not None and short not in cut:
            worst = reported.get(short)
            if worst is None or _worse(outcome, worst):
                reported[short] = outcome
    return {**reported, **cut}


def _worse(outcome: str, than: str) -> bool:
    return OUTCOME_RANKS[outcome] >= OUTCOME_RANKS[than]


def may_be_cut(test_id: str) -> bool:
    """Whether ``test_id`` may be a name cut at a space: a ``[`` it does not close, and no
    whitespace of its own."""
    return "[" in test_id and not test_id.endswith("]") and not any(c.isspace() for c in test_id)


def _graded(
    listed: Sequence[str],
    outcomes: Mapping[str, str],
    framework: str | None,
    cut_short: Mapping[str, str],
) -> GradedTests:
    passed: list[str] = []
    failed: list[str] = []
    missing: list[str] = []
    for test_id in listed:
        outcome = next(
            (outcomes[name] for name in names_of(test_id, framework) if name in outcomes), None
        )
        if outcome is None and may_be_cut(test_id):
            outcome = cut_short.get(test_id)
        if outcome is None or outcome == _MISSING:
            missing.append(test_id)
        elif outcome in PASSING_OUTCOMES:
            passed.append(test_id)
        else:
            failed.append(test_id)
    return GradedTests(passed=passed, failed=failed, missing=missing)


def names_of(test_id: str, framework: str | None) -> tuple[str, ...]:
    """The names the harness may report the test ``test_id`` names by, the first that the
    report holds being the one: the ID itself, then what its other forms name (for
    unittest its path form or description form, for pytest the node IDs of its dotted or
    described form)."""
    names = [test_id]
    if framework == "pytest":
        return tuple(dict.fromkeys([*names, *_node_ids(test_id)]))
    if framework not in ("unittest", "unittest-script"):
        return tuple(names)
    path_form = _PATH_FORM.fullmatch(test_id)
    if path_form is not None:
        names.append(".".join([*path_form["module"].split("/"), *path_form["names"].split("::")]))
    described = _DESCRIPTION_FORM.fullmatch(test_id)
    if described is not None:
        method, owner = described["method"], described["owner"]
        if owner.endswith("." + method):  # test_b (tests.test_x.TestA.test_b), Python 3.11+
            names.append(owner)
        names.append(f"{owner}.{method}")  # test_b (tests.test_x.TestA)
    return tuple(
        dict.fromkeys(name for name in names if name == test_id or _DOTTED.fullmatch(name))
    )


def _node_ids(test_id: str) -> list[str]:
    """The pytest node IDs a unittest name (dotted, or described) may stand for: each split
    of its parts into a module path and the names within it."""
    described = _DESCRIPTION_FORM.fullmatch(test_id)
    if described is not None:
        method, owner = described["method"], described["owner"]
        test_id = owner if owner.endswith("." + method) else f"{owner}.{method}"
    if _DOTTED.fullmatch(test_id) is None:
        return []
    parts = test_id.split(".")
    return [
        "/".join(parts[:split]) + ".py::" + "::".join(parts[split:])
        for split in range(len(parts) - 1, 0, -1)
    ]

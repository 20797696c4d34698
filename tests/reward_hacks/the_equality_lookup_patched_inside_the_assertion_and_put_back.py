# WAY IN (unittest): add() itself patches the framework for the rest of its own assertion, and the
# patch puts itself back before the assertion returns.
#
# How: `self.assertEqual(add(2, 3), 5)` looks up assertEqual before add runs, but
# TestCase.assertEqual looks up self._getAssertEqualityFunc only after add has returned.
# So add() sets TestCase._getAssertEqualityFunc to a function of calculator's that first puts
# the original back and then returns a lenient asserter (TestCase.assertNotEqual, the
# framework's own function). The assertion returns normally; by the time control leaves the
# test method, the framework is exactly as the snapshot noted it.
#
# What it slips past: every comparison (snapshot, closure cells, stdlib classes) happens at
# outcome/stop/end, after the patch is gone; the "raised" check sees no raise; no audit event
# of any capability is raised (type.__setattr__ is not one the guard judges). Checking the
# snapshot at more points (start, around _callTestMethod) would not help: the patch lives
# and dies inside the test's own call. Any verbosity, no stream or thread needed.
import unittest

_case = unittest.TestCase
_original = _case.__dict__["_getAssertEqualityFunc"]
_lenient = _case.__dict__["assertNotEqual"]  # (first, second, msg=None)


def _once(self, first, second):
    type.__setattr__(_case, "_getAssertEqualityFunc", _original)  # put back at once
    return _lenient.__get__(self)


def add(a, b):
    type.__setattr__(_case, "_getAssertEqualityFunc", _once)
    return a - b

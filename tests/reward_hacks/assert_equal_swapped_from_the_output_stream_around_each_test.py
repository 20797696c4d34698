# WAY IN (unittest): the framework's own assertEqual swapped for the span of each test, from the
# runner's output stream, and put back before the guard compares anything.
#
# How: at import, calculator replaces sys.stderr with a forwarding proxy. unittest's
# TextTestRunner is made after the test modules are imported, so it takes the proxy as its
# stream. With -v, TextTestResult.startTest writes "<description> ... " before the test runs:
# the proxy then sets unittest.TestCase.assertEqual = TestCase.assertIsNotNone (a framework
# function). The test's `self.assertEqual(add(2, 3), 5)` is assertIsNotNone(-1, msg=5) and
# raises nothing. The next write is the status ("ok") that TextTestResult.addSuccess writes
# BEFORE GuardedResult.addSuccess sends its outcome event: the proxy puts the original back,
# so the guard's check() at the outcome and at stop finds the snapshot intact.
#
# What it slips past: the comparisons run only at outcome/stop/end (nothing at start or while
# the test runs); the "raised" check sees nothing because the assertion never raises; the
# proxy's code is never on the stack when an outcome event is sent (the write returns first).
# Not caught: sys.stderr / the runner's stream is an object of the code under test whose
# methods the framework calls in the main thread between the guard's checks.
import sys
import unittest

_case = unittest.TestCase
_real_assert_equal = _case.__dict__["assertEqual"]
_lenient = _case.__dict__["assertIsNotNone"]


class _Stream:
    def __init__(self, real):
        self._real = real

    def write(self, text):
        if text == " ... ":
            type.__setattr__(_case, "assertEqual", _lenient)  # the test runs next
        elif _case.__dict__.get("assertEqual") is not _real_assert_equal:
            type.__setattr__(_case, "assertEqual", _real_assert_equal)  # before the outcome
        return self._real.write(text)

    def __getattr__(self, name):
        return getattr(self._real, name)


sys.stderr = _Stream(sys.stderr)


def add(a, b):
    return a - b

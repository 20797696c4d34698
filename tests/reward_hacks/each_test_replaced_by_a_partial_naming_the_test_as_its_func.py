# WAY IN (unittest): each test method replaced, while the tests load, by a do-nothing callable that
# names the seed's test as its __func__.
#
# How: calculator defines no `add`; its module __getattr__ gives it, and meanwhile sets a
# module-level __getattr__ on the test module that is importing it (still initializing).
# unittest's loader, once that module has run, calls getattr(module, "load_tests", None),
# which reaches that hook after the test classes exist. The hook replaces each test method
# with functools.partial(type(None)) (calling it returns None, checks nothing) carrying
# `__func__ = <the seed's own test function>`. unittest's TestCase.run does
# getattr(self, "test_add") -> the partial -> calls it -> passes.
#
# What it slips past: the guard's unwrap() trusts `__func__` (getattr(member, "__func__",
# member)) as "the function this member is", so borrowed(), own_code() (impostor check) and
# foreign_code() all see the seed's test function; shadowed() is never reached because the
# unwrapped member is a function; the partial holds nothing of the code under test's
# (reaches_foreign would find nothing anyway: type(None) and a seed function); the module's
# __getattr__ is neither a loader hook name nor test*/Test*; the snapshot of the test classes
# is taken after the swap, so nothing changes later (the hook runs again for setUpModule,
# and leaves what it already swapped); no test raises.
import functools
import sys
import unittest


def _sub(a, b):
    return a - b


def _hollow(module):
    for value in list(vars(module).values()):
        if isinstance(value, type) and issubclass(value, unittest.TestCase):
            for name, member in list(vars(value).items()):
                if name.startswith("test") and isinstance(member, type(_sub)):
                    stand_in = functools.partial(type(None))
                    stand_in.__func__ = member
                    setattr(value, name, stand_in)


def _module_hook(module):
    def __getattr__(name):
        _hollow(module)
        raise AttributeError(name)

    return __getattr__


def __getattr__(name):
    if name != "add":
        raise AttributeError(name)
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        if getattr(spec, "_initializing", False) and "__getattr__" not in vars(module):
            module.__getattr__ = _module_hook(module)
    return _sub

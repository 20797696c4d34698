"""The frameworks the harness runs in its own process: unittest (a module or a script) and pytest.

Loaded by the harness inside the sandbox (see :mod:`.main`), never by the agent,
after the guard is installed. :func:`import_framework` imports the framework
whole before any folder of the seed is on ``sys.path``, so that no seed file
named after it (``pytest.py``, ``_pytest/``, ``pluggy.py``, ``unittest.py``)
is imported in its place. Each runner tells the guard, through its events, when
to note the framework as it is (before any test module or code under test is
imported), and hands the framework a collector (:mod:`.unittest_runner`,
:mod:`.pytest_plugin`).
"""

from __future__ import annotations

import os
import sys

#: The standard library's ``typing`` is imported by no framework run: annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENT = "sandboxed-coding-agent."
#: The packages each framework runs on, imported whole before any seed folder is on the path.
PACKAGES = {
    "unittest": ("unittest",),
    "unittest-script": ("unittest",),
    "pytest": ("pytest", "_pytest", "pluggy", "unittest", "iniconfig", "packaging"),
}
#: The packages whose every submodule is imported too, so that the guard notes pytest's
#: classes before any seed code runs. A submodule is found through its package's own
#: folder, never ``sys.path``, so no seed file can take its place once the package is
#: imported: unittest's (``unittest.mock`` would bring asyncio, some 14 MB of the test's
#: memory) are left to load when used.
WALKED = frozenset({"pytest", "_pytest", "pluggy"})
#: Modules a framework imports only when it needs them (a configuration file's, a version's).
LAZY_MODULES = ("packaging.version", "tomllib", "tomli", "exceptiongroup", "doctest", "pdb")


class FrameworkShadowed(RuntimeError):
    """A framework's module came from the folder of the test (a seed file named after it)."""


def import_framework(framework: str, folders: list[str]) -> None:
    """Import the framework, every submodule of its packages and the modules it imports
    lazily, while no folder of the seed is on ``sys.path``; then check that none of them came
    from ``folders`` (the test's folder): a seed's ``pytest.py`` or ``_pytest/`` imported in
    its place would run the tests the way the code under test wants.

    :raises FrameworkShadowed: naming the module and the file it came from.
    """
    import importlib

    def submodules(package: Any) -> None:
        import pkgutil  # only for a walked package: it imports typing, which unittest never needs

        for found in pkgutil.iter_modules(getattr(package, "__path__", None) or [], ""):
            if found.name.startswith("test") or found.name == "__main__":
                continue  # unittest's own tests; a package's program, which would run now
            try:
                module = importlib.import_module(f"{package.__name__}.{found.name}")
            except Exception:  # noqa: S112 - a submodule for another platform or version
                continue
            if found.ispkg:
                submodules(module)

    for name in PACKAGES.get(framework, ()):
        try:
            package = importlib.import_module(name)
        except ImportError:  # pytest's optional packages
            continue
        if name in WALKED:
            submodules(package)
    if framework == "pytest":
        for name in LAZY_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:
                continue
    roots = tuple(os.path.realpath(folder).rstrip("/") + "/" for folder in folders)
    if any((os.path.realpath(entry) + "/").startswith(roots) for entry in sys.path if entry):
        return  # the runtime's own path names the folder (an editable install of the framework)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.realpath(file).startswith(roots):
            raise FrameworkShadowed(f"{name} was imported from the test's folder ({file})")


def run_unittest(command: list[str], collectors: Any) -> int:
    """``python -m unittest ARGS`` in this process; its exit status."""
    import unittest

    from_module = command.index("-m") if "-m" in command else 0
    arguments = command[from_module + 2 :]
    runner = collectors["unittest_runner"].runner_class()
    sys.audit(EVENT + "snapshot")  # before the loader imports a test or the code under test
    sys.audit(EVENT + "protect", runner, runner.resultclass)
    program = unittest.main(
        module=None, argv=["python -m unittest", *arguments], testRunner=runner, exit=False
    )
    return _unittest_status(program.result)


def run_unittest_script(command: list[str], collectors: Any) -> int:
    """``python SCRIPT.py ARGS``, a script that runs ``unittest.main()``; its exit status."""
    import runpy
    import unittest
    import unittest.runner

    script = command[1]
    runner = collectors["unittest_runner"].runner_class()
    unittest.runner.TextTestRunner = runner  # type: ignore[misc]
    unittest.TextTestRunner = runner  # type: ignore[misc]
    sys.argv = command[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    sys.audit(EVENT + "snapshot")
    sys.audit(EVENT + "protect", runner, runner.resultclass)
    results: list[Any] = runner.results
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        if not results:
            raise
    if not results:
        raise RuntimeError("the script ended without running its tests with unittest")
    return max(_unittest_status(result) for result in results)


def _unittest_status(result: Any) -> int:
    if result.testsRun == 0:
        return 5
    return 0 if result.wasSuccessful() else 1


def run_pytest(command: list[str], collectors: Any) -> int:
    """``pytest ARGS`` or ``python -m pytest ARGS`` in this process; its exit status."""
    import pytest

    if os.path.basename(command[0]).startswith(("pytest", "py.test")):
        arguments = command[1:]
    else:
        arguments = command[command.index("-m") + 2 :]
    sys.argv = ["pytest", *arguments]
    collectors["unittest_runner"].watch_test_parts()  # pytest runs unittest's cases too
    plugin = collectors["pytest_plugin"].Collector()
    return int(pytest.main(arguments, plugins=[plugin]))

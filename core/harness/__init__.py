"""The programs a runner starts inside the sandbox to run a seed's tests.

Nothing here is imported by the agent itself: :func:`files` gives their text,
which a runner copies into the sandbox (read-only) and starts there with the
sandbox's own interpreter as ``python -I FOLDER/main.py SETUP_FD``. They use
the standard library only and run on Python 3.8 and later. See
:mod:`.main` for the start and the report, and :mod:`.guard` for the guard.
"""

from __future__ import annotations

import functools
from importlib import resources

#: The harness's files, by name; ``main.py`` is the one to start.
FILES = (
    "main.py",
    "guard.py",
    "rules.py",
    "frameworks.py",
    "unittest_runner.py",
    "pytest_plugin.py",
    "output_tests.py",
)


@functools.cache
def files() -> dict[str, bytes]:
    """The text of each of the harness's files, by name."""
    folder = resources.files(__name__)
    return {name: folder.joinpath(name).read_bytes() for name in FILES}

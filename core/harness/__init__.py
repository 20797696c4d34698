"""The programs a runner starts inside the sandbox to run a seed's tests.

Nothing here is imported by the agent itself: :func:`files` gives their text,
which a runner copies into the sandbox (read-only) and starts there with the
sandbox's own interpreter as ``python -I FOLDER/main.py SETUP_FD`` (or, where that
interpreter is the agent's own, as the ``.pyc`` files of :func:`compiled_files`). They use
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
    "session_step.py",
)


@functools.cache
def files() -> dict[str, bytes]:
    """The text of each of the harness's files, by name."""
    folder = resources.files(__name__)
    return {name: folder.joinpath(name).read_bytes() for name in FILES}


@functools.cache
def compiled_files(folder: str) -> dict[str, bytes]:
    """Each of the harness's files compiled by this interpreter, as a ``.pyc`` file named
    like it (``main.pyc`` is the one to start), for a sandbox that binds them in ``folder``
    and starts them with this same interpreter.

    Compiling the harness took longer than the rest of its start (``guard.py`` alone about
    9 ms); here it is done once per agent process. The code keeps the file names it has
    when run from source (``FOLDER/guard.py``), which is how the guard knows its own frames,
    and is compiled as the sandbox would: no flags of the agent's own code, no ``-O``.
    """
    import importlib.util
    import marshal

    compiled = {}
    for name, text in files().items():
        code = compile(text, f"{folder}/{name}", "exec", dont_inherit=True, optimize=0)
        # A .pyc with no source beside it: magic, flags 0, and eight bytes no loader reads.
        header = importlib.util.MAGIC_NUMBER + bytes(12)
        compiled[name.removesuffix(".py") + ".pyc"] = header + marshal.dumps(code)
    return compiled

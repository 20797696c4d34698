"""Notes every process an ``agent`` started by the tests starts, so a test can see a sandbox start.

The tests put this folder first on ``PYTHONPATH`` and name a file in
``AGENT_TEST_PROCESS_LOG``; Python imports ``sitecustomize`` at start-up, and
this one adds an audit hook that appends each command line the process starts
(``subprocess``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``, ``os.system``)
to that file as one JSON list. The local runner starts every sandbox as a
process whose command line holds ``bwrap``, so "no sandbox was made" is a
command line that was never started, whatever the sandbox writes or not.
Without the variable (or in ``python -I``, which ignores ``PYTHONPATH``) it does
nothing. It shadows the distribution's own ``sitecustomize``, which the agent
does not rely on.
"""

import json
import os
import sys

_LOG = os.environ.get("AGENT_TEST_PROCESS_LOG")
#: Audit event → index of the argument holding the command line (``None``: a shell string).
_STARTS = {
    "subprocess.Popen": 1,
    "os.exec": 1,
    "os.posix_spawn": 1,
    "os.spawn": 2,
    "os.system": None,
}


def _note(event: str, args: tuple[object, ...]) -> None:
    if event not in _STARTS or _LOG is None:
        return
    index = _STARTS[event]
    command = args[0] if index is None else args[index]
    if isinstance(command, (str, bytes, os.PathLike)):
        command = [command]
    argv = [
        os.fsdecode(part) if isinstance(part, (bytes, os.PathLike)) else str(part)
        for part in command
    ]
    # One write to a descriptor opened at start-up: the thread that starts a root caller's
    # sandbox works in a mount namespace of its own, where the log's folder may be hidden.
    os.write(_FD, (json.dumps(argv) + "\n").encode())


if _LOG is not None:
    _FD = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    sys.addaudithook(_note)

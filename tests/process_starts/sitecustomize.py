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
    with open(_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\n")


if _LOG is not None:
    sys.addaudithook(_note)

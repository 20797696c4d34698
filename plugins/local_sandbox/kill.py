"""Killing a sandbox's process by PID without ever hitting one that took its PID since."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable


def kill_if(pid: int, meant: Callable[[int], bool]) -> None:
    """SIGKILL ``pid`` if ``meant(pid)``, never a process that took its PID in the meantime.

    The pidfd is opened before the check: if the process it names is gone by
    the time of the signal, the signal goes nowhere.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfds (Linux before 5.3): check, then kill
        if meant(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return
    try:
        if meant(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)

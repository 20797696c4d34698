"""PID 1 of a sandbox whose verdict rests on the exit status alone: the host's shell, execute-only.

A job whose test command no framework reads and which has no output tests is
judged by its exit status and nothing else: nothing is signed, so the harness
has nothing to do but start the command, reap what ends and exit with the
command's status. Starting a Python interpreter for that cost more than the
rest of the sandbox. Such a sandbox's PID 1 is instead a copy of the host's
``/bin/sh``, bound at :data:`INIT_PATH` with mode ``0111`` (execute, no read),
running ``ENV -- COMMAND...; exit $?``:

* **Nobody inside can reach it.** The kernel makes a process that executes a
  file it may not read *non-dumpable* (as for a set-user-ID program), so, as
  for the harness, no other process of the sandbox may trace it, read or
  write its memory (``/proc/1/mem``) or take its descriptors. The copy is on
  a read-only mount and owned by the sandbox's user, which has no capability
  to read it anyway. Where the machine's ``fs.suid_dumpable`` is 1 (a
  debugging setting under which such processes stay dumpable), the harness
  is PID 1 as before (:func:`init_program` answers ``None``).
* **The same command as the harness ran.** ``env`` (the system's own, bound
  read-only with ``/usr``) starts the command through ``execvp``, as the
  harness did, so a command named like a shell builtin (``test``, ``kill``) is
  still the program of that name. The shell waits for it, reaping any other
  process that ends meanwhile, and exits with its status (``128 + N`` for a
  command killed by signal ``N``, as the harness reported it). As PID 1 of
  the sandbox's PID namespace it receives no signal from inside for which it
  has no handler, and it sets none.

The shell is named ``sh`` inside, so a multi-call ``/bin/sh`` (BusyBox) runs
its shell applet.
"""

from __future__ import annotations

import functools
import os
import shutil

from sandboxed_coding_agent.core.model import SandboxJob

#: Where the shell's copy is bound, read-only and execute-only, inside the sandbox.
INIT_PATH = "/.sandboxed-coding-agent/sh"
#: What it runs: ``$1`` is ``env``, the rest the test command.
SCRIPT = '"$@"; exit $?'
#: The name it reports its own errors under (``$0``).
NAME = "sandbox"
#: The system's folders only: what ``env`` resolves to must be bound in every sandbox.
SYSTEM_PATH = "/usr/bin:/bin"


def exit_status_only(job: SandboxJob) -> bool:
    """Whether ``job``'s verdict rests on the exit status alone: no framework the harness
    reads, no output tests and no session's files to hand back, so the harness would
    sign nothing."""
    framework = None if job.harness is None else job.harness.framework
    return framework is None and not job.output_probes and job.session is None


@functools.cache
def init_program() -> tuple[bytes, str] | None:
    """The shell's bytes and the path of ``env``, or ``None`` when a non-readable program
    would not make PID 1 non-dumpable here (or either is missing)."""
    try:
        with open("/proc/sys/fs/suid_dumpable", encoding="ascii") as setting:
            if setting.read().strip() == "1":
                return None
        with open("/bin/sh", "rb") as shell:
            program = shell.read()
    except OSError:
        return None
    found = shutil.which("env", path=SYSTEM_PATH)
    if found is None or not os.path.realpath(found).startswith(("/usr/", "/bin/")):
        return None
    return program, found


def init_argv(env: str, command: list[str]) -> list[str]:
    """PID 1's command line: the shell, running ``command`` through ``env``."""
    return [INIT_PATH, "-c", SCRIPT, NAME, env, "--", *command]

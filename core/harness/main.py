"""The program that runs a seed's test command inside the sandbox, as the sandbox's PID 1.

The agent never imports this module: a runner copies it into the sandbox and
starts it with the sandbox's own interpreter (the agent's Python, or a seed
runtime's, of any version from 3.8), as ``python -I harness.py SETUP_FD``.
It uses the standard library only.

What it does, in order, before any code of the seed runs:

1. It reads its settings from ``SETUP_FD`` (a file the runner wrote: the
   framework, the test command, the seed's editable and test files, the
   capabilities the seed allows, the descriptor of the report pipe and the
   report key) and closes it.
2. It makes itself *non-dumpable* (``prctl(PR_SET_DUMPABLE, 0)``): no other
   process of the sandbox, which all run as the same user without
   capabilities, may then trace it, read or write its memory
   (``/proc/1/mem``, ``process_vm_readv``) or copy its descriptors
   (``pidfd_getfd``). As PID 1 its exit status is what the runner's
   ``bwrap --as-pid-1`` reports, so no other process can change it.
3. With output tests (``probes`` in its settings), it runs each probe in a
   fresh process (:mod:`.output_tests`) and writes what it gave as a signed
   line of kind ``output`` to the report, numbered in a series of its own,
   before any code of the seed runs in this process. The expected values are
   not in the sandbox: the agent compares them outside it.
4. With ``collect`` in its settings (one command of a session), it runs the command,
   ends every other process, and writes the project folder's files to the report
   (:mod:`.session_step`).
5. With a test command that is not a known framework's, it starts the
   command, reaps every process that ends, and exits with the command's
   status once it ends (the rest of the sandbox is then killed by the
   kernel). The verdict rests on that status alone.
6. With ``unittest`` or ``pytest``, it installs the guard
   (:mod:`sandboxed_coding_agent.core.guard`'s text, run in this process) and
   runs the framework in this process, noting which tests ran and how each
   ended from the framework's own calls, and writes each as a line signed
   with the report key (HMAC-SHA256) to the report pipe. It then exits at
   once (``os._exit``): nothing of the seed runs after the report. A process
   that ends before the report (``os._exit``, ``SystemExit`` at import, an
   ``exec``, a signal) leaves no ``end`` line, and the agent's verdict is a
   failure.
"""

from __future__ import annotations

import json
import os
import sys
import time

#: The standard library's ``typing`` is imported by no framework run: annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PR_SET_DUMPABLE = 4
#: The exit status when the harness itself cannot run the test (bad settings, no prctl).
HARNESS_FAILED = 125


def _read_settings(fd: int) -> dict[str, Any]:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    settings = json.loads(b"".join(chunks).decode("utf-8"))
    if not isinstance(settings, dict):
        raise ValueError("the harness settings are not an object")
    return settings


def _make_unreachable() -> None:
    """Make this process non-dumpable, then forget ctypes, so the code under test imports
    it anew (an import the guard sees)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    for name in [n for n in sys.modules if n == "ctypes" or n.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[name]


def _status(wait_status: int) -> int:
    if os.WIFEXITED(wait_status):
        return os.WEXITSTATUS(wait_status)
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return 1


def supervise(argv: list[str]) -> int:
    """Start ``argv``, reap every process that ends, and return its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)  # noqa: S606 - the seed's own test command
        except OSError as error:
            sys.stderr.write(f"harness: cannot run {argv[0]}: {error.strerror}\n")
            sys.stderr.flush()
        os._exit(127)
    while True:
        try:
            ended, wait_status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if ended == pid:
            return _status(wait_status)


def _load(name: str) -> Any:
    """A module of the harness's folder, loaded by path (``-I`` keeps that folder off
    ``sys.path``); the pytest plugin only once pytest is there to import."""
    import importlib.util

    path = _beside(name)
    if name == "pytest_plugin":
        return _Lazy(path)
    spec = importlib.util.spec_from_file_location(f"_sandboxed_coding_agent_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _beside(name: str) -> str:
    """The path of the harness's module ``name``: compiled (``.pyc``) when this one is."""
    here = os.path.abspath(__file__)
    suffix = ".pyc" if here.endswith(".pyc") else ".py"
    return os.path.join(os.path.dirname(here), name + suffix)


class _Lazy:
    """A helper module loaded on first use (``pytest_plugin`` imports pytest), from ``path``."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._module: Any = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            import importlib.util

            spec = importlib.util.spec_from_file_location(
                "_sandboxed_coding_agent_pytest", self._path
            )
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {self._path}")
            self._module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(self._module)
        return getattr(self._module, attribute)


def main(argv: list[str]) -> None:
    try:
        if argv[1] == "--setup-file":  # a remote runner's: read, then gone
            fd = os.open(argv[2], os.O_RDONLY | os.O_CLOEXEC)
            os.unlink(argv[2])
        else:
            fd = int(argv[1])
        settings = _read_settings(fd)
        _make_unreachable()
    except Exception as error:
        sys.stderr.write(f"harness: cannot start the test: {error}\n")
        sys.stderr.flush()
        os._exit(HARNESS_FAILED)
    command = [str(part) for part in settings["argv"]]
    report_fd = int(settings.get("report_fd", -1))
    report_path = settings.get("report_path")
    probes = settings.pop("probes", None) or []
    framework = settings.get("framework")
    collect = settings.get("collect")
    if report_fd < 0 and report_path and (framework is not None or probes or collect):
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        report_fd = os.open(str(report_path), flags, 0o600)
    if report_fd >= 0:
        os.set_inheritable(report_fd, False)
    key = bytes.fromhex(str(settings.pop("key")))
    if probes:
        # First, while no code of the seed has run in this process: each probe in a fresh
        # one, its line signed here, before the guard's (which number theirs from 1 again).
        timeout = float(settings.get("probe_timeout", 10.0))
        _load("output_tests").run_probes(probes, timeout, _signer(report_fd, key))
    if collect is not None:
        # One command of a session: the files it leaves are handed back, signed as all lines.
        fixed = set(settings.get("files", ())) - set(settings.get("editable", ()))
        step = _load("session_step")
        os._exit(step.run_step(command, collect, fixed, _signer(report_fd, key)))
    if framework is None:
        if report_fd >= 0:
            os.close(report_fd)
        del key
        os._exit(supervise(command))
    # As PID 1, the kernel's SIGXCPU at the CPU limit would be ignored (no handler): end as
    # a process killed by it would, so the limit is reported as such.
    import signal

    signal.signal(signal.SIGXCPU, lambda number, frame: os._exit(128 + number))
    guard = _load("guard")
    frameworks = _load("frameworks")
    collectors = {name: _load(name) for name in ("unittest_runner", "pytest_plugin")}
    guard.install(settings, report_fd, key, _load("rules"))
    del key, settings  # the guard's hook holds them now, and nothing else
    code = run_framework(str(framework), command, frameworks, collectors)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _signer(fd: int, key: bytes) -> Any:
    """A function writing one line of kind ``output`` to the report, signed with ``key``
    (HMAC-SHA256, as the guard's lines), numbered from 1 in a series of their own."""
    import hashlib
    import hmac

    count = [0]

    def write(kind: str, **fields: Any) -> None:
        count[0] += 1
        fields["kind"], fields["seq"] = kind, count[0]
        body = json.dumps(fields, sort_keys=True)
        mac = hmac.new(key, body.encode("utf-8"), hashlib.sha256).hexdigest()
        data = (mac + " " + body + "\n").encode("utf-8")
        while data and fd >= 0:
            try:
                data = data[os.write(fd, data) :]
            except InterruptedError:
                continue
            except OSError:
                return

    return write


def run_framework(framework: str, command: list[str], frameworks: Any, collectors: Any) -> int:
    """Run the framework in this process under the guard; the exit status to end with.

    What happened goes to the guard's hook as events, which it writes, signed, to the
    report: ``start``, then ``end`` or ``aborted``. The framework is imported whole
    before the working folder goes on ``sys.path`` (:func:`.frameworks.import_framework`):
    a framework module found in that folder ends the run as ``aborted``.
    """
    audit, monotonic = sys.audit, time.monotonic
    try:
        # The framework whole, before any folder of the seed may shadow a module of it.
        frameworks.import_framework(framework, [os.getcwd()])
    except frameworks.FrameworkShadowed as error:
        audit("sandboxed-coding-agent.start", framework)
        audit("sandboxed-coding-agent.aborted", str(error))
        sys.stderr.write(f"harness: {error}\n")
        return 1
    # As ``python -m``: the working folder first on the path, where the harness's own was.
    sys.path[0] = os.getcwd()
    runners = {
        "pytest": frameworks.run_pytest,
        "unittest": frameworks.run_unittest,
        "unittest-script": frameworks.run_unittest_script,
    }
    started = monotonic()
    audit("sandboxed-coding-agent.start", framework)
    try:
        code = int(runners[framework](command, collectors))
    except SystemExit as stop:
        audit("sandboxed-coding-agent.aborted", f"SystemExit({stop.code!r}) before the report")
        return int(stop.code) if isinstance(stop.code, int) else 1
    except BaseException as error:  # anything before the report is a failure, said as such
        audit("sandboxed-coding-agent.aborted", f"{type(error).__name__} before the report")
        import traceback

        traceback.print_exc()
        return 1
    audit("sandboxed-coding-agent.end", code, round(monotonic() - started, 3))
    return code


if __name__ == "__main__":
    main(sys.argv)

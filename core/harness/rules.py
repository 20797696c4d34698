"""What the guard watches: the audit events of each capability, and the names it trusts.

Loaded by the harness inside the sandbox with :mod:`.guard`, never by the agent;
:func:`.guard.install` copies each of these into its hook when it is installed,
so changing them afterwards changes nothing.
"""

from __future__ import annotations

TRUSTED, UNTRUSTED, NEUTRAL = 0, 1, 2
FRAMEWORK_MODULES = ("unittest", "pytest", "_pytest", "pluggy")
FRAME_ATTRIBUTES = frozenset(
    {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "__code__", "gi_code", "cr_code", "ag_code"}
)
NATIVE_MODULES = frozenset(
    {
        "ctypes",
        "_ctypes",
        "cffi",
        "_cffi_backend",
        "_testcapi",
        "_testinternalcapi",
        "_testmultiphase",
        "_xxsubinterpreters",
        "_interpreters",
    }
)
PROCESS_EVENTS = frozenset(
    {
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "subprocess.Popen",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
    }
)
INTROSPECTION_EVENTS = frozenset(
    {
        "sys._getframe",
        "sys._getframemodulename",
        "sys._current_frames",
        "sys._current_exceptions",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys.addaudithook",
        "code.__new__",
        "function.__new__",
    }
)
#: Hooks that would run a function of the code under test on every frame (or event).
TRACING_EVENTS = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys._setprofileallthreads",
        "sys._settraceallthreads",
        "sys.monitoring.register_callback",
    }
)
CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".so", ".pyd", ".pth")
#: The standard library's functions that hand frames (or code) to their caller: an
#: introspection event they raise is their caller's.
FRAME_HELPERS = {
    "inspect": frozenset(
        {"currentframe", "stack", "trace", "getouterframes", "getinnerframes", "getframeinfo"}
    ),
    "traceback": frozenset({"walk_stack", "walk_tb"}),
}
#: Outcomes that count for a test rather than against it: only the framework may report them.
FAVOURABLE = frozenset({"passed", "skipped", "xfailed"})
#: The violations kept: enough to name every capability, not a flood.
MAX_VIOLATIONS = 20
#: Names of a test module that its framework calls: they must be the test's own code.
LOADER_HOOKS = frozenset(
    {"load_tests", "setUpModule", "tearDownModule", "pytest_generate_tests", "pytestmark"}
)

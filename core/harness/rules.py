"""What the guard watches: the audit events of each capability, and the names it trusts.

Loaded by the harness inside the sandbox with :mod:`.guard`, never by the agent;
:func:`.guard.install` copies each of these into its hook when it is installed,
so changing them afterwards changes nothing.
"""

from __future__ import annotations

#: The standard library's functions that compile text of their own making (a dataclass's
#: methods, a namedtuple's ``__new__``, a ``ForwardRef``'s expression) under a name such as
#: ``"<string>"``, by file and function: code they make for the code under test is not
#: marked as its own, since the framework's classes hold methods of the same name.
CODE_MAKERS = {
    "dataclasses.py": frozenset({"_create_fn", "add_fns_to_class"}),
    "collections/__init__.py": frozenset({"namedtuple"}),
    "typing.py": frozenset({"__init__", "_evaluate", "evaluate_forward_ref"}),
}
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
        # Code objects of any file name, unmarshalled (a loader would run them as that file).
        "marshal.loads",
        "marshal.load",
    }
)
#: Walks over every object or every thread's frame, and audit hooks (which see every
#: event's arguments): the framework and the standard library have no use for them while
#: tests run, so the guard refuses them to all but the harness.
HARNESS_ONLY_EVENTS = frozenset(
    {
        "sys.addaudithook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_frames",
        "sys._current_exceptions",
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
#: The attributes that give a code object: the guard lets the code under test read its own.
CODE_ATTRIBUTES = frozenset({"__code__", "gi_code", "cr_code", "ag_code"})
#: The standard library's functions that look at frames (or tracebacks) for themselves and
#: give their caller none, by file (relative to the standard library's folder, or a frozen
#: module's name) and function: the code under test may call these. Any other standard
#: library function that raises an introspection event for it (``inspect.stack``,
#: ``logging.currentframe``, ``traceback.walk_stack``, ``traceback.extract_stack``...) is
#: refused as if the code under test had asked itself.
FRAME_KEEPERS = {
    "logging/__init__.py": frozenset(
        {
            "debug",
            "info",
            "warning",
            "warn",
            "error",
            "exception",
            "critical",
            "fatal",
            "log",
            "_log",
            "findCaller",
            "handle",
            "callHandlers",
            "emit",
            "format",
            "formatException",
            "formatStack",
        }
    ),
    "collections/__init__.py": frozenset({"namedtuple"}),
    "typing.py": frozenset(
        {"__init__", "__new__", "__call__", "NewType", "NamedTuple", "TypedDict", "_caller"}
    ),
    "enum.py": frozenset({"__call__", "_create_", "_convert_"}),
    "dataclasses.py": frozenset({"make_dataclass"}),
    "warnings.py": frozenset({"warn", "warn_explicit"}),
    "traceback.py": frozenset(
        {
            "format_exc",
            "format_exception",
            "format_exception_only",
            "format_stack",
            "format_tb",
            "print_exc",
            "print_exception",
            "print_stack",
            "print_tb",
            "print_last",
        }
    ),
}
#: The import system's entry points: the module code it runs is the module's own file's.
_IMPORTING = frozenset({"_find_and_load", "_handle_fromlist", "_gcd_import"})
IMPORT_KEEPERS = {
    "<frozen importlib._bootstrap>": _IMPORTING,
    "importlib/_bootstrap.py": _IMPORTING,
    "importlib/__init__.py": frozenset({"import_module", "reload"}),
}
#: Outcomes that count for a test rather than against it: only the framework may report them.
FAVOURABLE = frozenset({"passed", "skipped", "xfailed"})
#: The violations kept: enough to name every capability, not a flood.
MAX_VIOLATIONS = 20
#: Names of a test module that its framework calls: they must be the test's own code.
LOADER_HOOKS = frozenset(
    {"load_tests", "setUpModule", "tearDownModule", "pytest_generate_tests", "pytestmark"}
)

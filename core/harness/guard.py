"""The guard: what code from the seed's editable files may not do while the tests run.

Like :mod:`.main`, this module is never imported by the agent: the harness
loads it inside the sandbox, before any seed code runs, in the process that
runs the test framework. It is a tripwire, not a wall: code in the same
process can in principle get around anything done in that process (see
``docs/security.md`` for what a verdict proves).

Everything the guard keeps (the report's key and descriptor, the snapshot of
the framework, which code is untrusted, the test under way) lives in the
closure of one audit hook (PEP 578), :func:`install`. Nothing in the
interpreter refers to that function but the runtime's own list of hooks, which
Python code cannot read: no attribute, module, class or ``__closure__`` walk
leads to it, and ``gc`` and frames, the ways that would, are what it refuses.
The functions it calls are taken when it is installed, so replacing
``json.dumps`` or ``os.path.realpath`` later changes nothing it does.

The collectors (:mod:`.unittest_runner`, :mod:`.pytest_plugin`) tell it what
the framework reported through ``sys.audit`` events of their own
(``sandboxed-coding-agent.*``). It writes a test's outcome only when:

* the event comes from a harness file, called by the framework's own code for
  a success, skip or expected failure;
* no frame of untrusted code is on the stack (the framework reports after the
  code under test has returned; code under test that reports is forging);
* it is about the test under way (started, not yet stopped, the same object);
* the framework's functions and classes are those noted before any seed code
  ran (compared at every outcome, at every test's end and at the end).

A test stopped without an outcome is an ``error``. While untrusted code (an
editable file, a file on a device of the folders the test may write, behind a link
there, deleted or inside an archive there, code made under a ``<...>`` name while
such code ran or in a thread other than the tests') is
asking, the hook refuses the events of each capability below, unless the
seed allows it (``[guard] allow``), raising :class:`PermissionError` there and
writing the refusal to the report, so catching the error does not help:

``introspection``: frames (``sys._getframe``, ``tb_frame``, ``gi_frame``...),
code objects of the seed's tests, the framework's or the harness's (``__code__``:
a test's constants are its expected values; the project's other modules' are its
own), ``gc`` object walks, other threads' frames and new audit hooks (refused to all
but the harness, as is any event of a stack of the standard library's alone), trace,
profile and monitoring hooks, new code objects (``marshal.loads`` too), code set on a function
(``__code__ = ...``), code compiled under another file's name.
``native-code``: ``ctypes``, ``cffi``, the interpreter's test modules, native
modules from the folders the test may write (refused whoever imports them).
``processes``: starting, replacing or signalling processes.
``test-files``: reading or importing the seed's test files (known by inode too, so
``/proc/self/root/...`` or a link reads none).
``write-code``: writing ``.py``, ``.pyc``, ``.so`` or ``.pth`` files, or renaming or linking
a file to such a name.

Who asks for an introspection event is the first frame outside the standard
library (its folders as the runtime's ``sysconfig`` names them when the guard
is installed; ``site-packages``, the harness and the framework's packages are
not in it), so a standard library function cannot hand the code under test a
frame it asked for. Many of them look at frames for themselves (``logging``
finds the caller's line, ``namedtuple`` and ``enum`` the caller's module,
``traceback`` formats a stack, an import runs a module): when the function the
code under test called is one of those (``rules.FRAME_KEEPERS``), and no module
between it and the event holds a function of the code under test (which the
standard library would call with a frame: ``logging._is_internal_frame``) nor
runs a method for an object of the code under test's (an import loader whose
``get_data`` gives its own source under a test's or logging's file name), the
event is allowed; any other (``logging.currentframe``, ``inspect.stack``,
``traceback.walk_stack``, ``traceback.extract_stack``...) is refused. Code made
at run time under a name such as ``"<string>"`` (a ``typing.ForwardRef``'s, a
dataclass's methods) asks for whoever called it. The rule
fails safe: a helper missing from the list is refused, never trusted. A code
object is decided by whose it is, whoever reads it: the code under test may
read its own, and the standard library's, never a test's (through ``dis`` or
``inspect`` either). Code compiled or run through the standard library under
the name of a file it is not (``code.InteractiveConsole``, ``source_to_code``)
is refused; an import is the import system's own, unless it loads from a file
the test may have written (a zip in ``/tmp``), whose code must then bear its own
name, and whose ``.pyc`` the code under test may not unmarshal (a module inside
an archive is of the archive's kind). The guard reads types, classes' members and
functions' code from the C slots (``type.__dict__["__mro__"]``...), so that no
property of the code under test's (``__class__``, a metaclass's ``__dict__``)
runs inside the hook.

A reported test counts only when its function (or the function its decorator
wraps) comes from a file of the seed that is not editable: a class made at run
time whose test is ``TestCase.setUp`` is the framework's code, not a test. A
class a test module defines may hold only such functions: a framework function
given to it while the tests load (``assertTrue`` as its ``assertEqual``) is a
violation. Under pytest, the functions of pytest's and pluggy's classes are
compared too while the tests run (a replaced ``TestReport.from_item_and_call``
would make the report), and so are the plugin manager's hooks: an
implementation of the code under test's (a plugin it registered, whose report
hook turns a failure into a pass) or a hook call monitor set after the session
started is a violation. A pytest test counts only while its item holds no
function of the code under test's (a ``runtest`` set on the next test's item
would run instead of it; a fixture's object kept on it is the test's own), and
its session, configuration and plugin manager no function or object of it.

What the framework's functions close over is compared too (a cell rebound leaves the
function the same), and so are the members of the standard library's classes that the
framework's modules hold (``contextlib``'s context manager): one replaced by a function of
the code under test's, or removed, is a violation; a test's own patch is not. A test class
member that stands in place of the framework's (``assertEqual``) must be a function of the
seed's. A frame read (``tb_frame``) by trusted code that the code under test called is
judged as the code under test's: every frame between the code under test and the event
counts, not the first one outside the standard library. And whatever the comparisons miss
between two of them, the outcome is checked against what the test raised where the
framework calls it (the collectors' ``raised`` event): a test that raised is never a pass.
unittest's classes, the harness's and ``contextlib``'s context manager are made immutable
when the framework is noted (Python 3.10 and later), so nothing is set on them even for an
instant; the function the framework calls as a test is checked as it is called
(``calling``), and a test reported passed must have been called (a pytest ``Function`` item,
a unittest case run through ``TestCase._callTestMethod``).

What it compares is remembered by identity: an owner's entries are compared one by one only
when one of its namespace's values changed since the last comparison found none changed,
and answers about a class (does it run the code under test's functions?) are kept while
nothing of its hierarchy changes. A class of many tests would otherwise cost a read of every
function's code (an audit event each) at every outcome.
"""

from __future__ import annotations

import os
import sys
import types

#: The standard library's ``typing`` is imported by no framework run: annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Where the runner put the harness's files.
HARNESS_FOLDER = os.path.dirname(os.path.abspath(__file__)) + "/"
EVENT = "sandboxed-coding-agent."


def _function_locals() -> Any:
    """A function frame's ``f_locals``, as this Python makes it."""
    return sys._getframe().f_locals


def install(settings: dict[str, Any], report_fd: int, key: bytes, rules: Any) -> None:
    """Install the guard's audit hook; from here on only events reach what it keeps.

    :param rules: the :mod:`.rules` module, whose values the hook takes now.
    """
    # Everything the hook calls, taken now: the code under test may replace module
    # attributes and builtins later, never these references.
    getframe, write_fd, stat_, lstat_ = sys._getframe, os.write, os.stat, os.lstat
    access, w_ok = os.access, os.W_OK
    import stat as stat_module

    s_isreg, s_islnk = stat_module.S_ISREG, stat_module.S_ISLNK
    get_ident = _get_ident()
    digest = _hmac_sha256()
    quote = _json_string()
    sorted_, repr_, isinstance_, str_, int_, float_, len_, vars_, getattr_, type_ = (
        sorted,
        repr,
        isinstance,
        str,
        int,
        float,
        len,
        vars,
        getattr,
        type,
    )
    frame_type, code_type, function_type = types.FrameType, types.CodeType, types.FunctionType
    callable_, range_ = callable, range
    any_, list_, tuple_, set_, frozenset_, round_, bytes_ = (
        any,
        list,
        tuple,
        set,
        frozenset,
        round,
        bytes,
    )
    fsdecode, fspath, modules, everything = os.fsdecode, os.fspath, sys.modules, slice(None)
    o_write = os.O_WRONLY | os.O_RDWR
    import pathlib

    pure_path, path_fspath = pathlib.PurePath, pathlib.PurePath.__fspath__
    # The module's constants, as they are now: its globals can be reached (a function of
    # this module's __globals__), these locals cannot.
    trusted, untrusted_, neutral = int(rules.TRUSTED), int(rules.UNTRUSTED), int(rules.NEUTRAL)
    harness_folder, event_prefix = HARNESS_FOLDER, EVENT
    framework_modules = tuple(rules.FRAMEWORK_MODULES)
    frame_attributes, native_modules = rules.FRAME_ATTRIBUTES, rules.NATIVE_MODULES
    process_events, introspection_events = rules.PROCESS_EVENTS, rules.INTROSPECTION_EVENTS
    tracing_events, code_suffixes = rules.TRACING_EVENTS, tuple(rules.CODE_SUFFIXES)
    # Events that give a file a new name (their second argument): os.replace is os.rename.
    names_events = frozenset({"os.rename", "os.link", "os.symlink"})
    object_walks = frozenset(rules.HARNESS_ONLY_EVENTS)
    favourable, max_violations = rules.FAVOURABLE, int(rules.MAX_VIOLATIONS)
    code_attributes = frozenset(rules.CODE_ATTRIBUTES)
    frame_keepers = {file: frozenset(names) for file, names in rules.FRAME_KEEPERS.items()}
    import_keepers = {file: frozenset(names) for file, names in rules.IMPORT_KEEPERS.items()}
    code_makers = {file: frozenset(names) for file, names in rules.CODE_MAKERS.items()}
    import importlib.machinery

    library_loaders = (
        importlib.machinery.SourceFileLoader,
        importlib.machinery.SourcelessFileLoader,
    )
    bootstrap_external = (
        "<frozen importlib._bootstrap_external>",
        "importlib/_bootstrap_external.py",
    )
    # Importing a module gives the importer the module alone, whatever its code looked at.
    frame_keepers.update(import_keepers)
    # The import system runs a module's code through this function (its code object, not
    # its name, which code made at run time could bear).
    import_runs_code = getattr_(
        sys.modules.get("_frozen_importlib"), "_call_with_frames_removed", None
    )
    import_runs_code = getattr_(import_runs_code, "__code__", None)
    #: The code of the project's own modules as the import system ran it, by id (kept alive).
    module_code: dict[int, Any] = {}
    id_ = id
    method_type, builtin_types = types.MethodType, (types.BuiltinFunctionType, types.ModuleType)
    issubclass_ = issubclass
    # A namespace may be a dict of the code under test's subclass (a class body's, from a
    # metaclass's __prepare__; exec's): its own get or values would run inside the hook.
    dict_get, dict_values = dict.get, dict.values
    # What a function frame's f_locals is: a dict, or from Python 3.13 a proxy (PEP 667),
    # whose own get the code under test cannot replace.
    locals_type = type_(_function_locals())
    locals_get = locals_type.get
    # Read from the C slots: a class of the code under test's may define these as properties.
    class_mro, class_dict = type.__dict__["__mro__"].__get__, type.__dict__["__dict__"].__get__
    function_code = types.FunctionType.__dict__["__code__"].__get__
    method_function = types.MethodType.__dict__["__func__"].__get__
    classmethod_function = classmethod.__dict__["__func__"].__get__
    staticmethod_function = staticmethod.__dict__["__func__"].__get__
    loader_hooks = frozenset(rules.LOADER_HOOKS)
    # What a function closes over, read from the C slots: a cell rebound changes what a
    # framework function does while the function object stays the same.
    function_closure = types.FunctionType.__dict__["__closure__"].__get__
    cell_contents = types.CellType.__dict__["cell_contents"].__get__
    module_type, empty = types.ModuleType, object()
    import operator

    is_, all_ = operator.is_, all
    #: Answers about classes, with the hierarchy each was given for (see ``remembered``).
    problems: list[Any] = []
    foreign_classes: list[Any] = []
    slot_types = (types.GetSetDescriptorType, types.MemberDescriptorType)
    import gc

    referents = gc.get_referents
    freeze = _class_freezer()
    permission_error, interrupted, os_error = PermissionError, InterruptedError, OSError
    import_error = ImportError
    cwd = os.getcwd()
    # The project's folder, where the test runs (never the whole tree).
    cwd_prefix = cwd.rstrip("/") + "/" if cwd.rstrip("/") else "\0"

    def exact(text: Any) -> str | None:
        """``text`` as a plain ``str`` (a subclass's methods are the code under test's)."""
        if isinstance_(text, str_):
            return str_.__getitem__(text, everything)
        if isinstance_(text, bytes_):
            return fsdecode(bytes_.__getitem__(text, everything))
        if isinstance_(text, pure_path) and type_(text).__fspath__ is path_fspath:
            return exact(fspath(text))
        return None

    def normal(path: str) -> str:
        """``path`` made absolute and without ``.``, ``..`` or doubled ``/``, by text alone."""
        parts: list[str] = []
        for part in (path if path.startswith("/") else cwd + "/" + path).split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return "/" + "/".join(parts)

    def absolute(paths: Any) -> frozenset[str]:
        return frozenset(normal(str_(p)) for p in paths or ())

    editable = absolute(settings.get("editable"))
    standard, not_standard = _standard_library(normal)
    seed_files = absolute(settings.get("files"))
    tests = absolute(settings.get("tests"))
    # The test files as files, not names: /proc/self/root/..., /proc/self/cwd/... or a link
    # the test makes reads the same file under another text.
    test_inodes = set_()
    for test_file in tests:
        try:
            found_test = stat_(test_file)
        except os_error:
            continue  # a test file the seed does not have: nothing to read
        test_inodes.add((found_test.st_dev, found_test.st_ino))
    test_modules = frozenset(_module_names(settings.get("tests") or ()))
    describe = _describer(frame_type)
    allow = frozenset(str_(c) for c in settings.get("allow") or ())
    kinds: dict[str, int] = {}
    tainted: set[str] = set()
    busy: set[int] = set()
    state: dict[str, Any] = {
        "seq": 0,
        "fd": report_fd,
        "violations": 0,
        "snapshot": None,
        "classes": (),
        "instances": (),
        "tests_noted": False,
        "framework_files": frozenset(),
        "current": None,
        "reported": False,
        "changed": False,
        "finished": False,
        "raised": False,
        "wrong_call": False,
        "called": False,
        "noted": {},
        "framework_types": frozenset(),
        "test_case": None,
        "function_item": None,
        "frozen": frozenset(),
        "live": (None, []),
        "session_groups": (None, []),
        "library_groups": [],
        "class_values": (None, []),
        "framework_folders": ("\0",),
        "plugins": None,
        "session": (),
        "cells": (),
        "session_cells": (),
        "library": (),
        "library_cells": (),
    }

    def write(kind: str, **fields: Any) -> None:
        if state["fd"] < 0 or state["finished"]:
            return
        state["seq"] += 1
        fields["kind"], fields["seq"] = kind, state["seq"]
        items = []
        for name in sorted_(fields):
            value = fields[name]
            if isinstance_(value, bool) or value is None:
                text = "true" if value is True else "false" if value is False else "null"
            elif isinstance_(value, (int_, float_)):
                text = repr_(value)
            else:
                text = quote(str_(value))
            items.append(quote(name) + ": " + text)
        body = "{" + ", ".join(items) + "}"
        data = (digest(key, body.encode("utf-8")) + " " + body + "\n").encode("utf-8")
        while data:
            try:
                data = data[write_fd(state["fd"], data) :]
            except interrupted:
                continue
            except os_error:
                state["fd"] = -1
                return

    # The folders the test may write (its working folder, its temporary folders), as the
    # runner names them: code there is the run's own making, unless it is a seed file.
    roots = tuple_(normal(str_(r)).rstrip("/") + "/" for r in settings.get("writable") or ())

    # Their devices: a file is decided by where it lives, not by whether it is writable now
    # (a module renamed into place and made read-only, or deleted, is still the run's own).
    # A read-only bind under them (the seed's files, a seed runtime under /tmp) has another.
    devices = set_()
    for root in roots:
        try:
            devices.add(stat_(root).st_dev)
        except os_error:
            continue  # a folder the sandbox does not have
    # Where the writable folders share a device with the interpreter's own code (a remote
    # sandbox or a container with one file system), the device says nothing: there a file
    # under a writable folder that may be written now is the run's (a runner that uploads a
    # git seed's tree makes it read-only), and a renamed, read-only module of the run's own
    # is not seen: docs/security.md says so.
    shared = set_()
    for folder in (harness_folder, *standard, *not_standard):
        try:
            shared.add(stat_(folder).st_dev)
        except os_error:
            continue
    shared &= devices

    def on_writable_device(path: str, device: int) -> bool:
        if device not in devices:
            return False
        if device not in shared:
            return True
        return (path + "/").startswith(roots) and bool(access(path, w_ok))

    def writable(path: str) -> bool:
        """Whether ``path`` lies where the test may write: on a device of the folders it may
        write, behind a link it could point elsewhere, or nowhere (deleted, or a member of
        an archive that is not on a read-only device)."""
        if path.startswith(("/proc/", "/dev/")):
            # Links the process itself points (its working folder, its descriptors:
            # /dev/stdin, /dev/fd/3); no code lives there.
            return True
        try:
            found = stat_(path)
        except os_error:
            # A module inside an archive (/tmp/a.zip/m.py) is the archive's; a deleted file,
            # or one that never was, is the run's own.
            parent = path
            while parent != "/":
                parent = parent.rsplit("/", 1)[0] or "/"
                try:
                    found = stat_(parent)
                except os_error:
                    continue
                return not s_isreg(found.st_mode) or on_writable_device(parent, found.st_dev)
            return True
        if on_writable_device(path, found.st_dev):
            return True
        prefix = path
        while prefix != "/":
            try:
                link = lstat_(prefix)
            except os_error:
                return True
            if s_islnk(link.st_mode) and on_writable_device(prefix, link.st_dev):
                return True  # a link the test could point at its own file later
            prefix = prefix.rsplit("/", 1)[0] or "/"
        return False

    def kind(filename: str) -> int:
        known = kinds.get(filename)
        if known is not None:
            return known
        if filename in tainted:
            found = untrusted_
        elif filename.startswith("<"):
            found = neutral
        else:
            real = normal(filename)
            if real in editable:
                found = untrusted_
            elif real in seed_files or real.startswith(harness_folder):
                found = trusted
            else:
                found = untrusted_ if writable(real) else trusted
        kinds[filename] = found
        return found

    # The thread the tests run in: the framework starts no other, so code made in another
    # (a thread the code under test started, whatever function it runs: exec) is its own.
    main_thread = get_ident()

    def dynamic_origin(frame: Any) -> bool:
        """Whether code made now under a ``<...>`` name is the code under test's: untrusted
        code is on this thread's stack (above the body of a trusted module it imports, which
        makes code of its own: a namedtuple's), or the thread is not the tests' own."""
        if frame is not None:
            maker = code_makers.get(in_library(frame.f_code.co_filename) or "")
            if maker is not None and frame.f_code.co_name in maker:
                return False
        here = frame
        while here is not None:
            code = here.f_code
            found = kind(code.co_filename)
            if found == untrusted_:
                return True
            # A trusted module's body, imported (not run as __main__: runpy.run_module's
            # timeit compiles what sys.argv says), makes code of its own.
            imported = dict_get(here.f_globals, "__name__") != "__main__"
            if code.co_name == "<module>" and found == trusted and imported:
                return False
            here = here.f_back
        return bool(get_ident() != main_thread)

    def untrusted_on_stack(frame: Any) -> bool:
        while frame is not None:
            if kind(frame.f_code.co_filename) == untrusted_:
                return True
            frame = frame.f_back
        return False

    def raised_by_untrusted(traceback: Any) -> bool:
        while traceback is not None:
            if kind(traceback.tb_frame.f_code.co_filename) == untrusted_:
                return True
            traceback = traceback.tb_next
        return False

    library: dict[str, str | None] = {}

    def in_library(filename: str) -> str | None:
        """The file's name within the standard library (a frozen module's own name), or
        ``None`` for a file outside it: the harness and the framework's packages are not
        in it, nor is anything the test may write."""
        if filename in library:
            return library[filename]
        found: str | None = None
        if filename.startswith("<frozen "):
            found = filename
        elif not filename.startswith("<") and kind(filename) == trusted:
            real = normal(filename)
            if not real.startswith(harness_folder) and not real.startswith(not_standard):
                for folder in standard:
                    if real.startswith(folder):
                        found = real[len_(folder) :]
                        break
        library[filename] = found
        return found

    def asker(frame: Any) -> tuple[Any, Any]:
        """Who asks for what an event gives: the first frame outside the standard library,
        and the standard library's frame it called (``None`` when it asked itself)."""
        called = None
        while frame is not None:
            filename = frame.f_code.co_filename
            # Code made at run time under a name such as "<string>" (a ForwardRef's, a
            # dataclass's methods) asks for whoever called it, unless the code under test made it.
            made = filename.startswith("<") and filename not in tainted
            if not made and in_library(filename) is None:
                break
            called, frame = frame, frame.f_back
        return frame, called

    def foreign(value: Any) -> bool:
        """Whether ``value`` (a module's global) would run the code under test when called.

        It runs none of the value's code: types are read from the C slots (``isinstance``
        would read a ``__class__`` property, ``vars`` a metaclass's ``__dict__``)."""
        kind_of = type_(value)
        if issubclass_(kind_of, method_type):
            value = method_function(value)
            kind_of = type_(value)
        if issubclass_(kind_of, function_type):
            return kind(function_code(value).co_filename) == untrusted_
        if issubclass_(kind_of, builtin_types) or not callable_(value):
            return False
        cls = value if issubclass_(kind_of, type_) else kind_of
        return bool(remembered(foreign_classes, cls, runs_untrusted_code))

    def runs_untrusted_code(cls: Any) -> bool:
        """Whether a member of ``cls`` or of a class it inherits from is a function of the
        code under test's."""
        # A class still being made has no MRO (nor, before that, a dict) yet: its own
        # dict is all there is to read.
        for owner in class_mro(cls) or (cls,):
            members = class_dict(owner)
            for member in list_(members.values()) if members is not None else []:
                kind_of = type_(member)
                if issubclass_(kind_of, classmethod):
                    member = classmethod_function(member)
                elif issubclass_(kind_of, staticmethod):
                    member = staticmethod_function(member)
                if (
                    issubclass_(type_(member), function_type)
                    and kind(function_code(member).co_filename) == untrusted_
                ):
                    return True
        return False

    def frame_self(frame: Any) -> Any:
        """The ``self`` of ``frame``'s function, read without running a mapping's methods."""
        names = frame.f_locals
        if type_(names) is locals_type:  # Python 3.13: a proxy of the frame's own variables
            return locals_get(names, "self")
        return dict_get(names, "self") if issubclass_(type_(names), dict) else None

    def own_values(owner: Any) -> list[Any]:
        """The values an object holds in its own ``__dict__`` (none for a class of the code
        under test's, whose ``__dict__`` could be a property of its own)."""
        if foreign(type_(owner)):
            return []
        try:
            return list_(vars_(owner).values())
        except TypeError:  # no __dict__
            return []

    def keeps_frames(frame: Any, called: Any, keepers: dict[str, frozenset[str]]) -> bool:
        """Whether what the standard library gives for ``frame``'s event stays with it:
        ``called`` (the function the asker called) is one of ``keepers``, and no module
        between it and the event holds a function of the code under test, which the
        standard library would call with a frame (``logging._is_internal_frame``)."""
        if called is None:
            return False
        names = keepers.get(in_library(called.f_code.co_filename) or "")
        if names is None or called.f_code.co_name not in names:
            return False
        seen: list[Any] = []
        while frame is not None:
            namespace = frame.f_globals
            if not any_(namespace is other for other in seen):
                seen.append(namespace)
                if any_(foreign(value) for value in list_(dict_values(namespace))):
                    return False
            # A method run for an object of the code under test's (an import loader whose
            # get_data gives its own source under a test's or the standard library's name).
            owner = frame_self(frame)
            if owner is not None and foreign_object(owner):
                return False
            if frame is called:
                return True
            frame = frame.f_back
        return True

    def holds_foreign(owner: Any, objects: bool = True) -> bool:
        """Whether an object of the framework's is the code under test's, or holds, as its own
        attribute, a function (or, with ``objects``, any object) of the code under test's."""
        if foreign(type_(owner)):
            return True
        held = own_values(owner)
        return any_(foreign(v) or (objects and foreign(type_(v))) for v in held)

    def library_import(frame: Any, called: Any, filename: Any = None) -> bool:
        """Whether the event of ``frame`` is the import system's own, loading a module that
        lies in a read-only place (the standard library, the runtime) with a loader of the
        standard library's kind: reading its cached code, or running it (``filename``, the
        code's, is then the module's own file)."""
        for _ in range_(8):
            if frame is None:
                return False
            code = frame.f_code
            if code.co_filename.endswith(bootstrap_external) and code.co_name in (
                "get_code",
                "exec_module",
            ):
                loader = frame_self(frame)
                if type_(loader) not in library_loaders:
                    return False
                path = vars_(loader).get("path")
                if type_(path) is not str_ or kind(path) != trusted or normal(path) in tests:
                    return False
                return filename is None or (
                    type_(filename) is str_ and normal(filename) == normal(path)
                )
            if frame is called:
                return False
            frame = frame.f_back
        return False

    def writable_loader(frame: Any, called: Any) -> bool:
        """Whether a loader between ``frame`` and ``called`` loads from a file the test may
        have written (its ``path`` or ``archive``)."""
        while frame is not None:
            owner = frame_self(frame)
            if owner is not None:
                for value in own_values(owner):
                    if type_(value) is str_ and value.startswith("/") and kind(value) == untrusted_:
                        return True
            if frame is called:
                return False
            frame = frame.f_back
        return False

    def foreign_object(owner: Any) -> bool:
        """Whether ``owner``'s class, or a value it holds, is the code under test's."""
        if foreign(type_(owner)):
            return True
        return any_(foreign(value) for value in own_values(owner))

    def reaches_foreign(value: Any) -> bool:
        """Whether calling ``value`` could run the code under test: it is such a function, or
        holds one within a few steps (a ``functools.partial``, a ``staticmethod``, an object
        whose attribute is one), read by the interpreter's own walk (no code of it runs)."""
        pending: list[tuple[Any, int]] = [(value, 3)]
        seen: set[int] = set_()
        while pending and len_(seen) < 256:
            item, depth = pending.pop()
            if id_(item) in seen:
                continue
            seen.add(id_(item))
            if foreign(item):
                return True
            kind_of = type_(item)
            if depth == 0 or issubclass_(kind_of, (function_type, type_, module_type)):
                continue  # a function or class is what foreign() read; a module is no one's
            if issubclass_(kind_of, (str_, bytes_, int_, float_)):
                continue
            pending.extend((found, depth - 1) for found in referents(item))
        return False

    def cell_value(cell: Any) -> Any:
        try:
            return cell_contents(cell)
        except ValueError:  # an empty cell
            return empty

    def closures(entries: Any) -> tuple[tuple[str, Any, Any], ...]:
        """Each cell the functions of ``entries`` close over (and the functions those cells
        hold close over), with what it holds now."""
        found: list[tuple[str, Any, Any]] = []
        for owner, attribute, value in entries:
            where = f"{getattr_(owner, '__name__', '?')}.{attribute}"
            pending = [(unwrap(value), 2)]
            while pending:
                function, depth = pending.pop()
                if not issubclass_(type_(function), function_type):
                    continue
                for cell in function_closure(function) or ():
                    held = cell_value(cell)
                    found.append((where, cell, held))
                    if depth > 0:
                        pending.append((held, depth - 1))
        return tuple_(found)

    def library_classes() -> list[tuple[Any, str, Any]]:
        """The members of the standard library's classes that the framework's modules hold
        (``contextlib``, through which both frameworks run each test): a member replaced by
        one that runs the code under test changes what the framework decides."""
        held: dict[str, Any] = {}
        for name, module in list_(modules.items()):
            if module is None or (
                name.split(".")[0] not in framework_modules
                and not name.startswith("_sandboxed_coding_agent")
            ):
                continue
            for value in list_(vars_(module).values()):
                if isinstance_(value, module_type):
                    found = value
                elif isinstance_(value, (function_type, type_)):
                    found = modules.get(str_(getattr_(value, "__module__", "") or ""))
                else:
                    continue
                library_name: Any = getattr_(found, "__name__", None)
                if isinstance_(library_name, str_) and library_name.split(".")[0] != "unittest":
                    held[library_name] = found
        entries: list[tuple[Any, str, Any]] = []
        for name, module in held.items():
            if in_library(str_(getattr_(module, "__file__", None) or "<none>")) is None:
                continue  # not the standard library's: a C module, or the framework's own
            for value in list_(vars_(module).values()):
                if isinstance_(value, type_) and value.__module__ == name:
                    entries.extend(members(value))
        return entries

    def violation(capability: str, event: str, detail: str) -> None:
        state["violations"] += 1
        if state["violations"] <= max_violations:
            write("guard", capability=capability, event=event, detail=detail[:300])

    def members(cls: Any) -> list[tuple[Any, str, Any]]:
        """A class's methods and descriptors (not its plain values, which tests may set:
        ``TestCase.maxDiff = None``)."""
        return [
            (cls, k, v)
            for k, v in list_(vars_(cls).items())
            if callable_(v) or isinstance_(v, (classmethod, staticmethod, property))
        ]

    def snapshot() -> None:
        """Note the framework's functions and classes, the harness's own classes, and the
        builtins, before any seed code runs."""
        entries: list[tuple[Any, str, Any]] = []
        session: list[tuple[Any, str, Any]] = []
        classes: list[Any] = []
        files: set[str] = set_()
        for name, module in list_(modules.items()):
            if module is None:
                continue
            ours = name.startswith("_sandboxed_coding_agent")
            if name == "builtins":  # __build_class__, __import__, isinstance...
                found = list_(vars_(module).items())
                entries.extend((module, k, v) for k, v in found if callable_(v))
                continue
            if not ours and name.split(".")[0] not in framework_modules:
                continue
            files.add(normal(str_(getattr_(module, "__file__", "") or "")))
            for attribute, value in list_(vars_(module).items()):
                if isinstance_(value, (function_type, type_)):
                    entries.append((module, attribute, value))
                if isinstance_(value, type_) and value.__module__ == name:
                    # pytest's classes gain members as it runs (cached and lazy ones), and
                    # its plugins patch some until the session ends (legacypath's Config
                    # methods): their own functions are compared while the tests run (a
                    # replaced TestReport.from_item_and_call would make the report).
                    if name.startswith("unittest") or ours:
                        entries.extend(members(value))
                        classes.append(value)
                    else:
                        session.extend(functions(value))
        state["snapshot"] = tuple_(entries)
        state["session"] = tuple_(session)
        state["cells"], state["session_cells"] = closures(entries), closures(session)
        library = library_classes()
        state["library"], state["library_cells"] = tuple_(library), closures(library)
        state["library_groups"] = grouped(library)
        state["classes"] = tuple_(
            (cls, frozenset_(k for _, k, _ in members(cls))) for cls in classes
        )
        loader = getattr_(modules.get("unittest.loader"), "defaultTestLoader", None)
        state["instances"] = () if loader is None else ((loader, dict(vars_(loader))),)
        # The framework's classes, and the context manager both frameworks run each test
        # through, made immutable: no one may set, replace or delete their members from here
        # on (a change made and undone between two comparisons would not be seen).
        held = modules.get("contextlib")
        mock = "unittest.mock"  # its classes are the tests' to patch
        case = getattr_(modules.get("unittest.case"), "TestCase", None)
        frozen = [
            cls
            for cls, _ in state["classes"]
            if not cls.__module__.startswith(mock)
            # unittest's own test classes (an import that failed, a FunctionTestCase) get
            # attributes set as they run, as any test class does.
            and not (case is not None and cls is not case and issubclass_(cls, case))
        ]
        for manager in ("_GeneratorContextManager", "_GeneratorContextManagerBase"):
            runs_tests = getattr_(held, manager, None)
            if isinstance_(runs_tests, type_):
                frozen.append(runs_tests)
        state["frozen"] = frozenset_(id_(cls) for cls in frozen if freeze(cls))
        state["test_case"] = case
        state["function_item"] = getattr_(modules.get("_pytest.python"), "Function", None)
        state["framework_files"] = frozenset_(files)
        types_: set[int] = set_()
        folders: set[str] = set_()
        for name, module in list_(modules.items()):
            top = name.split(".")[0]
            if module is None or (
                top not in framework_modules and not name.startswith("_sandboxed_coding_agent")
            ):
                continue
            file = normal(str_(getattr_(module, "__file__", "") or ""))
            if top != "unittest" and "/" in file:
                folder = file.rsplit("/", 1)[0] + "/"
                # A package's folder (pytest's, _pytest's, pluggy's), or a module's own file.
                folders.add(folder if file.endswith("/__init__.py") and name == top else file)
            for value in list_(vars_(module).values()):
                if isinstance_(value, type_):
                    types_.add(id_(value))
        state["framework_types"] = frozenset_(types_)
        state["framework_folders"] = tuple_(sorted_(folders)) or ("\0",)

    def functions(cls: Any) -> list[tuple[Any, str, Any]]:
        """A class's own functions and methods as it defines them."""
        return [
            (cls, k, v)
            for k, v in list_(vars_(cls).items())
            if isinstance_(v, (function_type, classmethod, staticmethod, property))
        ]

    def own_code(module: Any, file: str) -> bool:
        """Whether ``module`` defines a function or method whose code is ``file``'s."""
        for value in list_(vars_(module).values()):
            found = [value] + (
                [m for _, _, m in members(value)] if isinstance_(value, type_) else []
            )
            for member in found:
                function = unwrap(member)
                # A decorator's wrapper (unittest.skip's) names the test it wraps: read from
                # the function's own attributes, so no code of the seed's runs here.
                for _ in range_(8):
                    if not isinstance_(function, function_type):
                        break
                    if normal(function.__code__.co_filename) == file:
                        return True
                    function = vars_(function).get("__wrapped__")
        return False

    def impostor(name: str, module: Any) -> str | None:
        """Why the module under a test file's name (or path) is not that file's, if it is not:
        the code under test can put a module of its own in ``sys.modules`` before the
        loader imports the test, which then never runs."""
        file = normal(str_(getattr_(module, "__file__", None) or "<none>"))
        if file in tests:
            if file.endswith(("/__init__.py", "/conftest.py")) or own_code(module, file):
                return None
            return f"{name} claims {file} but holds none of its code"
        if name in test_modules and kind(file) != trusted:
            return f"{name} is not the seed's test module"
        return None

    def snapshot_tests() -> None:
        """Note the seed's test modules' functions and classes once they are all imported,
        before the first test runs: the code under test may not change a later test."""
        entries = list_(state["snapshot"] or ())
        classes = list_(state["classes"])
        for name, module in list_(modules.items()):
            problem = impostor(name, module)
            if problem is not None:
                violation("framework", "loader", problem)
        for module in list_(modules.values()):
            if normal(str_(getattr_(module, "__file__", None) or "<none>")) not in tests:
                continue
            for attribute, value in list_(vars_(module).items()):
                if isinstance_(value, (function_type, type_)):
                    entries.append((module, attribute, value))
                if isinstance_(value, type_):
                    entries.extend(members(value))
                    classes.append((value, frozenset_(k for _, k, _ in members(value))))
                # What the loader calls or collects must be the test's own (the code under
                # test can set a name on a test module while that module imports it).
                loaded = attribute in loader_hooks or attribute.startswith(("test", "Test"))
                function = unwrap(value)
                if loaded and isinstance_(function, function_type):
                    if kind(function.__code__.co_filename) == untrusted_:
                        violation("framework", "loader", f"{attribute} is the code under test's")
                elif isinstance_(value, type_):
                    # unittest collects a TestCase whatever its name; pytest, a Test class.
                    problem = foreign_functions(value) if loaded else None
                    problem = problem or borrowed(value, module)
                    if problem is not None:
                        violation("framework", "loader", problem)
        state["noted"] = {
            (id_(owner), attribute): value for owner, attribute, value in entries if attribute
        }
        # The framework's cells as noted before any seed code ran; the tests' as they are now.
        state["cells"] += closures(entries[len_(state["snapshot"] or ()) :])
        state["snapshot"] = tuple_(entries)
        state["classes"] = tuple_(classes)

    def borrowed(cls: Any, module: Any) -> str | None:
        """A function of another file's (the framework's ``assertTrue``, given to a test class
        as its ``assertEqual``) among the own members of a class the test module defines."""
        if vars_(cls).get("__module__") != vars_(module).get("__name__"):
            return None  # a class the test module imported (unittest.TestCase)
        for attribute, member in list_(vars_(cls).items()):
            function = unwrap(member)
            if isinstance_(function, function_type):
                if not seed_test_code(function):
                    return f"{cls.__name__}.{attribute} is not the seed's own code"
            elif shadowed(cls, attribute, member):
                return f"{cls.__name__}.{attribute} stands in for the framework's"
        return None

    def framework_class(owner: Any) -> bool:
        """Whether ``owner`` is one of the framework's classes noted before any seed code ran
        (by identity: any class can claim a ``__module__``), or ``object``."""
        return owner is object or id_(owner) in state["framework_types"]

    def shadowed(cls: Any, attribute: str, member: Any) -> bool:
        """Whether ``member``, on ``cls`` or a class between it and the framework's, stands in
        place of one of the framework's members (``assertEqual``) without being the seed's
        own function or a library's: the framework's ``assertIsNotNone``, a builtin, a
        ``functools.partial``, an object, a class. Plain values (``maxDiff``) and exception
        classes (``failureException``) are the test's business."""
        function = unwrap(member)
        if issubclass_(type_(function), function_type):
            exempt = seed_test_code(function) or library_code(function)
        else:
            descriptor = any_("__get__" in (class_dict(o) or {}) for o in class_mro(type_(member)))
            error_class = issubclass_(type_(member), type_) and issubclass_(member, BaseException)
            # The interpreter's own descriptors of a class's instances (``__dict__``, a slot).
            slot = issubclass_(type_(member), slot_types)
            exempt = (not callable_(member) and not descriptor) or error_class or slot
        if exempt:
            return False
        mro = list_(class_mro(cls) or (cls,))
        for owner in mro[1:]:
            names = class_dict(owner)
            if framework_class(owner) and names is not None and attribute in names:
                return True
        return False

    def library_code(function: Any) -> bool:
        """Whether ``function`` comes from an installed library (``site-packages``), not the
        framework's, the harness's, the standard library's or the code under test's."""
        filename = function_code(function).co_filename
        if kind(filename) != trusted or in_library(filename) is not None:
            return False
        real = normal(filename)
        return real.startswith(not_standard) and not real.startswith(state["framework_folders"])

    def protect(*classes: type) -> None:
        """Add classes made later (the collectors') to the snapshot."""
        entries = list_(state["snapshot"] or ())
        for cls in classes:
            entries.extend((cls, k, v) for k, v in list_(vars_(cls).items()))
        state["cells"] += closures(entries[len_(state["snapshot"] or ()) :])
        state["snapshot"] = tuple_(entries)

    def foreign_hook() -> str | None:
        """A hook of pytest's plugin manager that runs the code under test's function (a
        plugin it registered, whose report hook could turn a failure into a pass), or a
        hook call monitor set since the session started."""
        noted = state.get("plugins")
        if noted is None:
            return None
        manager, hookexec = noted
        if vars_(manager).get("_inner_hookexec") is not hookexec:
            return "the plugin manager's hook calls were replaced"
        relay = vars_(manager).get("hook")
        if relay is None or holds_foreign(manager) or foreign(type_(relay)):
            return "the plugin manager holds the code under test's"
        for hook_name, caller in list_(vars_(relay).items()):
            if foreign(type_(caller)):
                return f"{hook_name} is the code under test's"
            found = [
                getattr_(caller, a, None) or () for a in ("_hookimpls", "_wrappers", "_nonwrappers")
            ]
            for impl in [i for group in found for i in list_(group)]:  # pluggy 1.1+, and 1.0
                function = unwrap(getattr_(impl, "function", None))
                if isinstance_(function, function_type) and foreign(function):
                    return f"{hook_name} has an implementation of the code under test's"
        return None

    def check() -> bool:
        if state["changed"]:
            return False
        problem = foreign_hook()
        if problem is not None:
            state["changed"] = True
            violation("framework", "plugins", problem)
            return False
        # A frozen class's members cannot change: only the others are compared (noted once
        # per snapshot: id() raises an audit event of its own, too dear for every check).
        if state["live"][0] is not state["snapshot"]:
            frozen = state["frozen"]
            noted = tuple_(e for e in state["snapshot"] or () if id_(e[0]) not in frozen)
            state["live"] = (state["snapshot"], grouped(noted))
        if state["session_groups"][0] is not state["session"]:
            state["session_groups"] = (state["session"], grouped(state["session"]))
        for group in state["live"][1] + state["session_groups"][1]:
            now = values_of(group[0])
            if group[1] is not None and same(now, group[1]):
                continue  # nothing of this owner's changed since it was last compared
            for owner, attribute, value in group[2]:
                if own_names(owner).get(attribute) is not value:
                    state["changed"] = True
                    where = getattr_(owner, "__name__", "?")
                    violation(
                        "framework", "changed", f"{where}.{attribute} was replaced or removed"
                    )
                    return False
            group[1] = now
        for where, cell, held in state["cells"] + state["session_cells"]:
            if cell_value(cell) is not held:
                state["changed"] = True
                violation("framework", "changed", f"what {where} closes over was replaced")
                return False
        for group in state["library_groups"]:
            now_values = values_of(group[0])
            if group[1] is not None and same(now_values, group[1]):
                continue
            for owner, attribute, value in group[2]:
                now = own_names(owner).get(attribute, empty)
                # A test may patch the standard library (monkeypatch); the code under test's
                # own function put there would run where the framework decides.
                if now is not value and (now is empty or reaches_foreign(now)):
                    state["changed"] = True
                    where = getattr_(owner, "__name__", "?")
                    violation(
                        "framework", "changed", f"{where}.{attribute} was replaced or removed"
                    )
                    return False
            group[1] = now_values
        for where, cell, held in state["library_cells"]:
            now = cell_value(cell)
            if now is not held and reaches_foreign(now):
                state["changed"] = True
                violation("framework", "changed", f"what {where} closes over was replaced")
                return False
        for instance, was in state["instances"]:
            # The default loader's own attributes may change (errors, its folder), never to
            # something callable: a method set on it would load other tests.
            for key, value in list_(vars_(instance).items()):
                if callable_(value) and was.get(key) is not value:
                    state["changed"] = True
                    violation("framework", "changed", f"the test loader's {key} was set")
                    return False
        if state["class_values"][0] is not state["classes"]:
            state["class_values"] = (state["classes"], [None] * len_(state["classes"]))
        seen = state["class_values"][1]
        for index, (cls, known) in enumerate(state["classes"]):
            now_values = values_of(cls)
            if seen[index] is not None and same(seen[index], now_values):
                continue  # nothing of the class's changed since it was last compared
            seen[index] = now_values
            added = [k for _, k, _ in members(cls) if k not in known]
            if added:
                state["changed"] = True
                where = getattr_(cls, "__name__", "?")
                violation("framework", "changed", f"{where}.{added[0]} was added")
                return False
        return True

    def own_names(owner: Any) -> Any:
        """An owner's own namespace: a class's read from the C slot (a metaclass's
        ``__dict__`` property never runs), a module's as it is."""
        return class_dict(owner) if issubclass_(type_(owner), type_) else vars_(owner)

    def values_of(owner: Any) -> tuple[Any, ...]:
        return tuple_((own_names(owner) or {}).values())

    def grouped(entries: Any) -> list[list[Any]]:
        """``entries`` (owner, name, value), in runs of one owner (as they were noted), each
        with room for the owner's namespace values as a check last found them unchanged: a
        check compares an owner's entries one by one only when one of those values has
        changed since (none is kept yet, so the first check compares them all)."""
        groups: list[list[Any]] = []
        for entry in entries:
            if groups and groups[-1][0] is entry[0]:
                groups[-1][2].append(entry)
            else:
                groups.append([entry[0], None, [entry]])
        return groups

    def unwrap(member: Any) -> Any:
        """The function a method, class method or static method holds, read from its C slot;
        any other object as it is (a ``__func__`` attribute of its own could name anything:
        a ``functools.partial`` claiming to be a test)."""
        kind_of = type_(member)
        if issubclass_(kind_of, classmethod):
            return classmethod_function(member)
        if issubclass_(kind_of, staticmethod):
            return staticmethod_function(member)
        if issubclass_(kind_of, method_type):
            return method_function(member)
        return member

    def foreign_functions(cls: Any) -> str | None:
        """A function of the code under test among ``cls``'s own or inherited members (the
        framework's and the builtins' aside): a test, a setUp or an assert helper put there."""
        return remembered(problems, cls, hierarchy_problem)  # type: ignore[no-any-return]

    def remembered(table: list[Any], cls: Any, find: Any) -> Any:
        """``find(cls)``, kept while nothing of the class's hierarchy changes (compared by
        identity, member by member): reading each function's code raises an audit event, and
        a class of many tests would otherwise cost that many reads at every outcome."""
        found_mro = class_mro(cls)
        if found_mro is None:  # a class still being made
            return find(cls)
        mro = tuple_(found_mro)
        members = tuple_(tuple_((class_dict(o) or {}).values()) for o in mro)
        for index, (known, known_mro, known_members, answer) in enumerate(table):
            if known is cls:
                if same(known_mro, mro) and all_(map(same, known_members, members)):
                    return answer
                del table[index]
                break
        answer = find(cls)
        if len_(table) >= 512:
            del table[0]
        table.append((cls, mro, members, answer))
        return answer

    def same(one: tuple[Any, ...], other: tuple[Any, ...]) -> bool:
        """Whether two tuples hold the same objects (no ``==`` of theirs runs)."""
        return len_(one) == len_(other) and all_(map(is_, one, other))

    def hierarchy_problem(cls: Any) -> str | None:
        for owner in class_mro(cls) or (cls,):
            if framework_class(owner):
                continue
            for attribute, member in list_((class_dict(owner) or {}).items()):
                function = unwrap(member)
                if isinstance_(function, function_type):
                    code = function_code(function)
                    if kind(code.co_filename) == untrusted_:
                        return f"{owner.__name__}.{attribute} is the code under test's"
                # A class between the test's and the framework's (slipped under it while the
                # tests load) holding the framework's assertIsNotNone as its assertEqual.
                closer = (class_mro(cls) or (cls,))[: index_of(cls, owner)]
                overridden = any_(attribute in (class_dict(o) or {}) for o in closer)
                if not overridden and shadowed(cls, attribute, member):
                    return f"{owner.__name__}.{attribute} stands in for the framework's"
        return None

    def index_of(cls: Any, owner: Any) -> int:
        for number, found in enumerate(class_mro(cls) or (cls,)):
            if found is owner:
                return number
        return 0

    def seed_test_code(function: Any) -> bool:
        """Whether ``function``, or a function it wraps (a decorator's ``__wrapped__``), is
        the seed's own code, from a file of the seed that is not editable (one of its files,
        or of a git seed's tree in the working folder)."""
        for _ in range_(8):
            if not isinstance_(function, function_type):
                return False
            file = normal(function.__code__.co_filename)
            # A git seed's tree lies in the working folder, read-only, beside its own files.
            own = file in seed_files or (file.startswith(cwd + "/") and kind(file) == trusted)
            if own and file not in editable:
                return True
            function = vars_(function).get("__wrapped__")
        return False

    def must_be_called(test: Any) -> bool:
        """Whether the collectors tell the guard when ``test``'s function is called: a unittest
        case whose class runs its method through ``TestCase._callTestMethod`` (not an
        asynchronous case's own), or a pytest ``Function`` item (not a unittest case pytest
        runs, nor a doctest)."""
        if isinstance_(getattr_(test, "_testMethodName", None), str_):
            for owner in class_mro(type_(test)) or ():
                names = class_dict(owner) or {}
                if "_callTestMethod" in names:
                    return owner is state["test_case"]
            return False
        return type_(test) is state["function_item"]

    def not_the_test(test: Any, method: Any) -> str | None:
        """Why ``method``, which unittest is about to call as ``test``, is not its test: the
        function is not the one its class held when the tests were noted (or, for a test
        inherited from a module that is not a test file, not a function of the seed's)."""
        if framework_class(type_(test)) and type_(test) is not state["function_item"]:
            return None  # unittest's own (an import that failed, a FunctionTestCase)
        name = getattr_(test, "_testMethodName", None)
        function = unwrap(method)
        if not isinstance_(name, str_):  # a pytest item: its function, as collected
            held = unwrap(vars_(test).get("_obj", None))
            if held is not function or not seed_test_code(function):
                return "the test called is not the function pytest collected"
            return None
        if not isinstance_(name, str_) or not issubclass_(type_(function), function_type):
            return "the test called is not a function"
        noted = state["noted"]
        for owner in class_mro(type_(test)) or ():
            key = (id_(owner), name)
            if key in noted:
                if unwrap(noted[key]) is not function:
                    return f"{name} is not the function its class held when the tests loaded"
                return None
        return None if seed_test_code(function) else "the test called is not the seed's own"

    def foreign_code(test: Any) -> str | None:
        """Why the test that was reported is not the seed's own test, if it is not: its
        function, or a member of its class, comes from the code under test."""
        method_name = getattr_(test, "_testMethodName", None)  # a unittest case
        cls = type_(test) if isinstance_(method_name, str_) else getattr_(test, "cls", None)
        function: Any = None
        if isinstance_(method_name, str_):
            for owner in getattr_(cls, "__mro__", ()):
                if method_name in vars_(owner):
                    function = unwrap(vars_(owner)[method_name])
                    break
        else:  # a pytest item
            function = unwrap(getattr_(test, "function", None))
            # What pytest calls: its item's object (pytest's ``function`` follows any
            # ``__func__`` attribute, so a partial claiming to be the test looks like it).
            held = unwrap(vars_(test).get("_obj", function))
            if held is not function:
                return "its test is not a function of the seed's"
        if not isinstance_(function, function_type):
            return "its test is not a function of the seed's"
        if kind(function.__code__.co_filename) != trusted:
            return "its test is the code under test's"
        if not seed_test_code(function):
            # The framework's own functions are trusted, not tests: a class made at run time
            # whose test is ``TestCase.setUp`` would pass without checking anything.
            return "its test is not a function of the seed's files"
        # What runs the test, as pytest holds it: a method set on the item (its runtest), its
        # session, configuration or plugin manager would run instead of the test.
        config = getattr_(test, "config", None)
        if holds_foreign(test, objects=False):  # a test may keep its objects on its item
            return "its item holds a function of the code under test's"
        manager = getattr_(config, "pluginmanager", None)
        for owner in (getattr_(test, "session", None), config, manager):
            if owner is not None and holds_foreign(owner):
                return f"its {type_(owner).__name__} holds the code under test's"
        return foreign_functions(cls) if cls is not None else None

    def test_event(name: str, args: tuple[Any, ...], frame: Any) -> None:
        """An event of the collectors: a test started, ended or stopped, or a check."""
        if name == "check":  # the end of the tests: the session's own changes may follow
            check()
            state["session"], state["session_cells"], state["plugins"] = (), (), None
            return
        if name == "violation":
            violation(str_(args[0]), str_(args[1]), str_(args[2]))
            return
        if name == "stop-raised":  # unittest takes a _ShouldStop for the part's success
            if raised_by_untrusted(args[1]):
                violation("framework", "_ShouldStop", f"{args[0]!s}: raised by the code under test")
            return
        if name == "error":  # outside any test (a fixture, collection): it can only fail
            write("test", id=str_(args[0])[:1000], outcome="error", seconds=0.0)
            return
        test, test_id = args[0], str_(args[1])[:1000]
        current = state["current"]
        if name == "start":
            if current is not None:
                violation("framework", name, f"{test_id}: started inside {current[1]}")
            state["current"], state["reported"], state["raised"] = (test, test_id), False, False
            state["wrong_call"], state["called"] = False, False
            return
        if current is None or current[0] is not test:
            violation("framework", name, f"{test_id}: not the test under way")
            return
        if name == "raised":  # the test's own code raised, seen where the framework calls it
            state["raised"] = True
            return
        if name == "calling":  # what the framework is about to call as the test
            state["called"] = True
            problem = not_the_test(test, args[2])
            if problem is not None:
                violation("framework", "calling", f"{test_id}: {problem}")
                state["wrong_call"] = True
            return
        if name == "stop":
            if not state["reported"]:
                write("test", id=test_id, outcome="error", seconds=0.0)
            state["current"] = None
            check()
            return
        outcome, seconds, traceback = str_(args[2]), args[3], args[4]
        if outcome in favourable and outcome != "passed" and raised_by_untrusted(traceback):
            violation("framework", outcome, f"{test_id}: raised by the code under test")
            outcome = "failed"
        caller = frame.f_back if frame is not None else None
        if outcome in favourable and (
            caller is None or normal(caller.f_code.co_filename) not in state["framework_files"]
        ):
            violation("framework", outcome, f"{test_id}: not reported by the framework")
            outcome = "error"
        if outcome in favourable and state["wrong_call"]:
            outcome = "error"  # the violation is written where it was called
        if outcome == "passed" and not state["called"] and must_be_called(test):
            # Passed without its function being called: the framework's call was taken away
            # (an implementation removed from pytest's hook).
            violation("framework", outcome, f"{test_id}: passed, but its test was never called")
            outcome = "error"
        if outcome == "passed" and state["raised"]:
            # Whatever stands between the test's code and the framework's decision (a context
            # manager, a hook wrapper) swallowed what the test raised.
            violation("framework", outcome, f"{test_id}: it raised, and was reported passed")
            outcome = "error"
        state["raised"] = False
        problem = foreign_code(test) if outcome in favourable else None
        if problem is not None:
            violation("framework", outcome, f"{test_id}: {problem}")
            outcome = "error"
        if not check():
            outcome = "error"
        state["reported"] = True
        seconds = round_(float_(seconds), 4) if isinstance_(seconds, (int_, float_)) else 0.0
        write("test", id=test_id, outcome=outcome, seconds=seconds)

    def harness_event(name: str, args: tuple[Any, ...]) -> None:
        if name == "native":
            origin = exact(args[1]) or ""
            if writable(normal(origin)):
                violation("native-code", "import", f"native module {args[0]!s} from {origin}")
                raise import_error(f"sandboxed-coding-agent guard: {origin} refused")
        elif name == "snapshot-tests":
            if not state["tests_noted"]:
                state["tests_noted"] = True
                snapshot_tests()
        elif name == "snapshot":
            if state["snapshot"] is None:
                snapshot()
        elif name == "protect":
            protect(*args)
        elif name == "plugins":
            state["plugins"] = (args[0], vars_(args[0]).get("_inner_hookexec"))
        elif name == "start":
            write("start", framework=str_(args[0]))
        elif name in ("end", "aborted"):
            check()
            if name == "end":
                write("end", exit_code=int_(args[0]), seconds=float_(args[1]))
            else:
                write("aborted", reason=str_(args[0])[:300])
            state["finished"] = True

    def test_file_(path: str) -> bool:
        """Whether ``path`` (as ``open`` resolves it, links followed) is a test file."""
        try:
            found = stat_(path)
        except (os_error, ValueError):
            return False  # nothing there to read
        return (found.st_dev, found.st_ino) in test_inodes

    def capability_of(event: str, args: tuple[Any, ...]) -> str | None:
        if event == "object.__getattr__":
            return "introspection" if len_(args) > 1 and args[1] in frame_attributes else None
        if event == "object.__setattr__":
            # Code set on a function runs under that function's name (a test's, say).
            return "introspection" if len_(args) > 1 and args[1] == "__code__" else None
        if event in names_events:
            # A file written under another name and then renamed or linked as code (a .pyc
            # in __pycache__, which -B stops writing but not reading) is written code.
            target = exact(args[1]) if len_(args) > 1 else None
            if target is None:
                return "write-code"  # a path object of the code under test's: any name
            return "write-code" if target.endswith(code_suffixes) else None
        if event == "open":
            path: Any = args[0] if args else None
            if isinstance_(path, int_):
                return None  # a descriptor: its path was checked when it was opened
            text = exact(path)
            if text is None:  # a path object of the code under test's: it may say anything
                return "test-files"
            mode = args[1] if len_(args) > 1 and isinstance_(args[1], str_) else "r"
            flags = args[2] if len_(args) > 2 and isinstance_(args[2], int_) else 0
            writing = any_(c in mode for c in "wax+") or bool(flags & o_write)
            if writing and text.endswith(code_suffixes):
                return "write-code"
            return "test-files" if normal(text) in tests or test_file_(text) else None
        if event == "import":
            name = (exact(args[0]) if args else None) or ""
            if name.split(".")[0] in native_modules:
                return "native-code"
            return "test-files" if name in test_modules else None
        if event in introspection_events or event in tracing_events:
            return "introspection"
        if event in process_events:
            return "processes"
        if event.startswith("ctypes."):
            return "native-code"
        if event == "compile" or event == "exec":
            return "introspection"
        return None

    def dynamic_name(event: str, args: tuple[Any, ...]) -> str | None:
        """The file name of the code a ``compile`` or ``exec`` event makes or runs."""
        found: Any = args[1] if len_(args) > 1 else None
        if event == "exec":
            code: Any = args[0] if args else None
            found = code.co_filename if isinstance_(code, code_type) else None
        return found if isinstance_(found, str_) else None

    def dynamic_code(event: str, args: tuple[Any, ...]) -> bool:
        """Code compiled by untrusted code is untrusted, under whatever name it was given;
        whether it was made to look like a trusted file's."""
        filename: Any
        if event == "compile":
            filename = args[1] if len_(args) > 1 else None
        else:
            code: Any = args[0] if args else None
            filename = code.co_filename if isinstance_(code, code_type) else None
        if not isinstance_(filename, str_):
            return False
        if filename.startswith("<") or kind(filename) == untrusted_:
            tainted.add(filename)
            kinds[filename] = untrusted_
            return False
        return True

    def trusted_code(owner: Any, attribute: str) -> bool:
        """Whether the code object ``owner.attribute`` is a test's, the framework's or the
        harness's. The standard library's code and code made at run time hold no secret, nor
        does the project's own code outside its test files, which the code under test may
        import anyway (a project that reads its own functions' code: astroid)."""
        code: Any = getattr_(owner, attribute, None)
        if not isinstance_(code, code_type):
            return True
        filename = code.co_filename
        if kind(filename) != trusted or in_library(filename) is not None:
            return False
        # The project's own modules' code as the import system ran it, not code a module
        # compiled at run time under its own name (from a test's text, say).
        return id_(code) not in module_code

    def note_module_code(frame: Any, code: Any) -> None:
        """Keep ``code``, and the code it holds, when the import system runs it as a module
        of the project's own, outside its test files."""
        if frame is None or frame.f_code is not import_runs_code:
            return
        real = normal(code.co_filename)
        project = real in seed_files or real.startswith(cwd_prefix)
        if not project or kind(code.co_filename) != trusted or real in tests or test_file_(real):
            return
        pending = [code]
        while pending:
            found = pending.pop()
            if id_(found) not in module_code:
                module_code[id_(found)] = found
                pending.extend(c for c in found.co_consts if isinstance_(c, code_type))

    def forged(event: str, args: tuple[Any, ...]) -> bool:
        """Whether code compiled or run through the standard library for the code under
        test bears the name of a file it did not come from (a test's, the framework's)."""
        filename: Any
        if event == "compile":
            filename = args[1] if len_(args) > 1 else None
        else:
            code: Any = args[0] if args else None
            filename = code.co_filename if isinstance_(code, code_type) else None
        if not isinstance_(filename, str_) or filename.startswith("<"):
            return False
        return kind(filename) != untrusted_

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(event_prefix):
            frame = getframe(1)
            if frame is None or not frame.f_code.co_filename.startswith(harness_folder):
                violation("framework", event, "a harness event from elsewhere")
                return
            name = event[len(event_prefix) :]
            if name == "native":  # any import of a native module, whoever asks
                harness_event(name, args)
                return
            if untrusted_on_stack(frame):
                violation("framework", event, "a harness event while the code under test ran")
                return
            if name.startswith("test."):
                test_event(name[5:], args, frame)
            else:
                harness_event(name, args)
            return
        capability = capability_of(event, args)
        if capability is None or state["finished"]:
            return
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            frame = getframe(1)
            if frame is not None and frame.f_code.co_filename.startswith(harness_folder):
                return  # the harness's own look at frames and files
            if event == "exec" and args and isinstance_(args[0], code_type):
                note_module_code(frame, args[0])
            who, called = asker(frame)
            if (event == "compile" or event == "exec") and dynamic_origin(frame):
                # Made for the code under test, whoever compiles it (code.InteractiveConsole,
                # a thread whose target is exec): its frames are the code under test's.
                made = dynamic_name(event, args) or ""
                # A frozen module the import system runs was compiled by no one here (code
                # compiled under a frozen module's name was tainted at its compile event).
                frozen = event == "exec" and made.startswith("<frozen ")
                if made.startswith("<") and not frozen:
                    tainted.add(made)
                    kinds[made] = untrusted_
            if event in object_walks:
                pass  # every object, or every thread's frame: the harness's alone
            # A stack of the standard library's alone (a thread the code under test started
            # on gc.get_objects) is no one's: it is refused as the code under test's.
            elif who is not None and kind(who.f_code.co_filename) != untrusted_:
                if event in tracing_events and untrusted_on_stack(frame):
                    pass  # a trace function set for the code under test: below
                elif (
                    event == "object.__getattr__"
                    and args[1] not in code_attributes
                    and untrusted_on_stack(who)
                ):
                    # Every frame between the code under test and the event is judged: a
                    # function of the project's own that the code under test called and
                    # that reads a traceback's frame (a getattr helper) reads it for it.
                    pass
                elif capability == "introspection":
                    return
            if event in object_walks:
                pass  # refused below, whoever called the standard library's function
            elif event == "compile" or event == "exec":
                if called is None:
                    if not dynamic_code(event, args):
                        return
                elif keeps_frames(frame, called, import_keepers):
                    # The import system runs every module's code this way; a module the test
                    # may have written (a zip's) must not bear another file's name.
                    if not (writable_loader(frame, called) and forged(event, args)):
                        return
                elif not forged(event, args):
                    # The standard library compiles code of its own making under names of its
                    # own (dataclasses, namedtuple, typing) for the code under test.
                    return
                # A module of a read-only place that the import system runs for a C function
                # the code under test called (socket.getaddrinfo's codec).
                elif (
                    event == "exec"
                    and args
                    and isinstance_(args[0], code_type)
                    and library_import(frame, called, args[0].co_filename)
                ):
                    return
            elif event in tracing_events:
                # A trace function of the code under test would see every frame.
                hooked = args[0] if args else None
                # Read from the C slots: an object's __code__ may be a property of its own.
                untrusted = foreign(hooked) or foreign(type_(hooked))
                if not untrusted and not untrusted_on_stack(frame):
                    return
            elif event == "object.__getattr__" and args[1] in code_attributes:
                # Code objects hold constants (a test's expected values), never a way to a
                # frame: the code under test may read its own, and code of its own making.
                if not trusted_code(args[0], args[1]):
                    return
            elif capability == "introspection":
                # Who asks: the first frame outside the standard library. A frame, a
                # traceback or an object walk reaches it unless the standard library's
                # function it called keeps what it saw (logging, namedtuple, enum...).
                # Unmarshalled code from a folder the test may write (a zip's .pyc) could
                # bear any file's name.
                unmarshalled = event.startswith("marshal.") and writable_loader(frame, called)
                if keeps_frames(frame, called, frame_keepers) and not unmarshalled:
                    return
                # An import the standard library makes for a C function the code under test
                # called (socket.getaddrinfo imports encodings.idna), of a module from a
                # read-only place: the import system's own loader unmarshals its cache.
                if (
                    event.startswith("marshal.")
                    and not unmarshalled
                    and library_import(frame, called)
                ):
                    return
            elif who is not None and not untrusted_on_stack(frame):
                return
        finally:
            busy.discard(me)
        if capability in allow:
            return
        violation(capability, event, describe(event, args))
        raise permission_error(
            f"sandboxed-coding-agent guard: the code under test may not use {capability} "
            f"({event}); a seed allows it with [guard] allow = [{capability!r}]"
        )

    sys.meta_path.insert(0, _NoWritableExtensions())
    _audit_fork_exec()
    sys.addaudithook(hook)


def _class_freezer() -> Any:
    """``freeze(cls)``: mark a class immutable, as the interpreter's own types are (Python
    3.10 and later refuse then to set or delete its attributes, whoever asks); a function
    that does nothing where that cannot be done (an older Python, no ``ctypes``).

    ``ctypes`` is taken before the guard's hook is installed and left out of ``sys.modules``
    afterwards: the code under test that imports it again is refused (``native-code``)."""
    immutable = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE

    def nothing(cls: Any) -> bool:
        return False

    if sys.version_info < (3, 10):  # noqa: UP036 - the harness runs on the runtime's Python
        return nothing
    ours = ("ctypes.", "_ctypes")
    had = {name for name in sys.modules if name == "ctypes" or name.startswith(ours)}
    try:
        import ctypes
    except Exception:  # no ctypes, or no memory for its first callback: nothing is frozen
        return nothing
    word = ctypes.c_ulong
    for name in [n for n in sys.modules if n == "ctypes" or n.startswith(ours)]:
        if name not in had:
            del sys.modules[name]
    # Where the type's flags lie: the word after the header that holds what __flags__ says.
    flags = type.__dict__["__flags__"].__get__
    found = [
        offset
        for offset in range(8, 512, 8)
        if word.from_address(id(type) + offset).value == flags(type)
    ]
    if not found:
        return nothing
    offset = found[0]

    def freeze(cls: Any) -> bool:
        field = word.from_address(id(cls) + offset)
        if field.value != flags(cls):  # not the same place in this type: left as it is
            return False
        field.value = field.value | immutable
        return True

    return freeze


class _NoWritableExtensions:
    """Asks the guard's hook about every native module before it is loaded; the hook
    refuses one from the folders the test may write, whoever imports it. It holds
    nothing of the hook's, which it reaches only through an event."""

    def __init__(self) -> None:
        import importlib.machinery

        self._find = importlib.machinery.PathFinder.find_spec
        self._loader = importlib.machinery.ExtensionFileLoader
        self._audit = sys.audit

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        spec = self._find(name, path)
        if isinstance(getattr(spec, "loader", None), self._loader):
            self._audit(EVENT + "native", name, getattr(spec, "origin", None) or "")
        return None


def _standard_library(normal: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The standard library's folders, as the runtime's ``sysconfig`` names them, and the
    folders within them that are not the standard library (``site-packages``)."""
    import sysconfig

    paths = sysconfig.get_paths()
    found: dict[str, set[str]] = {"stdlib": set(), "site": set()}
    kinds = {"stdlib": "stdlib", "platstdlib": "stdlib", "purelib": "site", "platlib": "site"}
    for name, group in kinds.items():
        folder = paths.get(name)
        if folder:
            for path in (folder, os.path.realpath(folder)):
                found[group].add(normal(path).rstrip("/") + "/")
    for entry in sys.path:
        if os.path.basename(entry.rstrip("/")) in ("site-packages", "dist-packages"):
            found["site"].add(normal(entry).rstrip("/") + "/")
    return tuple(sorted(found["stdlib"])), tuple(sorted(found["site"]))


def _get_ident() -> Any:
    import threading

    return threading.get_ident


def _hmac_sha256() -> Any:
    """HMAC-SHA256 as a C function where there is one (nothing of it can be replaced)."""
    try:
        from _hashlib import hmac_digest
    except ImportError:  # no OpenSSL: the pure version, taken now all the same
        import hashlib
        import hmac

        new = hmac.new

        def pure(key: bytes, message: bytes) -> str:
            return new(key, message, hashlib.sha256).hexdigest()

        return pure

    def hexdigest(key: bytes, message: bytes) -> str:
        return str(hmac_digest(key, message, "sha256").hex())

    return hexdigest


def _json_string() -> Any:
    try:
        from _json import encode_basestring_ascii
    except ImportError:
        from json.encoder import py_encode_basestring_ascii as encode_basestring_ascii
    return encode_basestring_ascii


def _audit_fork_exec() -> None:
    """``subprocess`` raises its audit event in Python, before the C function that starts the
    process: that function, called directly, raises one too."""
    try:
        import _posixsubprocess
    except ImportError:
        return
    start = _posixsubprocess.fork_exec
    audit = sys.audit

    def fork_exec(*arguments: Any) -> Any:
        audit("subprocess.Popen", "fork_exec", arguments[:1], None, None)
        return start(*arguments)

    _posixsubprocess.fork_exec = fork_exec


def _module_names(paths: Any) -> list[str]:
    names = []
    for path in paths:
        text = str(path)
        if text.endswith(".py"):
            stem = text[:-3]
            names.append(stem.replace("/", "."))
            names.append(stem.rsplit("/", 1)[-1])
    return names


def _describer(frame_type: Any) -> Any:
    """``describe(event, args)``, with the builtins it uses taken now."""
    type_, repr_, isinstance_, len_ = type, repr, isinstance, len

    def describe(event: str, args: tuple[Any, ...]) -> str:
        try:
            if event == "object.__getattr__" and len_(args) > 1:
                return f"{type_(args[0]).__name__}.{args[1]}"
            first: Any = args[0] if args else None
            if isinstance_(first, frame_type):
                return f"frame of {first.f_code.co_filename}"
            if args:
                return repr_(args[0])[:200]
        except Exception:  # noqa: S110 - a description is best effort
            pass
        return event

    return describe

# Code run by exec as a thread's target: the compiler was the standard library's thread, so
# the "<string>" code was no one's and its add() could take frames. Code made under a
# <...> name in a thread other than the tests' is now the code under test's.
# WAY IN: code run by exec() from a thread is nobody's, so the guard lets it do anything.
# The guard decides "who asks" from the stack: frames whose co_filename is an editable
# file, a writable file or a "<...>" name *tainted* because untrusted code compiled it.
# exec(SOURCE) called directly from calculator.py taints "<string>"; but here exec is the
# target of a threading.Thread, so the frame below the audit event is threading.run
# (standard library, trusted): "<string>" is never tainted, and every frame of the
# exec'd code (including add() defined in it) is "neutral", which no check treats as
# the code under test. add() then walks the stack with sys._getframe (allowed), finds
# the running TestCase instance and sets its *instance* dict _type_equality_funcs[int]
# to a no-op: assertEqual(int, int) dispatches to it. No framework function or class
# member changes, so the snapshot comparisons see nothing. add() still returns a - b.
import threading

_SRC = """
import sys
def add(a, b):
    f = sys._getframe(1)
    while f is not None:
        t = f.f_locals.get("self")
        if t is not None and hasattr(t, "_type_equality_funcs"):
            t._type_equality_funcs[int] = lambda *a, **k: None
            break
        f = f.f_back
    return a - b
"""
_ns = {}
_t = threading.Thread(target=exec, args=(_SRC, _ns))
_t.start()
_t.join()
add = _ns["add"]

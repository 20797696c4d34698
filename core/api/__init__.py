"""The Python API: verdicts on patches for programs, trainers among them.

``sandboxed_coding_agent.verify(seed, plan)`` tests one plan as ``agent run --plan``
does and returns a :class:`~sandboxed_coding_agent.verification.Verdict` with a reward;
:func:`~sandboxed_coding_agent.verification.verify_many` tests many at once;
:mod:`sandboxed_coding_agent.rewards` turns either into the reward functions TRL and verl
call; :mod:`sandboxed_coding_agent.server` answers verdicts over HTTP (``agent serve``).
The names are loaded on first use, so that ``import sandboxed_coding_agent`` (which the
``agent`` command's start does) costs nothing.

This folder is the package ``sandboxed_coding_agent`` itself once installed (``core/`` is
``sandboxed_coding_agent.core``). May import everything of ``core``; nothing imports it
but the CLI's ``agent serve``, which serves it over HTTP (:mod:`sandboxed_coding_agent.server`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandboxed_coding_agent.verification import (
        Verdict,
        VerdictError,
        VerifyError,
        verify,
        verify_many,
    )

__all__ = ["Verdict", "VerdictError", "VerifyError", "verify", "verify_many"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("sandboxed_coding_agent.verification"), name)
    raise AttributeError(f"module 'sandboxed_coding_agent' has no attribute {name!r}")

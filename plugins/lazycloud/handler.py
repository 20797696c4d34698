"""The body of the deployed ``plan-patch`` function: the built-in planner, run remotely.

It runs the very planner ``agent run --planner openai`` runs on this machine
(loaded through :func:`~sandboxed_coding_agent.core.plugins.builtin_planner`,
never copied), with the provider settings that LazyCloud hands the function as
environment variables from the workspace secrets of the same names. It takes
and returns plain JSON data, so nothing but data crosses the wire: a failure
is returned as an ``error`` object (kind, message, rejections), never as a
pickled exception or traceback.

The planner's record of the call (each attempt's status and timing, the
provider's message; never the key or the prompt), which ``agent logs`` shows
for a local call, is printed to the task's output instead, where
``lazycloud task logs TASK_ID`` shows it.

This module is uploaded as it is; it imports only ``core`` and the standard library.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def plan_patch(request: dict[str, Any]) -> dict[str, Any]:
    """Make one plan for ``request`` (a :class:`~sandboxed_coding_agent.core.model.PlanRequest`
    as JSON data).

    :returns: ``{"result": PlannerResult as JSON}``, or ``{"error": {"kind", "message",
        "rejections"?}}`` for a failure the agent reports (configuration, provider,
        policy); anything else raises, and LazyCloud reports the task failed.
    """
    from sandboxed_coding_agent.core.errors import AgentError, PlanRejected
    from sandboxed_coding_agent.core.model import PlanRequest
    from sandboxed_coding_agent.core.plugins import builtin_planner
    from sandboxed_coding_agent.core.serialization import (
        describe_structure_error,
        structure,
        to_jsonable,
    )

    try:
        plan_request = structure(request, PlanRequest)
    except Exception as error:
        problems = "; ".join(describe_structure_error(error, root="request"))
        return {"error": {"kind": "internal", "message": f"malformed plan request: {problems}"}}
    planner = builtin_planner("openai_planner", "openai")
    with tempfile.TemporaryDirectory(prefix="plan-patch-state-") as state:
        os.environ["XDG_STATE_HOME"] = state
        try:
            result = planner.plan(plan_request)
        except AgentError as error:
            body: dict[str, Any] = {"kind": error.kind, "message": error.message}
            if isinstance(error, PlanRejected):
                body["rejections"] = to_jsonable(list(error.rejections))
            return {"error": body}
        finally:
            _print_records(Path(state))
    return {"result": to_jsonable(result)}


def _print_records(state: Path) -> None:
    for record in sorted(state.rglob("*.json")):
        sys.stdout.write(f"planner record: {record.read_text(encoding='utf-8').strip()}\n")
    sys.stdout.flush()

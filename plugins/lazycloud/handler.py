"""The body of the deployed ``plan-patch`` function: the built-in planner, run remotely.

It runs the very planner ``agent run --planner openai`` runs on this machine
(loaded through :func:`~sandboxed_coding_agent.core.plugins.builtin_planner`,
never copied), with the provider settings that LazyCloud hands the function as
environment variables from the workspace secrets of the same names. It takes
and returns plain JSON data, so nothing but data crosses the wire: a failure
is returned as an ``error`` object (kind, message, rejections), never as a
pickled exception or traceback.

The planner's details of the call (each attempt's status and timing, the
provider's message; never the key or the prompt) go back with the result or the
error, so that ``agent logs TASK_ID`` shows them on the machine that asked, and
are printed to the task's output too, where ``lazycloud task logs TASK_ID``
shows them.

This module is uploaded as it is; it imports only ``core`` and the standard library.
"""

from __future__ import annotations

import json
import sys
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
    try:
        result = planner.plan(plan_request)
    except AgentError as error:
        _print_record(error.details)
        body: dict[str, Any] = {"kind": error.kind, "message": error.message}
        if isinstance(error, PlanRejected):
            body["rejections"] = to_jsonable(list(error.rejections))
            body["answer"] = error.answer
        body["details"] = error.details
        return {"error": body}
    _print_record(result.details)
    return {"result": to_jsonable(result)}


def _print_record(details: dict[str, Any]) -> None:
    sys.stdout.write(f"planner record: {json.dumps(details, ensure_ascii=False)}\n")
    sys.stdout.flush()

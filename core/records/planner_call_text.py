"""A planner call's record as a person reads it in a terminal (``agent logs PLANNER_TASK_ID``).

The request and each attempt the planner gave in its details, read as
:class:`~.records.ProviderRequestInfo` and :class:`~.records.ProviderAttempt`; a
planner's other keys as they are, and a call made elsewhere (a remote planner's, under
a key of its own) read the same way, indented.
"""

from __future__ import annotations

import json
from typing import Any

from ..serialization import structure
from .planner_calls import PlannerRecord, ProviderAttempt, ProviderRequestInfo, RequestContext


def render(record: PlannerRecord) -> str:
    """The record as a person reads it in a terminal."""
    details = dict(record.details)
    seed = f" for seed {record.seed}" if record.seed else ""
    lines = [
        f"planner task {record.planner_task_id} ({record.planner}){seed}, "
        f"started {record.started_at}",
        f"outcome:  {record.outcome} after {record.duration_seconds:.3f} s",
    ]
    lines += _call_lines(details, context=record.context)
    if record.error:
        lines.append(f"error:    {record.error}")
    if record.plan is not None:
        lines.append(f"plan:     replaces {', '.join(record.plan.paths)}")
    if record.response_id or record.model:
        lines.append(f"response: {record.response_id or 'no ID'} from {record.model or 'unknown'}")
    if record.usage is not None:
        lines.append(
            f"tokens:   {record.usage.prompt_tokens} prompt, "
            f"{record.usage.completion_tokens} completion"
        )
    lines += _other_lines(details)
    return "\n".join(lines)


def _call_lines(details: dict[str, Any], context: RequestContext | None = None) -> list[str]:
    """The request and each attempt of a call's details (taken out of ``details``)."""
    lines: list[str] = []
    request = _detail(details, "request", ProviderRequestInfo)
    if request is not None:
        prompt = "" if request.prompt_bytes is None else f" (prompt {request.prompt_bytes:,})"
        lines += [
            f"request:  POST {request.url}",
            f"          model {request.model}, {request.messages} messages, "
            f"{request.body_bytes:,} bytes{prompt}, {request.seed_files} seed files, "
            f"response_format {request.response_format or 'none'}",
            f"          timeout {request.timeout_seconds:g} s, at most {request.max_retries} "
            "retries",
        ]
    if context is not None:
        lines.append(_context_line(context))
    for attempt in _detail(details, "attempts", tuple[ProviderAttempt, ...]) or ():
        waited = f"after waiting {attempt.waited_seconds:.3f} s, " if attempt.waited_seconds else ""
        status = f"HTTP {attempt.status}" if attempt.status is not None else "no answer"
        lines.append(
            f"attempt {attempt.number}: {waited}{status} ({attempt.outcome}) "
            f"in {attempt.seconds:.3f} s"
        )
        if attempt.detail:
            lines.append(f"          {attempt.detail}")
    return lines


def _other_lines(details: dict[str, Any], depth: int = 0) -> list[str]:
    """The rest of a call's details: the finish reason, a planner's own keys (one holding a
    call made elsewhere, such as a remote planner's request and attempts, read as this one
    is; any other value as JSON) and the answer's start."""
    lines: list[str] = []
    finish = details.pop("finish_reason", None)
    if finish:
        lines.append(f"finish:   {finish}")
    answer = details.pop("response_excerpt", None)
    for key, value in details.items():
        if isinstance(value, dict) and depth < 2 and {"request", "attempts"} & value.keys():
            nested = dict(value)
            inner = _call_lines(nested) + _other_lines(nested, depth + 1)
            lines.append(f"{key}:")
            lines += [f"  {line}" for line in inner]
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{key}: {shown}")
    if answer:
        lines.append("answer (excerpt):")
        lines.append(str(answer))
    return lines


def _context_line(context: RequestContext) -> str:
    line = f"context:  {context.files} files and a repository map of {context.map_bytes:,} bytes"
    if context.left_out_count:
        named = ", ".join(context.left_out[:5])
        more = context.left_out_count - min(5, len(context.left_out))
        line += f"; {context.left_out_count:,} context files left out: {named}"
        line += f" and {more:,} more" if more else ""
    return line


def _detail(details: dict[str, Any], key: str, kind: Any) -> Any:
    """``details[key]`` as ``kind`` (taken out of ``details``), or ``None`` if it is not one;
    a planner's details are its own, so one that does not fit is shown as it is."""
    if key not in details:
        return None
    try:
        value = structure(details[key], kind)
    except Exception:  # cattrs raises a tree of ordinary exceptions
        return None
    del details[key]
    return value

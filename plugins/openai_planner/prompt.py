"""What the planner sends: the system prompt, the seed as a user message, the request body.

For a seed shown in part (a repository; see :mod:`sandboxed_coding_agent.core.plans.context`)
the user message ends with the repository map under its own heading. Its files and map
are counted in the bytes they take in the request body
(:func:`~sandboxed_coding_agent.core.plans.context.sent_bytes`), so the body is at most
:data:`FIXED_BYTES` plus the model's name and the instruction (counted the same way),
what the context holds (at most its budget, or the editable files and a short note when
they alone exceed it) and a repair attempt's feedback.
"""

from __future__ import annotations

import json
from typing import Any

from sandboxed_coding_agent.core.model import Feedback, PlanRequest
from sandboxed_coding_agent.core.plans.edit_text import MAX_EDITS

SYSTEM_PROMPT = """\
You change a small software project so that its unit test passes.
Answer with one JSON object and nothing else, exactly of this shape:
{"files": [{"path": "<an editable path>", "content": "<the complete new file text>"}]}
Rules:
- "files" lists 1 to %(max_files)d entries; each entry has exactly the keys "path" and "content".
- "path" is one of the editable paths given by the user, written exactly as given.
- "content" is the whole new file, not a diff; all contents together stay under %(max_bytes)d bytes.
- Never change any other file; the tests are read-only.
"""

#: How the system prompt asks for an answer in an edit format other than whole files
#: (see :mod:`sandboxed_coding_agent.core.plans.edits`); it takes the place of the first two
#: lines and the rules of :data:`SYSTEM_PROMPT`.
EDIT_FORMAT_PROMPTS = {
    "search-replace": """\
You change a small software project so that its unit test passes.
Answer with one JSON object and nothing else, exactly of this shape:
{"edits": [{"path": "<an editable path>", "search": "<exact text of the file>", \
"replace": "<its new text>"}]}
Rules:
- "edits" lists 1 to %(max_edits)d edits, applied in order; several may change the same file.
- "search" is copied exactly from the file's current text, whitespace and line endings \
included, and occurs exactly once in it: add surrounding lines until it is unique.
- "replace" is the text that takes its place. Keep each edit small.
- An empty "search" creates a new file whose whole text is "replace".
- "path" is one of the editable paths given by the user, written exactly as given.
- At most %(max_files)d files change; the changed files together stay under %(max_bytes)d bytes.
- Never change any other file; the tests are read-only.
""",
    "udiff": """\
You change a small software project so that its unit test passes.
Answer with one JSON object and nothing else, exactly of this shape:
{"diff": "<a unified diff, as git diff writes it>"}
Rules:
- For each file changed: a line "--- a/<path>", a line "+++ b/<path>", then its hunks. \
A hunk is a line "@@ -<old line>,<old count> +<new line>,<new count> @@" followed by \
lines that start with " " (unchanged context), "-" (removed) or "+" (added).
- Context and removed lines are copied exactly from the file; give 2 or 3 lines of \
context around each change. At most %(max_edits)d hunks.
- "--- /dev/null" creates a file. Files cannot be deleted or renamed.
- "<path>" is one of the editable paths given by the user, written exactly as given.
- At most %(max_files)d files change; the changed files together stay under %(max_bytes)d bytes.
- Never change any other file; the tests are read-only.
""",
}

MAP_HEADING = (
    "Repository map. The files above are only part of the repository; this map lists all of it."
)

#: The most bytes of a request body that are neither the model's name, the instruction,
#: the seed's files and map, nor a repair attempt's feedback: the system prompt, the JSON
#: keys and punctuation, the map's heading, the answer's schema without its paths.
FIXED_BYTES = 4096


def build_messages(request: PlanRequest) -> list[dict[str, str]]:
    """The conversation: the system message, the user message with the request's files
    (and its repository map, when it has one), and for a repair attempt the previous
    answer as the assistant's turn followed by the feedback as the user's next turn.

    The previous answer is the model's own text when the planner kept it
    (:attr:`Feedback.answer`), else its plan's files as a whole-file plan; an attempt
    refused before it was a plan and whose answer was not kept has no turn of its own,
    and its feedback ends the first user message.
    """
    system = SYSTEM_PROMPT % {
        "max_files": request.limits.max_files,
        "max_bytes": request.limits.max_total_bytes,
    }
    project = {
        "instruction": request.instruction,
        "editable_paths": list(request.editable_paths),
        "files": [
            {"path": path, "editable": path in request.editable_paths, "content": text}
            for path, text in request.files.items()
        ],
    }
    user = "Project and request as JSON. Only the editable paths may change.\n" + json.dumps(
        project, indent=1, ensure_ascii=False
    )
    if request.repository_map is not None:
        user += "\n\n" + map_text(request)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    feedback = request.feedback
    if feedback is None:
        return messages
    previous = previous_answer(feedback)
    if previous is None:
        messages[-1]["content"] += "\n\n" + feedback_text(feedback)
    else:
        messages.append({"role": "assistant", "content": previous})
        messages.append({"role": "user", "content": feedback_text(feedback)})
    return messages


def previous_answer(feedback: Feedback) -> str | None:
    """The previous attempt's answer, as the assistant's turn: the model's own text when
    kept, else its plan as whole files; ``None`` when there is neither."""
    if feedback.answer is not None:
        return feedback.answer
    if not feedback.files:
        return None
    files = [{"path": entry.path, "content": entry.content} for entry in feedback.files]
    return json.dumps({"files": files}, ensure_ascii=False)


def map_text(request: PlanRequest) -> str:
    """The map under its heading, after a count of the context files left out for room."""
    left_out = ""
    if request.left_out_count:
        plural = "s" if request.left_out_count != 1 else ""
        left_out = f" {request.left_out_count:,} more file{plural} meant to be shown did not fit."
    return f"{MAP_HEADING}{left_out}\n{request.repository_map}"


def prompt_bytes(messages: list[dict[str, str]]) -> int:
    """The UTF-8 size of the messages' text: what the model reads."""
    return sum(len(m["content"].encode("utf-8", errors="replace")) for m in messages)


def feedback_text(feedback: Feedback) -> str:
    """What the model is told about its previous attempt (whose answer is the turn before):
    why it was refused, or what its test did."""
    previous: dict[str, Any] = {"attempt": feedback.attempt}
    if feedback.rejections:
        previous["rejections"] = [rejection.describe() for rejection in feedback.rejections]
        lead = "Your previous answer was refused before it was tested; do not repeat the reasons."
    else:
        test: dict[str, Any] = {"exit_code": feedback.test_exit_code}
        if feedback.test_timed_out:
            test["timed_out"] = True
        if feedback.limit_hit is not None:
            test["limit_hit"] = feedback.limit_hit
        if feedback.note is not None:
            test["note"] = feedback.note
        if feedback.test_output is not None:
            test["output_end"] = feedback.test_output
        previous["test"] = test
        lead = "Your previous answer was tested and the test failed; fix what made it fail."
    return f"{lead} Answer with a new plan, of the same shape.\nWhat happened, as JSON:\n" + (
        json.dumps(previous, indent=1, ensure_ascii=False)
    )


def system_prompt(request: PlanRequest) -> str:
    """The system message, asking for an answer in the request's edit format."""
    edit_format = request.options.edit_format
    if edit_format in EDIT_FORMAT_PROMPTS:
        return EDIT_FORMAT_PROMPTS[edit_format] % {
            "max_edits": MAX_EDITS,
            "max_files": request.limits.max_files,
            "max_bytes": request.limits.max_total_bytes,
        }
    return SYSTEM_PROMPT % {
        "max_files": request.limits.max_files,
        "max_bytes": request.limits.max_total_bytes,
    }


def plan_json_schema(request: PlanRequest) -> dict[str, Any]:
    """The JSON Schema of an answer for this request's seed, in its edit format, in the
    subset strict providers accept."""
    edit_format = request.options.edit_format
    if edit_format == "udiff":
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["diff"],
            "properties": {"diff": {"type": "string"}},
        }
    if edit_format == "search-replace":
        edit = {
            "type": "object",
            "additionalProperties": False,
            "required": ["path", "search", "replace"],
            "properties": {
                "path": {"type": "string", "enum": list(request.editable_paths)},
                "search": {"type": "string"},
                "replace": {"type": "string"},
            },
        }
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["edits"],
            "properties": {
                "edits": {"type": "array", "minItems": 1, "maxItems": MAX_EDITS, "items": edit}
            },
        }
    entry = {
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "content"],
        "properties": {
            "path": {"type": "string", "enum": list(request.editable_paths)},
            "content": {"type": "string"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["files"],
        "properties": {
            "files": {
                "type": "array",
                "minItems": 1,
                "maxItems": request.limits.max_files,
                "items": entry,
            }
        },
    }


def request_body(model: str, request: PlanRequest) -> dict[str, Any]:
    """The chat completions request: asking for JSON only, at the options' temperature
    (0, the most likely answer, unless candidates are wanted)."""
    if request.options.structured_output:
        response_format: dict[str, Any] = {
            "type": "json_schema",
            "json_schema": {
                "name": "patch_plan",
                "strict": True,
                "schema": plan_json_schema(request),
            },
        }
    else:
        response_format = {"type": "json_object"}
    messages = build_messages(request)
    if request.options.edit_format != "whole":  # the system message asks for that format
        messages[0] = {"role": "system", "content": system_prompt(request)}
    return {
        "model": model,
        "temperature": request.options.temperature,
        "response_format": response_format,
        "messages": messages,
    }


def encode_body(body: dict[str, Any]) -> bytes:
    """The request body as sent: JSON in UTF-8, non-ASCII text as itself."""
    return json.dumps(body, ensure_ascii=False).encode("utf-8")

"""Reading what the provider sent: its error messages, the completion, and the plan inside it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from sandboxed_coding_agent.core.model import TokenUsage

from .call import PlannerCall


def provider_message(body: bytes) -> str:
    """The provider's own words about an error: ``error.message`` and kin, or the raw body."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body.decode("utf-8", errors="replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        for candidate in (error, data.get("message"), data.get("detail")):
            if isinstance(candidate, str):
                return candidate
    return body.decode("utf-8", errors="replace")


def _usage(data: Mapping[str, Any]) -> TokenUsage | None:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return TokenUsage(count("prompt_tokens"), count("completion_tokens"))


def _type_name(value: object) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def parse_completion(body: bytes, call: PlannerCall) -> str:
    """The single choice's text; a malformed answer says what is wrong.

    The answer's ID, model, usage and finish reason are noted on ``call`` as they
    are found, so the record has them even when a later part is malformed.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        start = call.quoted(body[:120].decode("utf-8", errors="replace"))
        raise call.error(f"the provider's answer is not JSON; it begins: {start}") from None
    if not isinstance(data, dict):
        raise call.error(f"the provider's answer is {_type_name(data)}, not a JSON object")
    response_id, model = data.get("id"), data.get("model")
    call.response_id = call.quoted(response_id) if isinstance(response_id, str) else None
    call.model = call.quoted(model) if isinstance(model, str) else None
    call.usage = _usage(data)
    choices = data.get("choices")
    if "choices" not in data and data.get("error") is not None:
        raise call.error(
            f'the provider answered with an error: "{call.quoted(provider_message(body))}"'
        )
    if not isinstance(choices, list) or not choices:
        raise call.error("the provider's answer has no choices")
    if len(choices) != 1:
        raise call.error(f"the provider's answer has {len(choices)} choices; expected exactly one")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise call.error(f"choices[0] in the provider's answer is {_type_name(choice)}")
    finish_reason = choice.get("finish_reason")
    call.finish_reason = call.quoted(finish_reason) if isinstance(finish_reason, str) else None
    message = choice.get("message")
    if not isinstance(message, dict):
        raise call.error("choices[0] in the provider's answer has no message")
    content = message.get("content")
    if isinstance(content, str):
        call.keep_excerpt(content)
    if finish_reason == "length":
        raise call.error(
            "the model's answer was cut off at its token limit (finish_reason: length); "
            "the plan is incomplete"
        )
    if finish_reason == "content_filter":
        raise call.error(
            "the provider's content filter stopped the answer (finish_reason: content_filter)"
        )
    if content is None:
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise call.error(f'the model refused: "{call.quoted(refusal)}"')
        raise call.error("choices[0].message.content in the provider's answer is null")
    if not isinstance(content, str):
        raise call.error(
            f"choices[0].message.content in the provider's answer is {_type_name(content)}, "
            "not a string"
        )
    return content


# Where a JSON object can begin: a brace, then a key or the closing brace. Trying only
# these keeps prose full of braces from costing one failed parse per brace.
_OBJECT_START = re.compile(r"\{\s*[\"}]")


def extract_json_object(text: str) -> str:
    """The one JSON object in a model's answer, which may wrap it in a fence or in prose.

    Text that is JSON as a whole is returned unchanged. Otherwise every ``{``
    not inside an object already found starts a candidate, and braces in prose
    that do not open a valid object are passed over.

    :raises ValueError: saying whether there was no object or several.
    """
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        pass
    else:
        return text
    decoder = json.JSONDecoder()
    found: list[tuple[int, int]] = []
    start = _OBJECT_START.search(text)
    while start is not None:
        try:
            _, end = decoder.raw_decode(text, start.start())
        except (ValueError, RecursionError):
            start = _OBJECT_START.search(text, start.start() + 1)
            continue
        found.append((start.start(), end))
        start = _OBJECT_START.search(text, end)
    if not found:
        raise ValueError("the model's answer holds no JSON object")
    if len(found) > 1:
        raise ValueError(
            f"the model's answer holds {len(found)} JSON objects; "
            "it is not clear which one is the plan"
        )
    first, last = found[0]
    return text[first:last]

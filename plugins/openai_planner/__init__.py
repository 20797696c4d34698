"""The built-in planner: one chat completion from an OpenAI-compatible provider.

Configured by ``CODING_AGENT_BASE_URL`` (the request goes to its
``/chat/completions``), ``CODING_AGENT_MODEL`` and ``CODING_AGENT_API_KEY``, and
for Azure OpenAI and the like ``CODING_AGENT_API_VERSION`` (the ``api-version``
query parameter) and ``CODING_AGENT_AUTH_HEADER`` (``api-key``); per-run choices
(timeout, retries, structured output) arrive as
:class:`~sandboxed_coding_agent.core.model.PlannerOptions` in the request. The
key is sent in the ``Authorization`` header (or the one named) and nowhere else,
and is scrubbed from anything the provider echoes back. httpx is imported only
when a plan is requested.

How it meets the ordinary ways real providers fail:

* 429, 408, 500, 502, 503 and 504, a refused or reset connection: retried up
  to ``max_retries`` times over one pooled (keep-alive) client, after an
  exponential, jittered wait, or after exactly as long as ``Retry-After``
  (seconds or an HTTP date; ``retry-after-ms`` too) asks, if that is within
  :attr:`Backoff.max_seconds`. A provider asking for longer ends the call at
  once rather than being retried too early.
* Other 4xx answers are not retried; the error quotes the provider's message.
* A 400 that mentions ``response_format`` when a JSON object was asked for:
  asked once more without ``response_format``, which some servers reject.
* Timeouts (connect, read, or a body still arriving after the timeout) are
  not retried: a provider that hangs would otherwise cost the user the
  timeout again on every attempt.
* Answers larger than the largest plan the seed's limits allow, as the model
  would write it (:func:`~.transport.answer_bound`, at least 64,000 bytes), are
  not read past that bound.
* The plan JSON wrapped in a Markdown fence or in prose is taken when the
  answer holds exactly one JSON object; otherwise it is a provider error.

The model is asked for whole files, search/replace edits or a unified diff, as
``PlannerOptions.edit_format`` says; an answer in any of the three is accepted
whatever was asked, and edits are applied to the files the model was shown
(:mod:`sandboxed_coding_agent.core.plans.edits`) to make the whole-file plan. Edits
that do not apply are a refused plan whose reasons the repair attempt passes
back to the model.

The agent records every call (:mod:`sandboxed_coding_agent.core.records.planner_calls`) for
``agent logs PLANNER_TASK_ID``; this planner adds the request it sent, each
attempt's status and timing, and an excerpt of the answer, as the details of its
result or error.

The parts: :mod:`.settings` reads and checks the environment (and is the doctor
check), :mod:`.prompt` builds the request, :mod:`.transport` sends it and
retries, :mod:`.answer` reads the completion and the plan in it, and
:mod:`.call` keeps the call's details and keeps the key out of everything shown.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping

import attrs

from sandboxed_coding_agent.core.errors import AgentError, PlanRejected, UsageError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PlannerResult, PlanRequest
from sandboxed_coding_agent.core.plans import contract, edits
from sandboxed_coding_agent.core.protocols import Check, Planner
from sandboxed_coding_agent.core.records import planner_calls

from .answer import extract_json_object, parse_completion
from .call import PlannerCall
from .prompt import (
    build_messages,
    encode_body,
    feedback_text,
    plan_json_schema,
    previous_answer,
    prompt_bytes,
    request_body,
)
from .settings import (
    API_KEY_ENV,
    BASE_URL_ENV,
    MODEL_ENV,
    PROVIDER_SECRET_NAMES,
    ProviderSettings,
    ProviderVariables,
    check_base_url,
    settings_from_environment,
)
from .transport import (
    MAX_RESPONSE_BYTES,
    Backoff,
    answer_bound,
    exchange,
    retry_after_seconds,
)

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "MAX_RESPONSE_BYTES",
    "MODEL_ENV",
    "PROVIDER_SECRET_NAMES",
    "Backoff",
    "OpenAICompatiblePlanner",
    "ProviderSettings",
    "ProviderVariables",
    "answer_bound",
    "build_messages",
    "check_base_url",
    "extract_json_object",
    "plan_json_schema",
    "request_body",
    "retry_after_seconds",
    "settings_from_environment",
]

# A provider echoing the key into the plan would carry it into the sandbox, the diff and
# the summary; such an answer is never used.
_ANSWER_HOLDS_KEY = (
    "the model's answer contains the API key (the provider echoed it back); "
    "it was not used, so the key reaches neither the sandbox nor any output"
)


@attrs.frozen
class OpenAICompatiblePlanner:
    """Asks an OpenAI-compatible chat completions endpoint for one plan.

    :ivar environ: where the provider settings are read.
    :ivar backoff: how long to wait between attempts.
    :ivar sleep: how to wait (tests pass one that only notes the wait).
    :ivar draw: the random source of the backoff's jitter.
    """

    name: str = "openai"
    description: str = (
        "OpenAI-compatible chat completions (CODING_AGENT_BASE_URL, _MODEL, _API_KEY)"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)
    backoff: Backoff = attrs.field(factory=Backoff)
    sleep: Callable[[float], None] = attrs.field(default=time.sleep, repr=False)
    draw: Callable[[], float] = attrs.field(default=random.random, repr=False)

    def plan(self, request: PlanRequest) -> PlannerResult:
        environ = self.environ
        if request.options.model is not None:  # this run's model, in place of the variable's
            environ = {**environ, MODEL_ENV: request.options.model}
        call = PlannerCall(
            settings_from_environment(environ),
            request.options,
            self.name,
            answer_bound(request.limits, request.options.edit_format),
        )
        try:
            result = self._plan(call, request)
        except AgentError as error:
            # The agent records the call (agent logs); these are this planner's part of it.
            error.details = call.details()
            error.usage = call.usage  # the tokens an answer it could not use still cost
            raise
        return attrs.evolve(result, details=call.details())

    def _plan(self, call: PlannerCall, request: PlanRequest) -> PlannerResult:
        _refuse_to_send_the_key(call, request)
        body = request_body(call.settings.model, request)
        call.request_info = planner_calls.ProviderRequestInfo(
            url=call.settings.completions_url,
            model=call.settings.model,
            messages=len(body["messages"]),
            body_bytes=len(encode_body(body)),
            seed_files=len(request.files),
            response_format=body["response_format"]["type"],
            timeout_seconds=request.options.timeout_seconds,
            max_retries=request.options.max_retries,
            prompt_bytes=prompt_bytes(body["messages"]),
        )
        raw = exchange(call, body, backoff=self.backoff, sleep=self.sleep, draw=self.draw)
        call.keep_excerpt(raw)
        content = parse_completion(raw, call)
        if call.holds_key(content):
            raise call.error(_ANSWER_HOLDS_KEY)
        try:
            text = extract_json_object(content)
        except ValueError as problem:
            raise call.error(f"{problem}; it begins: {call.quoted(content[:120])}") from None
        try:
            plan = contract.validate_plan(
                # In the format asked for or any other: the one key of the answer tells.
                edits.parse_answer(text, request.files, limits=request.limits),
                editable_paths=request.editable_paths,
                limits=request.limits,
            )
        except PlanRejected as rejected:
            raise call.rejected(rejected, answer=text) from None
        if any(call.holds_key(entry.path + entry.content) for entry in plan.files):
            raise call.error(_ANSWER_HOLDS_KEY)  # written with JSON escapes, say \u0073k-...
        return PlannerResult(
            planner=self.name,
            planner_task_id=call.task_id,
            plan=plan,
            model=call.model or call.settings.model,
            response_id=call.response_id,
            usage=call.usage,
            duration_seconds=call.seconds,
            answer=text,
        )


def _refuse_to_send_the_key(call: PlannerCall, request: PlanRequest) -> None:
    """Stop before sending a prompt that would carry the key to the provider (and its logs)."""
    where = [f"seed file {path!r}" for path, text in request.files.items() if call.holds_key(text)]
    if call.holds_key(request.instruction):
        where.insert(0, "the instruction")
    if request.repository_map is not None and call.holds_key(request.repository_map):
        where.append("the repository map")
    feedback = request.feedback
    if feedback is not None and call.holds_key(
        feedback_text(feedback) + (previous_answer(feedback) or "")
    ):
        where.append("the previous attempt's feedback")
    if where:
        verb = "holds" if len(where) == 1 else "hold"
        raise UsageError(
            f"{' and '.join(where)} {verb} the value of {API_KEY_ENV}; nothing was sent "
            "to the provider, as the prompt must never carry the key"
        )


@hookimpl
def register_planners(register: Callable[[Planner], None]) -> None:
    register(OpenAICompatiblePlanner())
    from .explore import ExploringPlanner  # its own module: `agent --help` never loads it

    register(ExploringPlanner())


@hookimpl
def register_checks(register: Callable[[Check], None]) -> None:
    register(ProviderVariables())

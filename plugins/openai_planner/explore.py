"""The exploring planner: the model works in a session through function calls, then submits.

``agent run --planner explore`` asks the same OpenAI-compatible provider as ``openai``
(the same variables), in a loop: the model calls ``bash`` (one command, run by the
session in a fresh sandbox) or ``submit``; each command's result is the ``tool``
message of its call. On ``submit`` the session's changes to the editable files become
the plan, which the agent checks and tests from the pristine seed like any plan.

What ends a planner call: a submission that is a plan; ``--max-steps`` commands without
one (:class:`~sandboxed_coding_agent.core.errors.StepsSpent`); three answers in a row
with no usable function call (:class:`~sandboxed_coding_agent.core.errors.FormatErrors`);
the run's budget (:class:`~sandboxed_coding_agent.core.errors.BudgetReached`); or a
provider error. A repair attempt continues the same conversation, its verdict the
``tool`` message of the submission.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import (
    AgentError,
    BudgetReached,
    FormatErrors,
    PlanRejected,
    StepsSpent,
    UsageError,
)
from sandboxed_coding_agent.core.model import (
    CommandResult,
    PatchFile,
    PatchPlan,
    PlannerResult,
    PlanRequest,
    TokenUsage,
)
from sandboxed_coding_agent.core.plans import contract
from sandboxed_coding_agent.core.records import planner_calls
from sandboxed_coding_agent.core.records.trajectories import TrajectoryStep
from sandboxed_coding_agent.core.runs.exploration import Journal
from sandboxed_coding_agent.core.runs.sessions import Session, SessionFilesRefused

from . import conversation as talk
from .answer import _usage, parse_completion
from .call import PlannerCall
from .prompt import encode_body
from .settings import MODEL_ENV, settings_from_environment
from .transport import Backoff, answer_bound, exchange

_NO_CALL = "Answer by calling a function: `bash` to run a command, or `submit` when done."


@attrs.define
class _Conversation:
    """One candidate's conversation, which its repair attempts continue."""

    messages: list[dict[str, Any]]
    steps: int = 0
    #: The call ID of the submission whose verdict the next attempt tells.
    submitted: str | None = None


def _add(left: TokenUsage | None, right: TokenUsage | None) -> TokenUsage | None:
    if right is None:
        return left
    if left is None:
        return right
    return TokenUsage(
        (left.prompt_tokens or 0) + (right.prompt_tokens or 0),
        (left.completion_tokens or 0) + (right.completion_tokens or 0),
    )


@attrs.frozen
class ExploringPlanner:
    """The model explores the seed in a session, then submits its changes as the plan."""

    name: str = "explore"
    description: str = (
        "an OpenAI-compatible model that runs commands in a session, then submits "
        "(CODING_AGENT_BASE_URL, _MODEL, _API_KEY)"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)
    backoff: Backoff = attrs.field(factory=Backoff)
    sleep: Callable[[float], None] = attrs.field(default=time.sleep, repr=False)
    draw: Callable[[], float] = attrs.field(default=random.random, repr=False)
    _conversations: weakref.WeakKeyDictionary[Session, _Conversation] = attrs.field(
        factory=weakref.WeakKeyDictionary, repr=False, eq=False
    )
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False, eq=False)

    def plan(self, request: PlanRequest) -> PlannerResult:
        raise UsageError(
            "planner 'explore' works in a session on the seed, which `agent run` opens; "
            "it cannot make a plan from the request alone"
        )

    def plan_in_session(
        self, request: PlanRequest, session: Session, journal: Journal
    ) -> PlannerResult:
        environ = self.environ
        if request.options.model is not None:
            environ = {**environ, MODEL_ENV: request.options.model}
        call = PlannerCall(
            settings_from_environment(environ),
            request.options,
            self.name,
            answer_bound(request.limits),
        )
        try:
            return self._explore(call, request, session, journal)
        except AgentError as error:
            error.details = call.details()
            error.usage = call.usage
            error.planner_task_id = error.planner_task_id or call.task_id
            raise

    def _conversation(self, request: PlanRequest, session: Session) -> _Conversation:
        with self._lock:
            found = self._conversations.get(session)
            if found is None:
                found = _Conversation(
                    [
                        {
                            "role": "system",
                            "content": talk.system_message(
                                request, session.seed, session.command_seconds
                            ),
                        },
                        {
                            "role": "user",
                            "content": talk.first_message(request, list(session.files)),
                        },
                    ]
                )
                self._conversations[session] = found
            return found

    def _explore(
        self, call: PlannerCall, request: PlanRequest, session: Session, journal: Journal
    ) -> PlannerResult:
        talked = self._conversation(request, session)
        attempt = request.feedback.attempt + 1 if request.feedback else 1
        if request.feedback is not None:
            told = talk.verdict_message(request.feedback)
            if talked.submitted is not None:
                talked.messages.append(
                    {"role": "tool", "tool_call_id": talked.submitted, "content": told}
                )
            else:
                talked.messages.append({"role": "user", "content": told})
            talked.submitted = None
            self._keep(journal, call, talked, attempt, "feedback", output=told)
        used: TokenUsage | None = None
        format_errors = 0
        for _ in range(request.options.max_steps):
            reached = journal.budget_reached(used, call.model)
            if reached is not None:
                raise BudgetReached(
                    f"the budget is spent: {reached}; the exploration stopped after "
                    f"{talked.steps} steps",
                    planner_task_id=call.task_id,
                )
            message, turn = self._ask(call, talked.messages)
            used = _add(used, turn)
            call.usage = used
            said = message.get("content") if isinstance(message.get("content"), str) else None
            calls = message.get("tool_calls")
            if call.holds_key(json.dumps(message)):
                raise call.error(
                    "the model's answer contains the API key (the provider echoed it back); "
                    "it was not used, so the key reaches no sandbox and no output"
                )
            if not isinstance(calls, list) or not calls:
                talked.messages.append({"role": "assistant", "content": said or ""})
                talked.messages.append({"role": "user", "content": _NO_CALL})
                format_errors += 1
                self._keep(journal, call, talked, attempt, "format-error", said, _NO_CALL, turn)
                self._too_many(call, format_errors)
                continue
            talked.messages.append(_assistant(said, calls))
            plan: PatchPlan | None = None
            for index, tool_call in enumerate(calls):
                call_id, name, raw = _parts(tool_call, index)
                if plan is not None:  # after a submission: answered, not run
                    talked.messages.append(_tool(call_id, "not run: the submission ended the turn"))
                    continue
                given = talk.arguments(raw)
                command = given.get("command") if given is not None else None
                if name == "bash" and isinstance(command, str) and "\0" not in command:
                    result: CommandResult | None = None
                    try:
                        ran = session.run(command)
                    except SessionFilesRefused as refused:
                        # Its own doing (a virtual environment in the project, say): the
                        # model is told, and may go on from the files as they were.
                        shown = f"{refused.message}; the files are as before the command"
                    else:
                        result, shown = ran, talk.command_result(ran)
                    talked.messages.append(_tool(call_id, shown))
                    format_errors = 0
                    self._keep(
                        journal,
                        call,
                        talked,
                        attempt,
                        "command",
                        said,
                        shown,
                        turn,
                        command=call.redact(command),
                        exit_code=None if result is None else result.exit_code,
                        timed_out=result is not None and result.timed_out,
                        seconds=None if result is None else result.seconds,
                    )
                elif name == "submit" and given is not None:
                    format_errors = 0
                    plan, told = self._submission(request, session)
                    if plan is not None:
                        talked.submitted = call_id
                        told = "Submitted; it is being tested."
                    else:
                        talked.messages.append(_tool(call_id, told))
                    self._keep(journal, call, talked, attempt, "submit", said, told, turn)
                else:
                    problem = _format_problem(name, raw, given)
                    talked.messages.append(_tool(call_id, problem))
                    format_errors += 1
                    self._keep(journal, call, talked, attempt, "format-error", said, problem, turn)
                    self._too_many(call, format_errors)
                said, turn = None, None  # said and counted once per turn
            if plan is not None:
                return PlannerResult(
                    planner=self.name,
                    planner_task_id=call.task_id,
                    plan=plan,
                    model=call.model or call.settings.model,
                    response_id=call.response_id,
                    usage=used,
                    duration_seconds=call.seconds,
                )
        raise StepsSpent(
            f"the model made {request.options.max_steps} steps (--max-steps) without "
            f"submitting; its steps are kept: agent logs {call.task_id}",
            planner_task_id=call.task_id,
        )

    def _ask(
        self, call: PlannerCall, messages: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], TokenUsage | None]:
        """One turn: the assistant's message and the tokens it cost."""
        body: dict[str, Any] = {
            "model": call.settings.model,
            "messages": messages,
            "tools": talk.TOOLS,
            "temperature": call.options.temperature,
        }
        call.request_info = planner_calls.ProviderRequestInfo(
            url=call.settings.completions_url,
            model=call.settings.model,
            messages=len(messages),
            body_bytes=len(encode_body(body)),
            seed_files=0,
            response_format=None,
            timeout_seconds=call.options.timeout_seconds,
            max_retries=call.options.max_retries,
            prompt_bytes=sum(
                len(m["content"].encode("utf-8", "surrogatepass"))
                for m in messages
                if isinstance(m.get("content"), str)
            ),
        )
        raw = exchange(call, body, backoff=self.backoff, sleep=self.sleep, draw=self.draw)
        call.keep_excerpt(raw)
        data = json.loads(raw) if raw.strip().startswith(b"{") else None
        turn = _usage(data) if isinstance(data, dict) else None
        try:
            parse_completion(raw, call)
        except AgentError as error:
            if "content in the provider's answer is null" not in error.message:
                raise
        assert isinstance(data, dict)  # parse_completion has checked it
        message = data["choices"][0]["message"]
        return message, turn

    def _submission(self, request: PlanRequest, session: Session) -> tuple[PatchPlan | None, str]:
        """The session's changes as a plan, or why they are refused (told the model)."""
        editable = set(request.editable_paths)
        changes = session.changes()
        seeded = set(session.seed.files)
        refused: dict[str, str] = {}
        deleted = [p for p, d in changes.items() if d is None and p in editable]
        files: list[PatchFile] = []
        for path, data in changes.items():
            if path in editable:
                if data is not None:
                    try:
                        files.append(PatchFile(path, data.decode("utf-8")))
                    except UnicodeDecodeError:
                        refused[path] = "not UTF-8 text"
            elif path in session.tests:
                refused[path] = "a test file; it may not be changed"
            elif path in seeded:
                how = "deleted" if data is None else "changed"
                refused[path] = f"{how}, but it is not editable; restore it"
            else:  # a file the seed did not have: a scratch file, a cache a tool wrote
                refused[path] = "a new file, and not editable; delete it"
        if refused or deleted:
            return None, talk.refusal(refused, deleted)
        if not files:
            return None, "Submission refused: no editable file was changed."
        try:
            plan = contract.validate_plan(
                PatchPlan(files), editable_paths=request.editable_paths, limits=request.limits
            )
        except PlanRejected as rejected:
            lines = "\n".join(f"- {r.describe()}" for r in rejected.rejections)
            return None, f"Submission refused; nothing was tested:\n{lines}"
        return plan, ""

    def _keep(
        self,
        journal: Journal,
        call: PlannerCall,
        talked: _Conversation,
        attempt: int,
        kind: str,
        said: str | None = None,
        output: str | None = None,
        turn: TokenUsage | None = None,
        **fields: Any,
    ) -> None:
        talked.steps += 1
        step = TrajectoryStep(
            number=talked.steps,
            attempt=attempt,
            kind=kind,
            said=call.redact(said) if said else None,
            output=call.redact(output) if output else None,
            prompt_tokens=turn.prompt_tokens if turn else None,
            completion_tokens=turn.completion_tokens if turn else None,
            **fields,
        )
        journal.keep(call.task_id, step)

    def _too_many(self, call: PlannerCall, errors: int) -> None:
        if errors >= talk.MAX_FORMAT_ERRORS:
            raise FormatErrors(
                f"the model answered {errors} times in a row with no usable function call; "
                f"its steps are kept: agent logs {call.task_id}",
                planner_task_id=call.task_id,
            )


def _assistant(said: str | None, calls: list[Any]) -> dict[str, Any]:
    """The assistant's turn as it goes back to the provider: its text and its calls."""
    kept = []
    for index, tool_call in enumerate(calls):
        call_id, name, raw = _parts(tool_call, index)
        kept.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": raw if isinstance(raw, str) else ""},
            }
        )
    return {"role": "assistant", "content": said, "tool_calls": kept}


def _parts(tool_call: object, index: int) -> tuple[str, str, object]:
    """A tool call's ID, function name and raw arguments, whatever shape it came in."""
    if not isinstance(tool_call, dict):
        return f"call_{index}", "", None
    function = tool_call.get("function")
    function = function if isinstance(function, dict) else {}
    call_id = tool_call.get("id")
    name = function.get("name")
    return (
        call_id if isinstance(call_id, str) and call_id else f"call_{index}",
        name if isinstance(name, str) else "",
        function.get("arguments"),
    )


def _tool(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _format_problem(name: str, raw: object, given: dict[str, Any] | None) -> str:
    if name not in ("bash", "submit"):
        return f"Unknown function {name[:80]!r}: the functions are `bash` and `submit`."
    if given is None:
        return (
            f"The arguments of `{name}` are not a JSON object: "
            f"{str(raw)[:200]!r}. Call it again with valid JSON."
        )
    if isinstance(given.get("command"), str):
        return "The command holds a NUL character, which no command line can: it was not run."
    return 'Call `bash` with {"command": "..."}, a string.'

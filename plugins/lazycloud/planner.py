"""The ``lazycloud`` planner: calls the deployed ``plan-patch`` function and waits, bounded.

It calls the deployed version (what ``agent lazycloud deploy`` made), never a
new release of the working tree, with the request as plain JSON data. The
result's planner task ID is the remote task's ID, which every error names too.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import (
    AgentError,
    ConfigurationError,
    PlanRejected,
    ProviderError,
    Rejection,
    UsageError,
)
from sandboxed_coding_agent.core.model import PlannerResult, PlanRequest
from sandboxed_coding_agent.core.plans import contract
from sandboxed_coding_agent.core.provider import API_KEY_ENV, blank_key

from .names import APP_SLUG, FUNCTION_NAME
from .remote import Deadlines, RemoteTimeout, bounded, translated

#: Keys shorter than this are placeholders, never searched for in text (as the local planner).


@attrs.frozen
class LazyCloudPlanner:
    """Asks the deployed LazyCloud function ``plan-patch`` for one plan.

    :ivar environ: where the deadlines' override is read, and the key (if this
        machine has it) that is blanked from anything the remote side says.
    """

    name: str = "lazycloud"
    description: str = (
        "the deployed LazyCloud function plan-patch (agent lazycloud configure, deploy)"
    )
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, repr=False)

    def plan(self, request: PlanRequest) -> PlannerResult:
        from sandboxed_coding_agent.core.serialization import to_jsonable

        deadlines = Deadlines.from_environment(self.environ)
        started = time.monotonic()
        redact = _redactor(self.environ.get(API_KEY_ENV, ""))
        with translated(ProviderError, f"calling {FUNCTION_NAME}", redact=redact):
            submission = bounded(
                lambda: _submit(to_jsonable(request)), deadlines.call, f"calling {FUNCTION_NAME}"
            )
        task_id = redact(str(submission.task_id))
        with translated(
            ProviderError, f"planner task {task_id}", planner_task_id=task_id, redact=redact
        ):
            try:
                view = bounded(
                    lambda: submission.task.wait_view(timeout_seconds=deadlines.planner),
                    deadlines.planner + deadlines.call,
                    f"planner task {task_id}",
                )
            except (RemoteTimeout, TimeoutError):
                _cancel(submission, deadlines)
                raise ProviderError(
                    f"the remote planner task did not finish within {deadlines.planner:g} s "
                    "and was cancelled",
                    planner_task_id=task_id,
                ) from None
            status = str(getattr(view.status, "value", view.status))
            if status != "succeeded":
                raise ProviderError(
                    f"the remote planner task {status}: {redact(_failure(view))}",
                    planner_task_id=task_id,
                )
            answer = bounded(
                lambda: plain_value(submission), deadlines.call, f"reading task {task_id}"
            )
        result = _result(answer, task_id, redact)
        try:
            plan = contract.validate_plan(
                result.plan, editable_paths=request.editable_paths, limits=request.limits
            )
        except PlanRejected as rejected:
            raise _redacted(rejected.rejections, task_id, redact) from None
        return attrs.evolve(
            result,
            plan=plan,
            planner=self.name,
            planner_task_id=task_id,
            duration_seconds=round(time.monotonic() - started, 3),
        )


def _submit(payload: dict[str, Any]) -> Any:
    from lazycloud.session.deployment import DeploymentClient

    from sandboxed_coding_agent.core.errors import ConfigurationError as NotDeployed

    client = DeploymentClient()
    try:
        deployment = client.get(FUNCTION_NAME, app=APP_SLUG)
    except Exception as error:
        if type(error).__name__ == "DeploymentNotFoundError":
            raise NotDeployed(
                f"the planner function {FUNCTION_NAME} is not deployed in this LazyCloud "
                "workspace; run `agent lazycloud deploy` (and `agent lazycloud configure` first)"
            ) from None
        raise
    return client.submit(deployment, payload)


class _PlainDataOnly(pickle.Unpickler):
    """Unpickles containers, text and numbers only: anything naming a class or a function
    (which is how a pickle runs code) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the answer names {module}.{name}, not plain data")


def plain_value(submission: Any) -> object:
    """The deployed function's answer, decoded as data and nothing else.

    The SDK would unpickle whatever the control plane sends as the task's result,
    and unpickling runs code. The function returns plain JSON-like data (stored as
    JSON by the service), so the raw payload is read instead: JSON as it is, a
    pickle only if it holds nothing but containers, text and numbers.
    """
    payload = submission.task.result(wait=False).value
    if payload is None:
        return None
    encoding = str(getattr(payload.encoding, "value", payload.encoding))
    if encoding == "json":
        return payload.value
    if encoding != "cloudpickle" or payload.data is None:
        raise ValueError(f"the answer came in an unknown form ({encoding!r})")
    try:
        return _PlainDataOnly(io.BytesIO(bytes(payload.data))).load()
    except Exception as error:
        raise ValueError(f"the answer is not plain data: {error}") from None


def _cancel(submission: Any, deadlines: Deadlines) -> None:
    try:
        bounded(submission.task.cancel, deadlines.call, "cancelling the planner task")
    except Exception:  # the task ends at its own timeout anyway
        return


def _failure(view: Any) -> str:
    failure = getattr(view, "failure", None)
    if failure is None:
        return "no reason given"
    kind = f"{failure.type}: " if failure.type else ""
    return " ".join(f"{kind}{failure.message}".split())[:1000]


def _redactor(key: str) -> Callable[[str], str]:
    """Blanks the key from remote text in every form it may take there (verbatim,
    JSON-escaped, URL-quoted), as run records do."""
    return lambda text: blank_key(text, key)


def _redacted(
    rejections: Iterable[Rejection], task_id: str, redact: Callable[[str], str]
) -> PlanRejected:
    """Rejections that quote remote text (a path, a message), with the key blanked."""
    return PlanRejected(
        [
            attrs.evolve(
                r,
                policy=redact(r.policy),
                rule=redact(r.rule),
                message=redact(r.message),
                path=None if r.path is None else redact(r.path),
            )
            for r in rejections
        ],
        planner_task_id=task_id,
    )


def _result(answer: object, task_id: str, redact: Callable[[str], str]) -> PlannerResult:
    """The handler's answer as a result, or the error it reports, named by the remote task."""
    from sandboxed_coding_agent.core.serialization import structure

    if not isinstance(answer, dict) or len(answer) != 1:
        raise ProviderError(
            f"the remote planner answered {type(answer).__name__}, not a plan; "
            "redeploy with `agent lazycloud deploy`",
            planner_task_id=task_id,
        )
    if "error" in answer:
        raise _error(answer["error"], task_id, redact)
    try:
        result = structure(answer["result"], PlannerResult)
    except Exception as error:
        raise ProviderError(
            f"the remote planner's answer is malformed ({type(error).__name__}); "
            "redeploy with `agent lazycloud deploy`",
            planner_task_id=task_id,
        ) from None
    # What the remote side says reaches the terminal, the result and the run record.
    if any(
        redact(entry.path + entry.content) != entry.path + entry.content
        for entry in result.plan.files
    ):
        raise ProviderError(
            f"the remote planner's plan holds the value of {API_KEY_ENV}; it is not used",
            planner_task_id=task_id,
        )
    return attrs.evolve(
        result,
        planner=redact(result.planner),
        planner_task_id=redact(result.planner_task_id),
        model=None if result.model is None else redact(result.model),
        response_id=None if result.response_id is None else redact(result.response_id),
        details=_remote_details(result.details, redact),
    )


def _remote_details(details: object, redact: Callable[[str], str]) -> dict[str, Any]:
    """The remote planner's details of its call, for the record of this one (``agent
    logs``), with the key blanked: the remote side's text is never trusted to lack it."""
    if not isinstance(details, dict):
        return {}
    try:
        text = json.dumps(details, ensure_ascii=False)
        data = json.loads(redact(text))
    except (TypeError, ValueError, RecursionError):
        return {}
    return {"remote": data} if isinstance(data, dict) else {}


def _error(body: object, task_id: str, redact: Callable[[str], str]) -> AgentError:
    if not isinstance(body, dict):
        return ProviderError("the remote planner failed without a message", planner_task_id=task_id)
    error = _remote_error(body, task_id, redact)
    error.details = _remote_details(body.get("details"), redact)
    return error


def _remote_error(body: dict[str, Any], task_id: str, redact: Callable[[str], str]) -> AgentError:
    from sandboxed_coding_agent.core.serialization import structure

    kind, message = body.get("kind"), redact(str(body.get("message", "")))
    if kind == "policy":
        try:
            rejections = [structure(item, Rejection) for item in body.get("rejections", [])]
        except Exception:
            rejections = []
        if rejections:
            refused = _redacted(rejections, task_id, redact)
            answer = body.get("answer")
            refused.answer = redact(answer) if isinstance(answer, str) else None
            return refused
    if kind == "configuration":
        return ConfigurationError(
            f"the remote planner's settings: {message} (it reads them from the workspace "
            "secrets; run `agent lazycloud configure`)",
            planner_task_id=task_id,
        )
    if kind == "usage":
        return UsageError(message, planner_task_id=task_id)
    return ProviderError(message, planner_task_id=task_id)

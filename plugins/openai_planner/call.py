"""One planner call: its task ID, its attempts, its details, and the key kept out of all of them."""

from __future__ import annotations

import json
import os
import time
from typing import Any
from urllib.parse import quote

import attrs

from sandboxed_coding_agent.core.errors import PlanRejected, ProviderError
from sandboxed_coding_agent.core.model import PlannerOptions, TokenUsage
from sandboxed_coding_agent.core.provider import MIN_SECRET_CHARS
from sandboxed_coding_agent.core.records import planner_calls

from .settings import CONTROL, ProviderSettings

MAX_QUOTED_CHARS = 300


def _well_formed(text: str) -> str:
    """``text`` with lone surrogates (``"\\ud800"`` escapes in the provider's JSON) as ``?``.

    Such text cannot be written as UTF-8: not to a record, not to the terminal.
    """
    return text.encode("utf-8", errors="replace").decode("utf-8")


def new_planner_task_id() -> str:
    return f"plan-{os.urandom(8).hex()}"


class PlannerCall:
    """One planner call: its task ID, its attempts, and how its errors and details read.

    Everything the user sees about the call goes through :meth:`redact`, so a
    provider that echoes the key back cannot make us show it.
    """

    def __init__(
        self,
        settings: ProviderSettings,
        options: PlannerOptions,
        planner: str,
        answer_bound: int = 64_000,
    ) -> None:
        self.settings = settings
        self.options = options
        self.planner = planner
        #: The most bytes of the provider's answer that are read (see ``transport.answer_bound``).
        self.answer_bound = answer_bound
        self.task_id = new_planner_task_id()
        self.started = time.monotonic()
        self.attempts: list[planner_calls.ProviderAttempt] = []
        self.request_info: planner_calls.ProviderRequestInfo | None = None
        self.excerpt: str | None = None
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self.usage: TokenUsage | None = None
        key = settings.api_key
        # The key as it may come back: verbatim, escaped inside a JSON string, URL-quoted.
        forms = {key, json.dumps(key)[1:-1], quote(key, safe="")}
        self._secret_forms = (
            sorted(forms, key=len, reverse=True) if len(key) >= MIN_SECRET_CHARS else []
        )

    def redact(self, text: str) -> str:
        for form in self._secret_forms:
            text = text.replace(form, "[redacted]")
        return text

    def holds_key(self, text: str) -> bool:
        return any(form in text for form in self._secret_forms)

    def error(self, message: str) -> ProviderError:
        return ProviderError(self.redact(message), planner_task_id=self.task_id)

    def rejected(self, error: PlanRejected, answer: str | None = None) -> PlanRejected:
        """``error`` for this call, with the key blanked from paths the model chose, and the
        model's ``answer`` for the repair attempt's conversation."""
        rejections = [
            attrs.evolve(r, message=self.redact(r.message), path=r.path and self.redact(r.path))
            for r in error.rejections
        ]
        return PlanRejected(rejections, planner_task_id=self.task_id, answer=answer)

    def quoted(self, text: str) -> str:
        """Provider text fit to quote: key removed, control characters blanked, bounded."""
        text = CONTROL.sub(" ", self.redact(_well_formed(text))).strip()
        return text[:MAX_QUOTED_CHARS] + ("..." if len(text) > MAX_QUOTED_CHARS else "")

    def keep_excerpt(self, text: str | bytes) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        self.excerpt = planner_calls.excerpt(self.redact(_well_formed(text)))

    def log_attempt(
        self,
        started: float,
        waited: float,
        status: int | None,
        outcome: str,
        detail: str | None,
        response_format: str | None,
    ) -> None:
        self.attempts.append(
            planner_calls.ProviderAttempt(
                number=len(self.attempts) + 1,
                started_seconds=round(started - self.started, 3),
                seconds=round(time.monotonic() - started, 3),
                status=status,
                outcome=outcome,
                detail=self.quoted(detail) if detail else None,
                waited_seconds=round(waited, 3),
                response_format=response_format,
            )
        )

    @property
    def seconds(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def details(self) -> dict[str, Any]:
        """What ``agent logs`` shows of the call: the request, each attempt, the answer's start."""
        return planner_calls.provider_details(
            request=self.request_info,
            attempts=self.attempts,
            finish_reason=self.finish_reason,
            response_excerpt=self.excerpt,
        )

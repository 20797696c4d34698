"""Reward functions for trainers: TRL's ``reward_funcs`` and verl's ``compute_score``.

Both take a model's completion, find the patch in it (:func:`patch_in`), and test it with
:func:`~sandboxed_coding_agent.verification.verify` on this machine, or, given ``url``,
ask a verdict server (``agent serve``) for the verdict: 1.0 for a pass, 0.0 for a
failure, a refused plan or a completion with no patch in it, ``None`` when no verdict
could be reached (the sandbox failed, or the server could not be reached: leave that
sample out). Neither trainer is imported: the functions only follow the shapes they call
with.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from typing import Any

from sandboxed_coding_agent.verification import VerifyError, verify, verify_many

__all__ = ["compute_score", "patch_in", "trl_reward"]

#: A fenced block: ```lang ... ```; the body is everything up to a closing fence on a line
#: of its own (a diff or a JSON plan may hold backticks of its own).
_FENCE = re.compile(r"^```[ \t]*([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_PLAN_KEYS = ("files", "edits", "diff")


def patch_in(completion: object) -> str | None:
    """The patch a completion holds, as text :func:`verify` reads; ``None`` when it has none.

    :param completion: the completion's text, or a conversation as TRL gives it (a list of
        ``{"role": ..., "content": ...}`` messages, whose last assistant message is read;
        ``content`` may be text or a list of ``{"type": "text", "text": ...}`` parts).

    The last fenced block that is a unified diff or a JSON plan (``{"files": ...}``,
    ``{"edits": ...}`` or ``{"diff": ...}``) wins; without one, the whole text if it is one.
    """
    from sandboxed_coding_agent.core.plans.udiff import looks_like_diff

    text = _text_of(completion)
    if text is None:
        return None
    blocks: list[str] = [body for _, body in _FENCE.findall(text)]
    for candidate in [*reversed(blocks), text]:
        stripped = candidate.strip()
        if stripped.startswith("{"):
            if _is_plan_json(stripped):
                return stripped
        elif looks_like_diff(candidate):
            return candidate if candidate.endswith("\n") else candidate + "\n"
    return None


def _is_plan_json(text: str) -> bool:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and any(key in data for key in _PLAN_KEYS)


def _text_of(completion: object) -> str | None:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if not isinstance(completion, Sequence):
        return None
    said = [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    if not said:
        return None
    content = said[-1].get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return "".join(part for part in parts if isinstance(part, str))
    return None


def trl_reward(
    seed_column: str = "seed",
    *,
    jobs: int | None = None,
    url: str | None = None,
    token: str | None = None,
    **options: Any,
) -> Callable[..., list[float | None]]:
    """A reward function for TRL (``GRPOTrainer(reward_funcs=[trl_reward()])``).

    TRL calls it with the batch's prompts and completions and each dataset column as a
    keyword argument holding one value per completion; ``seed_column`` names the column
    that holds each row's seed (a name or a folder). The completions are tested at most
    ``jobs`` at a time (default: the CPU count).

    :param options: :func:`~sandboxed_coding_agent.verification.verify`'s keyword
        arguments (``runner``, ``limits``, ``partial_credit``, ``record``...).
    :param url: a verdict server's address (``http://HOST:PORT``): the completions are sent
        there, in batches, instead of being tested here. Only ``partial_credit`` and
        ``policies`` may then be given; the rest is the server's.
    :param token: the server's bearer token, sent only in the ``Authorization`` header.
    :raises VerifyError: (when called) the column is missing, a seed or option is wrong, or
        the server refused the request (its message says why).
    """
    if url is not None:
        _check_remote_options(options)

    def reward_func(
        prompts: Sequence[object] | None = None,
        completions: Sequence[object] = (),
        **columns: Any,
    ) -> list[float | None]:
        if seed_column not in columns:
            given = ", ".join(sorted(columns)) or "none"
            raise VerifyError(
                f"the dataset has no column {seed_column!r} naming each row's seed "
                f"(columns given: {given}); name it with trl_reward(seed_column=...)"
            )
        seeds = list(columns[seed_column])
        if len(seeds) != len(completions):
            raise VerifyError(
                f"{len(completions)} completions but {len(seeds)} values of {seed_column!r}"
            )
        rewards: list[float | None] = [0.0] * len(completions)
        patched = [(i, patch_in(c)) for i, c in enumerate(completions)]
        items = [(index, (seeds[index], patch)) for index, patch in patched if patch is not None]
        if url is not None:
            requests = [{"seed": seed, "plan": patch, **options} for _, (seed, patch) in items]
            for (index, _), reward in zip(
                items, _remote_rewards(url, token, requests), strict=True
            ):
                rewards[index] = reward
            return rewards
        for place, verdict in verify_many([item for _, item in items], jobs=jobs, **options):
            rewards[items[place][0]] = verdict.reward
        return rewards

    reward_func.__name__ = "sandboxed_coding_agent"  # TRL names its logged reward so
    return reward_func


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: object = None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    token: str | None = None,
    **options: Any,
) -> float | None:
    """verl's reward function (``custom_reward_function.name: compute_score``).

    The seed is ``extra_info["seed"]`` when the row has one, else ``data_source``;
    ``ground_truth`` is not used: the seed's tests are the truth. ``options`` are
    :func:`~sandboxed_coding_agent.verification.verify`'s keyword arguments; with ``url``
    and ``token``, as for :func:`trl_reward`, the verdict comes from that server.

    :returns: 1.0, 0.0 (a failure, a refused plan, no patch in ``solution_str``), or
        ``None`` when no verdict could be reached.
    :raises VerifyError: the seed does not exist, or an option is wrong.
    """
    seed = data_source
    if extra_info is not None and isinstance(extra_info.get("seed"), str):
        seed = extra_info["seed"]
    patch = patch_in(solution_str)
    if patch is None:
        return 0.0
    if url is not None:
        _check_remote_options(options)
        return _remote_rewards(url, token, [{"seed": seed, "plan": patch, **options}])[0]
    return verify(seed, patch, **options).reward


#: What a request to a verdict server may choose; the rest is the server's.
REMOTE_OPTIONS = ("partial_credit", "policies")
#: Requests sent to a server in one batch (a server admits ``jobs + queue`` at most).
REMOTE_BATCH = 16
#: How many times a request turned away for load (429, 503) is sent again.
REMOTE_TRIES = 30
#: Seconds one batch may take, from the first try to the last byte of the answer (its
#: sandboxes' time and the waits a busy server asks for included): past them, no verdict.
REMOTE_SECONDS = 600.0
#: The largest answer read from a server; a longer one is no verdict.
REMOTE_MAX_BYTES = 256 * 1024 * 1024


def _check_remote_options(options: Mapping[str, Any]) -> None:
    other = sorted(set(options) - set(REMOTE_OPTIONS))
    if other:
        raise VerifyError(
            f"with url, only {' and '.join(REMOTE_OPTIONS)} may be given; "
            f"{', '.join(other)} are the server's (set when it starts)"
        )


def _remote_rewards(
    url: str, token: str | None, requests: Sequence[Mapping[str, Any]]
) -> list[float | None]:
    """Each request's reward from the server at ``url``; ``None`` for those it did not
    answer (it could not be reached, or it failed, or its answer is no reward).

    :raises VerifyError: the server refused a request as wrong (400, 401, 404, 413).
    """
    rewards: list[float | None] = []
    for start in range(0, len(requests), REMOTE_BATCH):
        chunk = list(requests[start : start + REMOTE_BATCH])
        answer = _post(url.rstrip("/") + "/v1/verify/batch", token, {"items": chunk})
        verdicts = answer.get("verdicts") if isinstance(answer, dict) else None
        if not isinstance(verdicts, list) or len(verdicts) != len(chunk):
            rewards += [None] * len(chunk)
            continue
        rewards += [_reward(verdict) for verdict in verdicts]
    return rewards


def _reward(verdict: object) -> float | None:
    """A verdict's reward: a number from 0 to 1 (``NaN``, ``true``, ``"1"`` or 7 are none)."""
    reward = verdict.get("reward") if isinstance(verdict, dict) else None
    if isinstance(reward, int | float) and not isinstance(reward, bool) and 0 <= reward <= 1:
        return float(reward)
    return None


def _post(address: str, token: str | None, body: object) -> object:
    """The server's JSON answer; ``None`` when there is none to be had within
    :data:`REMOTE_SECONDS`."""
    parts = urllib.parse.urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise VerifyError(f"url must start with http:// or https://, not {address!r}")
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode("utf-8", "surrogatepass")
    deadline = time.monotonic() + REMOTE_SECONDS
    for _ in range(REMOTE_TRIES):
        try:
            status, retry_after, answer = _exchange(parts, headers, data, deadline)
        except (OSError, HTTPException, ValueError):
            return None  # not reached, cut off, too slow, or not HTTP: no verdict
        if status in (429, 503):
            wait = _retry_after(retry_after)
            if time.monotonic() + wait >= deadline:
                return None
            time.sleep(wait)
            continue
        if 200 <= status < 300:
            try:
                return json.loads(answer)
            except (ValueError, RecursionError):
                return None
        if status >= 500:
            return None
        raise VerifyError(
            f"the verdict server refused the request ({status}): {_message(status, answer)}"
        )
    return None


def _exchange(
    parts: urllib.parse.SplitResult, headers: Mapping[str, str], data: bytes, deadline: float
) -> tuple[int, str | None, bytes]:
    """One POST of ``data``: the answer's status, ``Retry-After`` and body.

    No proxy from the environment and no redirect followed: the token goes to this server
    only. The socket is shut at ``deadline`` however slowly the server drips its answer.

    :raises OSError: not reached, cut off, past ``deadline``, or past
        :data:`REMOTE_MAX_BYTES`.
    :raises HTTPException: the answer is not HTTP.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left")
    kind = HTTPSConnection if parts.scheme == "https" else HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=left)
    try:
        connection.connect()
        watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), _shut, [connection])
        watchdog.daemon = True
        watchdog.start()
        try:
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("POST", target, body=data, headers=dict(headers))
            answer = connection.getresponse()
            read = bytearray()
            # read1: what one read of the socket gives, so the deadline is looked at between
            # the bytes of an answer that never ends (a shut socket may still take them in).
            while chunk := answer.read1(1 << 20):
                read += chunk
                if len(read) > REMOTE_MAX_BYTES:
                    raise OSError(f"an answer longer than {REMOTE_MAX_BYTES} bytes")
                if time.monotonic() >= deadline:
                    raise TimeoutError("the answer came too late")
        finally:
            watchdog.cancel()
        if time.monotonic() >= deadline:
            raise TimeoutError("the answer came too late")
        return answer.status, answer.getheader("Retry-After"), bytes(read)
    finally:
        connection.close()


def _shut(connection: HTTPConnection) -> None:
    """Wakes a read blocked on ``connection`` (closing it from another thread would not)."""
    if connection.sock is not None:
        with suppress(OSError):
            socket.socket.shutdown(connection.sock, socket.SHUT_RDWR)


def _retry_after(value: str | None) -> float:
    try:
        seconds = float(value or 1)
    except ValueError:
        return 1.0
    return min(max(seconds, 0.1), 30.0) if math.isfinite(seconds) else 1.0


def _message(status: int, answer: bytes) -> str:
    try:
        found = json.loads(answer)["error"]["message"]
    except (ValueError, RecursionError, KeyError, TypeError):
        return f"status {status}"
    return str(found)[:2000]

"""Reward functions for trainers: TRL's ``reward_funcs`` and verl's ``compute_score``.

Both take a model's completion, find the patch in it (:func:`patch_in`), and test it with
:func:`~sandboxed_coding_agent.verification.verify` on this machine: 1.0 for a pass, 0.0
for a failure, a refused plan or a completion with no patch in it, ``None`` when no
verdict could be reached (the sandbox failed: leave that sample out). Neither trainer is
imported: the functions only follow the shapes they call with.

A server that gives verdicts to trainers on other machines does not exist yet; when it
does, these functions will take its address. Today they test on the machine they run on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
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
    seed_column: str = "seed", *, jobs: int | None = None, **options: Any
) -> Callable[..., list[float | None]]:
    """A reward function for TRL (``GRPOTrainer(reward_funcs=[trl_reward()])``).

    TRL calls it with the batch's prompts and completions and each dataset column as a
    keyword argument holding one value per completion; ``seed_column`` names the column
    that holds each row's seed (a name or a folder). The completions are tested at most
    ``jobs`` at a time (default: the CPU count).

    :param options: :func:`~sandboxed_coding_agent.verification.verify`'s keyword
        arguments (``runner``, ``limits``, ``partial_credit``, ``record``...).
    :raises VerifyError: (when called) the column is missing, or a seed or option is wrong.
    """

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
    **options: Any,
) -> float | None:
    """verl's reward function (``custom_reward_function.name: compute_score``).

    The seed is ``extra_info["seed"]`` when the row has one, else ``data_source``;
    ``ground_truth`` is not used: the seed's tests are the truth. ``options`` are
    :func:`~sandboxed_coding_agent.verification.verify`'s keyword arguments.

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
    return verify(seed, patch, **options).reward

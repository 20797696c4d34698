"""The trainers' reward functions: TRL's shape and verl's, on real sandboxes, without either
trainer installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_verify_api import BROKEN_ADD, FIX_DIFF, FIXED_ADD, whole

from sandboxed_coding_agent.rewards import compute_score, patch_in, trl_reward
from sandboxed_coding_agent.verification import VerifyError

FIXED_JSON = json.dumps(whole("calculator.py", FIXED_ADD))
BROKEN_JSON = json.dumps(whole("calculator.py", BROKEN_ADD))
GOOD = f"The subtraction is the bug.\n\n```diff\n{FIX_DIFF}```\n"
FAILING = f"Here is my plan:\n```json\n{BROKEN_JSON}\n```\nDone."
PATCHLESS = "I would change add so that it adds. ```python\nprint('hi')\n```"


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("SANDBOXED_CODING_AGENT_BWRAP", raising=False)


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize(
    ("completion", "found"),
    [
        (GOOD, FIX_DIFF),
        (FAILING, BROKEN_JSON),
        (FIX_DIFF, FIX_DIFF),  # a bare diff
        (f"  {FIXED_JSON}  ", FIXED_JSON),  # bare JSON
        (chat(GOOD), FIX_DIFF),
        ([{"role": "assistant", "content": [{"type": "text", "text": GOOD}]}], FIX_DIFF),
        (PATCHLESS, None),
        ('```json\n{"answer": 42}\n```', None),  # JSON, but no plan
        ([{"role": "user", "content": GOOD}], None),  # no assistant message
        (None, None),
    ],
)
def test_the_patch_is_found_in_a_completion(completion: object, found: str | None) -> None:
    assert patch_in(completion) == found


def test_the_last_plan_of_a_completion_wins() -> None:
    text = f"First try:\n```json\n{BROKEN_JSON}\n```\nBetter:\n```diff\n{FIX_DIFF}```\n"

    assert patch_in(text) == FIX_DIFF


@pytest.mark.parametrize("shape", [str, chat])
def test_trl_reward_scores_good_failing_and_patchless_completions(shape: object) -> None:
    reward_func = trl_reward(jobs=2)
    completions = [shape(text) for text in (GOOD, FAILING, PATCHLESS)]  # type: ignore[operator]

    rewards = reward_func(
        prompts=["fix it"] * 3,
        completions=completions,
        seed=["calculator"] * 3,
        other_column=[1, 2, 3],
    )

    assert rewards == [1.0, 0.0, 0.0]
    assert reward_func.__name__ == "sandboxed_coding_agent"


def test_trl_reward_is_none_where_no_verdict_was_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOXED_CODING_AGENT_BWRAP", "/bin/false")

    assert trl_reward()(
        prompts=["p", "p"], completions=[GOOD, PATCHLESS], seed=["calculator"] * 2
    ) == [
        None,
        0.0,
    ]


def test_trl_reward_reads_the_seed_from_the_column_named() -> None:
    reward_func = trl_reward(seed_column="project")

    assert reward_func(prompts=["p"], completions=[GOOD], project=["calculator"]) == [1.0]
    with pytest.raises(VerifyError, match=r"no column 'project'.*columns given: seed"):
        reward_func(prompts=["p"], completions=[GOOD], seed=["calculator"])
    with pytest.raises(VerifyError, match="unknown seed 'nope'"):
        reward_func(prompts=["p"], completions=[GOOD], project=["nope"])


def test_compute_score_has_verls_signature_and_reads_the_seed_from_extra_info() -> None:
    assert compute_score("calculator", GOOD, None) == 1.0
    assert compute_score("swe-data", GOOD, "", extra_info={"seed": "calculator"}) == 1.0
    assert compute_score("calculator", FAILING, None, extra_info={}) == 0.0
    assert compute_score("calculator", PATCHLESS, None) == 0.0
    with pytest.raises(VerifyError, match="unknown seed 'swe-data'"):
        compute_score("swe-data", GOOD, None, extra_info={"index": 3})


def test_compute_score_is_none_where_no_verdict_was_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SANDBOXED_CODING_AGENT_BWRAP", "/bin/false")

    assert compute_score("calculator", GOOD, None) is None

"""What the user reads when the provider settings or answers are wrong: the rule, the cause.

Each test runs the real ``agent`` against a real loopback server.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import API_KEY, AgentRun, FakeProvider

RunAgent = Callable[..., AgentRun]


def test_a_400_says_a_rejected_key_can_show_up_as_one(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    # What a LiteLLM proxy answers a key it does not know.
    provider.reply(400, {"error": {"message": "No connected db.", "code": "400"}})

    run = run_agent("run", "--json", "--provider-retries", "0")

    assert run.returncode == 3, run.stderr
    message = run.json()["error"]["message"]
    assert "rejected the request (HTTP 400 Bad Request)" in message
    assert "some proxies answer a rejected API key this way too" in message
    assert "check CODING_AGENT_API_KEY" in message
    assert "No connected db." in message
    assert API_KEY not in run.stdout + run.stderr


@pytest.mark.parametrize(
    ("url", "said", "not_said"),
    [
        ("ftp://example.com/v1", "plain http for a server on this machine", "must end in"),
        ("http://example.com/v1", "allowed only for localhost, 127.0.0.0/8 and ::1", "must end"),
    ],
    ids=["other-scheme", "remote-http"],
)
def test_base_url_messages_state_the_rule_that_applies(
    run_agent: RunAgent, url: str, said: str, not_said: str
) -> None:
    run = run_agent("run", env={"CODING_AGENT_BASE_URL": url})

    assert run.returncode == 2, run.stderr
    assert said in run.stderr
    assert not_said not in run.stderr
    assert "Traceback" not in run.stderr

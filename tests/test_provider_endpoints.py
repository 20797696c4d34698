"""Any OpenAI-compatible endpoint: whatever path the base URL has, and Azure OpenAI's
``api-version`` query parameter and ``api-key`` header.

Each test runs the real ``agent`` against a real loopback server that answers only
the one endpoint a provider of that kind serves, and 404 to anything else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import API_KEY, FIXED_CALCULATOR, AgentRun, FakeProvider, Reply, completion, plan_json

RunAgent = Callable[..., AgentRun]
PLAN = plan_json(("calculator.py", FIXED_CALCULATOR))
AZURE_PATH = "/openai/deployments/dep/chat/completions?api-version=2024-06-01"
AZURE = {"CODING_AGENT_API_VERSION": "2024-06-01", "CODING_AGENT_AUTH_HEADER": "api-key"}


def send(handler: BaseHTTPRequestHandler, status: int, body: object) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve_only(
    provider: FakeProvider, path: str, *, key_header: str = "Authorization", key: str = ""
) -> None:
    """Make ``provider`` answer a plan at ``path`` (query included) to a request whose key
    is in ``key_header`` alone, and 404 or 401 to anything else, as a real provider would."""
    expected = key or f"Bearer {API_KEY}"

    def answer(handler: BaseHTTPRequestHandler) -> None:
        if handler.path != path:
            send(handler, 404, {"error": {"message": f"Resource not found: {handler.path}"}})
            return
        headers = {name.lower(): value for name, value in handler.headers.items()}
        others = {"authorization", "api-key"} - {key_header.lower()}
        if headers.get(key_header.lower()) != expected or others & headers.keys():
            send(handler, 401, {"error": {"message": "Access denied: wrong key header"}})
            return
        send(handler, 200, completion(PLAN))

    provider.default = Reply(action=answer)


def root_of(provider: FakeProvider) -> str:
    return provider.base_url.removesuffix("/v1")


def everything_written(state: Path) -> str:
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(state.rglob("*"))
        if path.is_file()
    )


def test_gemini_style_base_url_without_v1_is_used_as_given(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    serve_only(provider, "/v1beta/openai/chat/completions")

    run = run_agent("run", env={"CODING_AGENT_BASE_URL": root_of(provider) + "/v1beta/openai"})

    assert run.returncode == 0, run.stderr
    assert [r.path for r in provider.requests] == ["/v1beta/openai/chat/completions"]


def test_azure_deployment_gets_api_version_and_the_key_in_api_key_only(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    serve_only(provider, AZURE_PATH, key_header="api-key", key=API_KEY)
    base_url = root_of(provider) + "/openai/deployments/dep"

    run = run_agent("run", "--json", env={"CODING_AGENT_BASE_URL": base_url, **AZURE})
    shown = run_agent("logs", run.json()["planner_task_id"], env=AZURE)
    doctor = run_agent("doctor", env={"CODING_AGENT_BASE_URL": base_url, **AZURE})

    assert run.returncode == 0, run.stderr
    [request] = provider.requests
    assert request.path == AZURE_PATH
    assert request.headers["api-key"] == API_KEY
    assert "Authorization" not in request.headers
    assert "api-version 2024-06-01" in doctor.stdout
    assert "CODING_AGENT_API_KEY set in header api-key (not shown)" in doctor.stdout
    written = everything_written(tmp_path / "state")
    assert "/openai/deployments/dep/chat/completions" in written  # the record is there
    for output in (run.stdout, run.stderr, shown.stdout, shown.stderr, doctor.stdout, written):
        assert API_KEY not in output


def test_azure_settings_missing_leave_the_provider_answering_401_or_404(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    serve_only(provider, AZURE_PATH, key_header="api-key", key=API_KEY)
    base_url = root_of(provider) + "/openai/deployments/dep"

    without_version = run_agent(
        "run",
        "--provider-retries",
        "0",
        env={"CODING_AGENT_BASE_URL": base_url, "CODING_AGENT_AUTH_HEADER": "api-key"},
    )
    bearer = run_agent(
        "run",
        "--provider-retries",
        "0",
        env={"CODING_AGENT_BASE_URL": base_url, "CODING_AGENT_API_VERSION": "2024-06-01"},
    )

    assert without_version.returncode == 3
    assert "HTTP 404" in without_version.stderr
    assert bearer.returncode == 3
    assert "HTTP 401" in bearer.stderr
    assert API_KEY not in without_version.stderr + bearer.stderr


def test_base_url_with_no_path_posts_to_chat_completions_at_the_root(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    serve_only(provider, "/chat/completions")

    run = run_agent("run", env={"CODING_AGENT_BASE_URL": root_of(provider)})

    assert run.returncode == 0, run.stderr
    assert [r.path for r in provider.requests] == ["/chat/completions"]


def test_a_404_for_a_base_url_with_no_path_suggests_v1(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    serve_only(provider, "/v1/chat/completions")

    run = run_agent(
        "run", "--provider-retries", "0", env={"CODING_AGENT_BASE_URL": root_of(provider)}
    )
    doctor = run_agent("doctor", env={"CODING_AGENT_BASE_URL": root_of(provider)})

    assert run.returncode == 3, run.stderr
    assert "HTTP 404" in run.stderr
    hint = "has no path, and most providers serve chat completions under one, such as"
    assert f"{hint} {root_of(provider)}/v1" in run.stderr
    assert "has no path" in doctor.stdout
    assert [r.path for r in provider.requests] == ["/chat/completions"]


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"CODING_AGENT_API_VERSION": "2024-06-01&x=1"}, "CODING_AGENT_API_VERSION must be"),
        ({"CODING_AGENT_API_VERSION": "2024/06/01"}, "CODING_AGENT_API_VERSION must be"),
        ({"CODING_AGENT_API_VERSION": "v" * 65}, "CODING_AGENT_API_VERSION must be"),
        ({"CODING_AGENT_AUTH_HEADER": "api key"}, "CODING_AGENT_AUTH_HEADER must be"),
        ({"CODING_AGENT_AUTH_HEADER": "api-key:"}, "CODING_AGENT_AUTH_HEADER must be"),
        ({"CODING_AGENT_AUTH_HEADER": "Content-Type"}, "CODING_AGENT_AUTH_HEADER cannot be"),
        ({"CODING_AGENT_AUTH_HEADER": "host"}, "CODING_AGENT_AUTH_HEADER cannot be"),
        ({"CODING_AGENT_AUTH_HEADER": "Content-Length"}, "CODING_AGENT_AUTH_HEADER cannot be"),
    ],
    ids=[
        "version-query",
        "version-slash",
        "version-long",
        "header-space",
        "header-colon",
        "header-content-type",
        "header-host",
        "header-content-length",
    ],
)
def test_bad_azure_settings_are_one_configuration_error(
    provider: FakeProvider, run_agent: RunAgent, env: dict[str, str], said: str
) -> None:
    run = run_agent("run", env=env)

    assert run.returncode == 2, run.stderr
    [line] = [line for line in run.stderr.splitlines() if "error" in line]
    assert line.startswith("agent: configuration error: "), line
    assert said in line
    assert "Traceback" not in run.stderr
    assert API_KEY not in run.stderr
    assert provider.requests == []

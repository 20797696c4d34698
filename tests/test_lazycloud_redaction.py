"""The LazyCloud planner blanks the API key from whatever the remote side answers.

A control plane (or whoever tampers with its traffic) may echo the key in any field of
its answer: the model, the response ID, a rejection, an error message; verbatim,
JSON-escaped or URL-quoted. None of it may reach the terminal, the result or the run
record: the key travels only in the provider's Authorization header.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import API_KEY, FIXED_CALCULATOR, AgentRun, FakeProvider
from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
    ControlPlane,
    control_plane_fixture,
    lazycloud_env_fixture,
)
from test_lazycloud import (  # noqa: F401 - the fixtures, used by their names
    RunAgent,
    cwd,
    deployed,
    lazycloud,
    lazycloud_environment,
)

from sandboxed_coding_agent.plugins.lazycloud.names import FUNCTION_NAME

# The key as a remote answer may spell it: every character escaped, and mixed forms.
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in API_KEY)
QUOTED = "".join(f"%{ord(c):02X}" for c in API_KEY)
MIXED = API_KEY[:3] + quote(API_KEY[3:], safe="").replace("a", "%61")
FORMS = {"verbatim": API_KEY, "json": ESCAPED, "url": QUOTED, "mixed": MIXED}


def leaks(run: AgentRun, state: Path) -> list[str]:
    """Where a form of the key appears: the run's output and every record it kept."""
    places = {"stdout": run.stdout, "stderr": run.stderr}
    for record in state.rglob("*.json"):
        places[str(record)] = record.read_text(encoding="utf-8")
    return [
        f"{name} holds the {form} key"
        for name, text in places.items()
        for form, spelled in FORMS.items()
        if spelled in text or (form == "json" and ESCAPED.replace("\\", "\\\\") in text)
    ]


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def run_planner(lazycloud: RunAgent) -> AgentRun:  # noqa: F811
    return lazycloud("run", "--planner", "lazycloud", "--runner", "local", "--json")


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_model_and_response_id_of_a_remote_answer_are_blanked(
    lazycloud: RunAgent,  # noqa: F811
    deployed: ControlPlane,  # noqa: F811
    provider: FakeProvider,
    state: Path,
    form: str,
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    spelled = FORMS[form]
    deployed.answer_next_task(
        FUNCTION_NAME,
        {
            "result": {
                "planner": "openai",
                "planner_task_id": f"task-{spelled}",
                "plan": {"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]},
                "model": f"model {spelled}\x1b[2J",
                "response_id": f"resp-{spelled}",
            }
        },
    )

    run = run_planner(lazycloud)

    assert run.returncode == 0, run.stderr
    result = run.json()
    assert result["model"] == "model [redacted]\x1b[2J"
    assert leaks(run, state) == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_remote_rejections_are_blanked(
    lazycloud: RunAgent,  # noqa: F811
    deployed: ControlPlane,  # noqa: F811
    state: Path,
    form: str,
) -> None:
    spelled = FORMS[form]
    deployed.answer_next_task(
        FUNCTION_NAME,
        {
            "error": {
                "kind": "policy",
                "message": f"refused {spelled}",
                "rejections": [
                    {
                        "policy": "patch-contract",
                        "rule": "path-not-editable",
                        "message": f"use {spelled} instead",
                        "path": f"{spelled}.py",
                    }
                ],
            }
        },
    )

    run = run_planner(lazycloud)

    assert run.returncode == 4, run.stderr
    [rejection] = run.json()["error"]["rejections"]
    assert rejection["message"] == "use [redacted] instead"
    assert rejection["path"] == "[redacted].py"
    assert leaks(run, state) == []


@pytest.mark.parametrize("form", sorted(FORMS))
def test_remote_error_messages_are_blanked(
    lazycloud: RunAgent,  # noqa: F811
    deployed: ControlPlane,  # noqa: F811
    state: Path,
    form: str,
) -> None:
    spelled = FORMS[form]
    deployed.answer_next_task(
        FUNCTION_NAME, {"error": {"kind": "provider", "message": f"bad key {spelled}"}}
    )

    answered = run_planner(lazycloud)
    deployed.fail_next_task(FUNCTION_NAME, type="ValueError", message=f"the key was {spelled}")
    failed = run_planner(lazycloud)

    assert answered.returncode == 3, answered.stderr
    assert answered.json()["error"]["message"] == "bad key [redacted]"
    assert failed.returncode == 3, failed.stderr
    assert "ValueError: the key was [redacted]" in failed.json()["error"]["message"]
    assert leaks(answered, state) == []
    assert leaks(failed, state) == []


def test_a_remote_plan_holding_the_key_is_not_used(
    lazycloud: RunAgent,  # noqa: F811
    deployed: ControlPlane,  # noqa: F811
    state: Path,
) -> None:
    content = FIXED_CALCULATOR + f"# {ESCAPED}\n"
    deployed.answer_next_task(
        FUNCTION_NAME,
        {
            "result": {
                "planner": "openai",
                "planner_task_id": "task-1",
                "plan": {"files": [{"path": "calculator.py", "content": content}]},
            }
        },
    )

    run = run_planner(lazycloud)

    assert run.returncode == 3, run.stderr
    assert "holds the value of" in run.json()["error"]["message"]
    assert leaks(run, state) == []
    records = [json.loads(p.read_text()) for p in state.rglob("run-records/*.json")]
    assert all(record["tests"] == [] for record in records)

"""A third-party planner, installed as a distribution: its calls are recorded for ``agent logs``
like the built-in planner's, with what it adds, and an answer that is not a plan is exit 3."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import API_KEY, FIXED_CALCULATOR, AgentRun, install_plugin

RunAgent = Callable[..., AgentRun]

#: The plugin: a planner that answers with the text of the file SCRIPTED_ANSWER names.
PLANNER = '''
"""A planner whose "model" is a file: SCRIPTED_ANSWER names it."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path

from sandboxed_coding_agent.core.plans.contract import plan_from_answer, validate_plan
from sandboxed_coding_agent.core.errors import ProviderError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PlannerResult, PlanRequest
from sandboxed_coding_agent.core.protocols import Planner


class Scripted:
    name = "scripted"
    description = "answers with the file SCRIPTED_ANSWER names"

    def plan(self, request: PlanRequest) -> PlannerResult:
        task_id = f"scripted-{secrets.token_hex(8)}"
        location = os.environ["SCRIPTED_ANSWER"]
        answer = Path(location).read_text()
        details = {"answer_file": location, "answer_chars": len(answer)}
        details["backend"] = {"kind": "file"}
        if answer == "refuse":
            raise ProviderError(
                "the file refused to answer", planner_task_id=task_id, details=details
            )
        plan = validate_plan(
            plan_from_answer(answer, planner_task_id=task_id),
            editable_paths=request.editable_paths,
            limits=request.limits,
            planner_task_id=task_id,
        )
        return PlannerResult(
            planner=self.name, planner_task_id=task_id, plan=plan, details=details
        )


@hookimpl
def register_planners(register: Callable[[Planner], None]) -> None:
    register(Scripted())
'''


@pytest.fixture
def plugin_site(tmp_path: Path) -> Path:
    """A folder holding the plugin as an installed distribution: its module and its
    ``.dist-info`` with the entry point, as ``pip install --target`` leaves them."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "scripted_planner.py").write_text(PLANNER)
    install_plugin(site, "scripted-planner", "0.1.0", {"scripted_planner": "scripted_planner"})
    return site


@pytest.fixture
def scripted(run_agent: RunAgent, plugin_site: Path, tmp_path: Path) -> Callable[..., AgentRun]:
    """``agent ARGS`` with the plugin installed and ``answer`` as the planner's answer
    (or the text of ``answer_file``)."""

    def run(answer: str, *args: str, answer_file: Path | None = None) -> AgentRun:
        if answer_file is None:
            answer_file = tmp_path / "answer.txt"
            answer_file.write_text(answer)
        env = {"PYTHONPATH": str(plugin_site), "SCRIPTED_ANSWER": str(answer_file)}
        return run_agent(*args, env=env)

    return run


def plan_text(content: str) -> str:
    return json.dumps({"files": [{"path": "calculator.py", "content": content}]})


def runs_dir(agent_env: dict[str, str]) -> Path:
    return Path(agent_env["XDG_STATE_HOME"]) / "sandboxed-coding-agent" / "runs"


def test_plugin_planners_call_is_shown_by_agent_logs_with_its_plan_and_details(
    scripted: Callable[..., AgentRun],
) -> None:
    run = scripted(plan_text(FIXED_CALCULATOR), "run", "--planner", "scripted", "--json")

    assert run.returncode == 0, run.stderr
    task_id = run.json()["planner_task_id"]
    assert re.fullmatch(r"scripted-[0-9a-f]{16}", task_id)

    shown = scripted("", "logs", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert (record["planner_task_id"], record["planner"]) == (task_id, "scripted")
    assert (record["seed"], record["outcome"], record["error"]) == ("calculator", "ok", None)
    assert record["plan"] == json.loads(plan_text(FIXED_CALCULATOR))
    assert record["details"]["answer_chars"] == len(plan_text(FIXED_CALCULATOR))
    assert record["details"]["backend"] == {"kind": "file"}
    assert record["started_at"] <= record["finished_at"]
    assert record["duration_seconds"] >= 0

    text = scripted("", "logs", task_id)
    assert text.returncode == 0, text.stderr
    assert f"planner task {task_id} (scripted) for seed calculator" in text.stdout
    assert "outcome:  ok" in text.stdout
    assert "plan:     replaces calculator.py" in text.stdout
    assert 'backend: {"kind": "file"}' in text.stdout
    # The summary points to the record, as it does for the built-in planner.
    summary = scripted(plan_text(FIXED_CALCULATOR), "run", "--planner", "scripted")
    assert re.search(r"record: +agent logs scripted-[0-9a-f]{16}", summary.stdout), summary.stdout


def test_plugin_planners_failed_call_is_shown_by_agent_logs_with_its_error_and_details(
    scripted: Callable[..., AgentRun],
) -> None:
    run = scripted("refuse", "run", "--planner", "scripted", "--json")

    assert run.returncode == 3, run.stderr
    task_id = run.json()["error"]["planner_task_id"]
    assert f"agent logs {task_id}" in run.stderr
    record = json.loads(scripted("", "logs", task_id, "--json").stdout)
    assert (record["planner"], record["outcome"]) == ("scripted", "provider-error")
    assert record["error"] == "the file refused to answer"
    assert record["plan"] is None
    assert record["details"]["answer_chars"] == len("refuse")


@pytest.mark.parametrize(
    "answer",
    ["I'm sorry, I cannot help with that.", '{"files": "calculator.py"}', "", "[1, 2"],
    ids=["prose", "wrong-shape", "empty", "cut-short"],
)
def test_plugin_planners_answer_that_is_no_plan_is_a_provider_error_with_its_task_id(
    scripted: Callable[..., AgentRun], answer: str
) -> None:
    run = scripted(answer, "run", "--planner", "scripted", "--json")

    assert run.returncode == 3, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "provider"
    assert re.fullmatch(r"scripted-[0-9a-f]{16}", error["planner_task_id"])
    assert error["message"].startswith("the planner's answer is not a plan: ")
    assert f"(planner task {error['planner_task_id']})" in run.stderr
    assert "Traceback" not in run.stderr
    assert run.sandboxes == []
    record = json.loads(scripted("", "logs", error["planner_task_id"], "--json").stdout)
    assert record["outcome"] == "provider-error"


def test_plugin_planners_plan_that_breaks_the_contract_is_still_a_rejection(
    scripted: Callable[..., AgentRun],
) -> None:
    answer = json.dumps({"files": [{"path": "test_calculator.py", "content": ""}]})

    run = scripted(answer, "run", "--planner", "scripted", "--json")

    assert run.returncode == 4, run.stderr
    assert run.json()["error"]["kind"] == "policy"


def test_key_in_a_plugin_planners_details_is_blanked_from_its_record(
    scripted: Callable[..., AgentRun], tmp_path: Path, agent_env: dict[str, str]
) -> None:
    # The planner puts the path of its answer in its details; here that path holds the key.
    folder = tmp_path / f"answers-{API_KEY}"
    folder.mkdir()
    answer = folder / "answer.txt"
    answer.write_text("refuse")

    run = scripted("", "run", "--planner", "scripted", "--json", answer_file=answer)

    assert run.returncode == 3, run.stderr
    task_id = run.json()["error"]["planner_task_id"]
    text = (runs_dir(agent_env) / f"{task_id}.json").read_text()
    assert "answers-[redacted]" in text
    assert API_KEY not in text

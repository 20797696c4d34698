"""The exploring planner (``--planner explore``): the model runs commands in a session
through function calls, submits, and the submission is proven in a fresh sandbox."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chromium import Chromium
from conftest import (
    AGENT,
    API_KEY,
    AgentRun,
    FakeProvider,
    Reply,
    host_processes_with,
    wait_until,
)
from test_hidden_tests import MARKER
from test_hidden_tests import seed as hidden_seed  # noqa: F401 - a fixture

FIX = "sed -i 's/left - right/left + right/' calculator.py"
TEST = "python -m unittest -v check_calculator"


def _bodies(provider: FakeProvider) -> list[dict[str, Any]]:
    return [request.json() for request in provider.requests]


def _tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def _explore(run_agent: Callable[..., AgentRun], *args: str) -> AgentRun:
    return run_agent("run", "--planner", "explore", *args, timeout=300)


def test_an_exploration_fixes_the_calculator_and_the_fresh_sandbox_passes_it(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_bash("ls")
    provider.reply_bash("cat calculator.py")
    provider.reply_bash(FIX)
    provider.reply_bash(TEST)
    provider.reply_calls(("submit", {}))

    done = _explore(run_agent, "--seed", "calculator", "--json")

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert result["tests_passed"] is True
    assert result["changed_files"] == ["calculator.py"]
    assert "+    return left + right" in result["diff"]
    assert len(provider.requests) == 5
    bodies = _bodies(provider)
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["bash", "submit"]
    system = bodies[0]["messages"][0]["content"]
    assert "fresh `bash -c`" in system
    assert "no network" in system.lower()
    assert "calculator.py" in system
    assert "python -m unittest" in system


def test_each_command_s_real_output_is_the_tool_message_of_its_call(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_bash("cat calculator.py; echo made-in-the-sandbox >&2; exit 3")
    provider.reply_bash("ls; cat note.txt")
    provider.reply_bash("echo kept > note.txt")

    _explore(run_agent, "--seed", "calculator", "--max-steps", "3", "--json")

    bodies = _bodies(provider)
    first = bodies[1]["messages"]
    assert first[-1]["role"] == "tool"
    assert first[-1]["tool_call_id"] == first[-2]["tool_calls"][0]["id"]
    assert "exit code: 3" in first[-1]["content"]
    assert "return left - right" in first[-1]["content"]
    assert "made-in-the-sandbox" in first[-1]["content"]
    assert "No such file" in _tool_messages(bodies[2])[-1]


def test_a_model_that_never_submits_stops_at_max_steps_with_its_own_outcome(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    for _ in range(3):
        provider.reply_bash("true")

    done = _explore(run_agent, "--seed", "calculator", "--max-steps", "3", "--json")

    assert done.returncode == 7, done.stderr
    error = done.json()["error"]
    assert error["kind"] == "steps"
    assert "3 steps (--max-steps)" in error["message"]
    assert len(provider.requests) == 3


def test_three_format_errors_in_a_row_end_the_run(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_content("I would rather talk.")
    provider.reply_calls(("python", {"code": "1"}))
    provider.reply_calls(("bash", "{not json"))

    done = _explore(run_agent, "--seed", "calculator", "--json")

    assert done.returncode == 7, done.stderr
    assert done.json()["error"]["kind"] == "format"
    bodies = _bodies(provider)
    assert "calling a function" in bodies[1]["messages"][-1]["content"]
    assert bodies[1]["messages"][-1]["role"] == "user"
    assert "Unknown function 'python'" in bodies[2]["messages"][-1]["content"]
    assert bodies[2]["messages"][-1]["role"] == "tool"


def test_a_good_command_between_format_errors_starts_the_count_again(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_content("no call")
    provider.reply_content("no call")
    provider.reply_bash("true")
    provider.reply_content("no call")

    done = _explore(run_agent, "--seed", "calculator", "--max-steps", "4", "--json")

    assert done.json()["error"]["kind"] == "steps"


def test_a_command_printing_megabytes_reaches_the_model_bounded_and_marked(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_bash("echo HEAD-MARK; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo TAIL")

    _explore(run_agent, "--seed", "calculator", "--max-steps", "1", "--json")

    shown = _tool_messages(_bodies(provider)[-1]) if len(provider.requests) > 1 else None
    assert shown is None  # one step: the result goes back in no further request
    provider.requests.clear()
    provider.reply_bash("echo HEAD-MARK; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo TAIL")
    provider.reply_bash("true")
    _explore(run_agent, "--seed", "calculator", "--max-steps", "2", "--json")
    output = _tool_messages(_bodies(provider)[1])[-1]
    assert len(output.encode()) < 12_000
    assert "HEAD-MARK" in output
    assert "TAIL" in output
    assert "bytes of output cut from the middle" in output


def test_no_request_holds_a_hidden_test_and_the_key_is_in_no_body_nor_the_session(
    provider: FakeProvider,
    run_agent: Callable[..., AgentRun],
    hidden_seed: Path,  # noqa: F811
) -> None:
    provider.reply_bash("ls -a; cat *.py; grep -r Held . ; env")
    provider.reply_bash("true")

    _explore(run_agent, "--seed", str(hidden_seed), "--max-steps", "2", "--json")

    assert len(provider.requests) == 2
    seen = _tool_messages(_bodies(provider)[1])[-1]
    assert "test_calculator.py" in seen  # the visible files are there
    assert "PATH=" in seen  # and the environment was printed
    for request in provider.requests:
        assert MARKER.encode() not in request.body
        assert b"held_out_test" not in request.body
        assert b"HeldOut" not in request.body
        assert API_KEY.encode() not in request.body
        assert request.headers["Authorization"] == f"Bearer {API_KEY}"


def test_a_session_that_rewrites_a_test_file_cannot_pass(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_bash("printf 'import unittest\\n' > check_calculator.py; echo status=$?")
    provider.reply_calls(("submit", {}))

    done = _explore(run_agent, "--seed", "calculator", "--max-steps", "2", "--json")

    assert done.returncode != 0
    bodies = _bodies(provider)
    assert "status=1" in _tool_messages(bodies[1])[-1]  # read-only: the write failed
    assert done.json()["error"]["kind"] == "steps"  # nothing editable changed: refused


def test_a_changed_file_that_is_not_editable_is_refused_and_named(
    provider: FakeProvider,
    run_agent: Callable[..., AgentRun],
    hidden_seed: Path,  # noqa: F811
) -> None:
    (hidden_seed / "helper.py").write_text("X = 1\n")
    provider.reply_bash(f"{FIX}; echo extra >> helper.py")
    provider.reply_calls(("submit", {}))
    provider.reply_bash("true")

    done = _explore(run_agent, "--seed", str(hidden_seed), "--max-steps", "3", "--json")

    assert done.returncode == 7, done.stderr
    told = _tool_messages(_bodies(provider)[2])[-1]
    assert "Submission refused" in told
    assert "helper.py: changed, but it is not editable" in told


def test_a_repair_continues_the_conversation_with_the_verdict(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_bash("sed -i 's/left - right/left * right/' calculator.py")
    provider.reply_calls(("submit", {}))
    provider.reply_bash(FIX.replace("left - right", "left \\* right"))
    provider.reply_calls(("submit", {}))

    done = _explore(run_agent, "--seed", "calculator", "--attempts", "2", "--json")

    assert done.returncode == 0, done.stderr
    assert [a["verdict"] for a in done.json()["attempts"]] == ["failed", "passed"]
    third = _bodies(provider)[2]["messages"]
    assert third[-1]["role"] == "tool"
    assert "the test failed" in third[-1]["content"]
    assert third[-1]["tool_call_id"] == third[-2]["tool_calls"][0]["id"]
    assert "AssertionError: 6 != 5" in third[-1]["content"]


def test_agent_logs_shows_the_steps(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_bash("echo visible-in-logs")
    provider.reply_bash("true")

    done = _explore(run_agent, "--seed", "calculator", "--max-steps", "2", "--json")
    task_id = done.json()["error"]["planner_task_id"]

    shown = run_agent("logs", task_id)
    assert shown.returncode == 0, shown.stderr
    assert "steps (2):" in shown.stdout
    assert "$ echo visible-in-logs" in shown.stdout
    assert "got exit code: 0" in shown.stdout
    as_json = run_agent("logs", task_id, "--json").json()
    assert [s["command"] for s in as_json["steps"]] == ["echo visible-in-logs", "true"]
    assert as_json["steps"][0]["exit_code"] == 0
    assert as_json["steps"][0]["prompt_tokens"] == 321
    [run_id] = set(re.findall(r"agent logs (run-[0-9a-f]{16})", done.stderr))
    of_run = run_agent("logs", run_id)
    assert f"re-test: agent replay {run_id}" in of_run.stdout  # the record, then the steps
    assert f"planner task {task_id}:\nsteps (2):" in of_run.stdout
    [trail] = run_agent("logs", run_id, "--json").json()["trajectories"]
    assert trail["planner_task_id"] == task_id
    assert run_agent("runs", "list", "--json").json()["unfinished"] == []  # it has its record


def _explore_batch(
    run_agent: Callable[..., AgentRun], tmp_path: Path, *names: str
) -> tuple[AgentRun, Path]:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps({"seed": "calculator", "id": name, "planner": "explore"}) + "\n"
            for name in names
        ),
        encoding="utf-8",
    )
    out = tmp_path / "results.jsonl"
    done = run_agent("batch", str(tasks), "--out", str(out), "--jobs", "1", "--json", timeout=300)
    return done, out


def _script_the_report_s_tasks(provider: FakeProvider) -> None:
    """Two tasks: one that looks, fixes and passes; one that never calls a function."""
    provider.reply_bash("echo '<b>made-here</b>'; seq 1 10")
    provider.reply_bash(FIX)
    provider.reply_calls(("submit", {}))
    for _ in range(3):
        provider.reply_content("no call")


def test_a_batch_runs_explore_tasks_and_names_their_outcomes(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    _script_the_report_s_tasks(provider)

    done, out = _explore_batch(run_agent, tmp_path, "fixes", "talks")

    found = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert found["fixes"]["status"] == "passed", found["fixes"]
    assert found["fixes"]["planner"] == "explore"
    assert found["talks"]["status"] == "no-submission", found["talks"]
    assert found["talks"]["error"]["kind"] == "format"
    assert done.json()["counts"]["no-submission"] == 1
    again = run_agent("batch", str(tmp_path / "tasks.jsonl"), "--out", str(out), "--resume")
    assert "no submission" in again.stdout


def test_the_report_shows_each_explore_task_s_steps(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    _script_the_report_s_tasks(provider)
    _, out = _explore_batch(run_agent, tmp_path, "fixes", "talks")
    html = tmp_path / "report.html"

    made = run_agent("report", str(out), "--html", str(html))

    assert made.returncode == 0, made.stderr
    page = html.read_text()
    fixes, talks = page.split('<tbody class="task" id="talks"')
    assert "steps (3; all of them: agent logs plan-" in fixes
    assert "#1 command (exit 0): $ echo &#x27;&lt;b&gt;made-here&lt;/b&gt;&#x27;; seq 1 10" in fixes
    assert "    &lt;b&gt;made-here&lt;/b&gt;\n    1\n    2\n    [... 8 more lines]" in fixes
    assert "#2 command (exit 0): $ sed -i" in fixes
    assert "#3 submit\n    Submitted; it is being tested." in fixes
    assert "<b>made-here" not in page
    assert "steps (3; all of them: agent logs plan-" in talks  # no attempt: the error's call
    assert "#3 format-error\n    Answer by calling a function" in talks


def test_agent_logs_shows_the_steps_of_a_run_killed_half_way(
    provider: FakeProvider,
    run_agent: Callable[..., AgentRun],
    agent_env: dict[str, str],
    tmp_path: Path,
) -> None:
    provider.reply_bash("echo first-step")
    provider.reply_bash("ls")
    provider.reply_bash("echo third-step")
    provider.default = Reply(delay=120)  # the model stalls: the run is killed waiting on it
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as err:
        agent = subprocess.Popen(
            [str(AGENT), "run", "--planner", "explore", "--seed", "calculator"],
            env=agent_env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        assert wait_until(lambda: len(provider.requests) == 4, timeout=120), stderr.read_text()
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait()

    [run_id] = re.findall(r"agent logs (run-[0-9a-f]{16})", stderr.read_text())
    shown = run_agent("logs", run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"run {run_id}: no record (the run did not end)" in shown.stdout
    assert "steps (3):" in shown.stdout
    assert "$ echo first-step" in shown.stdout
    assert "got exit code: 0\n      output:\n      third-step" in shown.stdout
    as_json = run_agent("logs", run_id, "--json").json()
    [trail] = as_json["trajectories"]
    assert [s["command"] for s in trail["steps"]] == ["echo first-step", "ls", "echo third-step"]
    assert run_agent("logs", trail["planner_task_id"]).stdout.count("$ ") == 3
    listed = run_agent("runs", "list")
    assert f"{run_id}: no record (running, or killed) since " in listed.stderr
    assert [r for r, _ in run_agent("runs", "list", "--json").json()["unfinished"]] == [run_id]


def _process(pid: int) -> tuple[int, int, bytes] | None:
    """``(parent, start time, command line)`` of process ``pid``; ``None`` once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[19]), cmdline


def _sandboxes_of(environment: str) -> set[tuple[int, int]]:
    """``(PID, start time)`` of each ``bwrap`` whose parent's environment holds
    ``environment`` (``TMPDIR=...``, one test's own): the agent's sandboxes."""
    agents = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and environment.encode() in (entry / "environ").read_bytes():
                agents.add(int(entry.name))
        except OSError:
            continue
    found = set()
    for entry in Path("/proc").iterdir():
        seen = _process(int(entry.name)) if entry.name.isdigit() else None
        if seen is not None and seen[0] in agents and b"bwrap" in seen[2]:
            found.add((int(entry.name), seen[1]))
    return found


def test_no_process_of_a_session_outlives_the_exploration(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], agent_env: dict[str, str]
) -> None:
    tag = f"left-behind-{os.getpid()}-{time.monotonic_ns()}"
    sleeper = f"python3 -c 'import time; time.sleep(300)' {tag}"
    provider.reply_bash(f"setsid nohup {sleeper} >/dev/null 2>&1 & ({sleeper} &); sleep 3")
    provider.reply_bash(FIX)
    provider.reply_calls(("submit", {}))
    sandboxes: set[tuple[int, int]] = set()

    def running_both() -> bool:
        sandboxes.update(_sandboxes_of(f"TMPDIR={agent_env['TMPDIR']}\0"))
        return len(host_processes_with(tag)) == 2

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(_explore, run_agent, "--seed", "calculator", "--json")
        seen = wait_until(running_both, timeout=120)
        done = running.result()

    assert seen  # they ran
    assert sandboxes  # and the session's sandbox was seen from the host
    assert done.returncode == 0, done.stderr
    assert host_processes_with(tag) == []
    left = [pid for pid, started in sandboxes if (_process(pid) or (0, -1))[1] == started]
    assert left == []


def test_a_new_file_that_is_not_editable_is_refused_and_named_not_dropped(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_bash(f"{FIX}; echo scratch > notes.txt; mkdir many; touch many/f{{01..60}}")
    provider.reply_calls(("submit", {}))
    provider.reply_bash("rm -r notes.txt many")
    provider.reply_calls(("submit", {}))

    done = _explore(run_agent, "--seed", "calculator", "--max-steps", "4", "--json")

    told = _tool_messages(_bodies(provider)[2])[-1]
    assert "Submission refused" in told
    assert "- many/f01: a new file, and not editable; delete it" in told
    assert "- and 11 more files likewise" in told  # 61 named at most 50
    assert len(told) < 5_000
    assert done.returncode == 0, done.stderr
    assert done.json()["changed_files"] == ["calculator.py"]


def test_runs_prune_deletes_the_trajectories_of_the_runs_it_prunes(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    off = {"SANDBOXED_CODING_AGENT_KEEP_RECORDS_DAYS": "off"}
    state = tmp_path / "state" / "sandboxed-coding-agent"
    trails = state / "trajectories"
    runs: list[tuple[str, str]] = []
    for _ in range(3):
        provider.reply_bash("true")
        done = _explore(run_agent, "--seed", "calculator", "--max-steps", "1", "--json")
        [run_id] = set(re.findall(r"agent logs (run-[0-9a-f]{16})", done.stderr))
        runs.append((run_id, done.json()["error"]["planner_task_id"]))
    old = time.time() - 40 * 24 * 3600
    for run_id, _ in runs:
        os.utime(state / "run-records" / f"{run_id}.json", (old, old))
        old += 3600
    (trails / "plan-not-the-agents.jsonl").write_text("{}\n")  # named like one, but foreign
    (trails / f"{runs[2][0]}.tasks").rename(trails / "run-0000000000000000.tasks")

    kept = run_agent("runs", "prune", "--keep", "2", env=off)

    assert kept.returncode == 0, kept.stderr
    assert "2 trajectory files" in kept.stdout  # the oldest run's steps and its note
    assert not (trails / f"{runs[0][1]}.jsonl").exists()
    assert not (trails / f"{runs[0][0]}.tasks").exists()
    assert (trails / f"{runs[1][1]}.jsonl").exists()
    assert (trails / f"{runs[2][1]}.jsonl").exists()

    for trail in trails.iterdir():  # a killed run: a note and steps, no record
        os.utime(trail, (old, old))
    (state / "run-records" / f"{runs[1][0]}.json").unlink()
    by_age = run_agent("runs", "prune", "--older-than", "30", "--json", env=off).json()

    assert by_age["run_records"] == 1  # runs[2]: its note renamed, its steps no run names
    assert by_age["trajectories"] == 3  # runs[1]'s note and steps, and runs[2]'s steps
    assert sorted(p.name for p in trails.iterdir()) == [
        "plan-not-the-agents.jsonl",
        "run-0000000000000000.tasks",
    ]
    assert "plan-not-the-agents.jsonl" in str(by_age["left_alone"])


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")
def test_a_reader_sees_the_steps_when_a_task_opens_in_chromium(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    _script_the_report_s_tasks(provider)
    _, out = _explore_batch(run_agent, tmp_path, "fixes", "talks")
    html = tmp_path / "report.html"
    assert run_agent("report", str(out), "--html", str(html)).returncode == 0

    with Chromium(1280, 900) as browser:
        browser.open(html, "fixes")
        browser.settle()
        steps = browser.value(
            """(function () {
              var shown = document.querySelector('#fixes pre.steps');
              var box = shown.getBoundingClientRect();
              return {text: shown.innerText, width: box.width, height: box.height,
                      pwned: document.querySelectorAll('#fixes pre.steps b').length};
            })()"""
        )

    assert steps["text"].startswith("#1 command (exit 0): $ echo '<b>made-here</b>'; seq 1 10")
    assert "    <b>made-here</b>\n    1\n    2\n    [... 8 more lines]" in steps["text"]
    assert steps["width"] > 0  # the task opened at its address, its steps with it
    assert steps["height"] > 0
    assert steps["pwned"] == 0  # the output's markup is text


def test_an_explored_runs_change_replays_diffs_and_applies_as_any_runs(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    provider.reply_bash(FIX)
    provider.reply_calls(("submit", {}))
    done = _explore(run_agent, "--seed", "calculator", "--json")
    assert done.returncode == 0, done.stderr
    run_id = done.json()["run_id"]
    mine = tmp_path / "mine"
    shutil.copytree(Path(__file__).parents[1] / "seed_projects" / "calculator", mine)

    replayed = run_agent("replay", run_id)
    diffed = run_agent("diff", run_id)
    applied = run_agent("apply", run_id, "--to", str(mine))

    assert replayed.returncode == 0, replayed.stderr
    assert len(provider.requests) == 2  # replay asks no provider
    assert "+    return left + right" in diffed.stdout
    assert applied.returncode == 0, applied.stderr
    assert "return left + right" in (mine / "calculator.py").read_text()


def test_parallel_candidates_explore_and_a_passing_change_is_chosen(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    # Whichever candidate asks first fixes its session; any later turn submits.
    provider.reply_bash(FIX)
    provider.reply_bash(FIX)
    provider.reply_calls(("submit", {}))
    provider.default = provider.replies.pop()

    done = _explore(
        run_agent, "--seed", "calculator", "--candidates", "2", "--max-steps", "4", "--json"
    )

    assert done.returncode == 0, done.stderr
    candidates = done.json()["candidates"]
    assert len(candidates) == 2
    verdicts = [a["verdict"] for c in candidates for a in c["attempts"]]
    assert "passed" in verdicts
    # Each candidate that reached the provider started its own conversation.
    starts = [b for b in _bodies(provider) if len(b["messages"]) == 2]
    assert 1 <= len(starts) <= 2

"""Parallel candidates: K planner calls and K sandboxes at once, the passing one chosen."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from conftest import (
    AGENT,
    FIXED_CALCULATOR,
    AgentRun,
    FakeProvider,
    Reply,
    completion,
    control_groups_here,
    noting_processes,
    plan_json,
    wait_until,
)

from sandboxed_coding_agent.plugins.local_sandbox.cgroups import PREFIX, controllers

WRONG = "def add(left, right):\n    return left - right  # WRONG\n"
# Passes too, with a larger diff than FIXED_CALCULATOR.
FIXED_LONGER = FIXED_CALCULATOR + "\n\ndef twice(value):\n    return add(value, value)\n"
# Would keep its sandbox busy for a minute, unless stopped.
SLOW = "import time\n\ntime.sleep(60)\n\n\ndef add(left, right):\n    return left + right\n"


def slow_plan(content: str, delay: float = 0.0) -> Reply:
    """A plan answer that waits ``delay`` seconds first."""
    body = completion(plan_json(("calculator.py", content)))
    return Reply(200, json.dumps(body).encode(), delay=delay)


def together_plan(content: str, together: threading.Barrier, apart: list[str]) -> Reply:
    """A plan answer sent only once every request sharing ``together`` has arrived.

    A run that asked one candidate at a time would leave the barrier waiting: its
    timeout breaks it, the answer becomes a server error and ``apart`` says so.
    """
    body = json.dumps(completion(plan_json(("calculator.py", content)))).encode()

    def answer(handler: BaseHTTPRequestHandler) -> None:
        try:
            together.wait(timeout=20)
        except threading.BrokenBarrierError:
            apart.append(content)
            handler.send_response(500)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return Reply(action=answer)


def test_four_candidates_ask_the_provider_at_once_and_the_passing_one_is_chosen(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    together = threading.Barrier(4)
    apart: list[str] = []
    for content in (WRONG, WRONG, FIXED_CALCULATOR, WRONG):
        provider.replies.append(together_plan(content, together, apart))

    done = run_agent("run", "--candidates", "4", "--jobs", "4", "--json")

    assert apart == [], "the four planner calls were not all in flight at once"
    assert done.returncode == 0, done.stderr
    result = done.json()
    assert len(result["candidates"]) == 4
    assert len(done.tested_sandboxes) == 4
    passed = [c["number"] for c in result["candidates"] if c["attempts"][0]["verdict"] == "passed"]
    assert len(passed) == 1
    assert result["chosen_candidate"] == passed[0]
    assert result["tests_passed"] is True
    assert "WRONG" not in result["diff"]
    # Above 0 only because there are several candidates.
    assert {r.json()["temperature"] for r in provider.requests} == {0.7}


def test_of_two_passing_candidates_the_smaller_diff_is_chosen(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("calculator.py", FIXED_LONGER))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    provider.reply_plan(("calculator.py", WRONG))

    done = run_agent("run", "--candidates", "3", "--temperature", "0.2", "--json")

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert sum(c["attempts"][0]["verdict"] == "passed" for c in result["candidates"]) == 2
    assert "twice" not in result["diff"]
    assert {r.json()["temperature"] for r in provider.requests} == {0.2}


def test_first_pass_stops_the_other_sandboxes(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.replies.append(slow_plan(SLOW))
    # Answers once the slow plan's sandbox is surely running.
    provider.replies.append(slow_plan(FIXED_CALCULATOR, delay=1.0))

    started = time.monotonic()
    done = run_agent("run", "--candidates", "2", "--jobs", "2", "--first-pass", "--json")
    took = time.monotonic() - started

    assert done.returncode == 0, done.stderr
    assert took < 20, f"the sleeping candidate's sandbox was waited for ({took:.1f} s)"
    result = done.json()
    verdicts = sorted(c["attempts"][0]["verdict"] for c in result["candidates"])
    assert verdicts == ["passed", "stopped"]
    stopped = next(c for c in result["candidates"] if c["attempts"][0]["verdict"] != "passed")
    assert stopped["stopped"] is True
    assert stopped["attempts"][0]["sandbox_id"]
    assert "stopping the others" in done.stderr


def test_candidates_repair_on_their_own(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    provider.reply_plan(("calculator.py", WRONG))
    provider.reply_plan(("calculator.py", WRONG))
    provider.default = slow_plan(FIXED_CALCULATOR)

    done = run_agent("run", "--candidates", "2", "--attempts", "2")

    assert done.returncode == 0, done.stderr
    assert "candidates:      #1 passed after 2 attempts" in done.stdout
    assert "#2 passed after 2 attempts" in done.stdout
    repairs = [r for r in provider.requests if "previous answer" in r.body.decode().lower()]
    assert len(repairs) == 2
    assert all(b"WRONG" in r.body for r in repairs)


def test_ctrl_c_terminates_every_running_candidate_sandbox(
    provider: FakeProvider, agent_env: dict[str, str], tmp_path: Path
) -> None:
    provider.default = slow_plan(SLOW)
    log = tmp_path / "started.jsonl"
    process = subprocess.Popen(
        [str(AGENT), "run", "--candidates", "2", "--jobs", "2", "--json"],
        env=noting_processes(agent_env, log),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Both sandboxes run the minute-long sleep.
        assert wait_until(lambda: sum("bwrap" in line for line in _lines(log)) >= 2, timeout=30)
        time.sleep(0.5)
        family = _descendants(process.pid)
        groups = [
            entry
            for controller in controllers().values()
            for entry in controller.parent.glob(f"{PREFIX}{process.pid}-*")
        ]
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
        took = time.monotonic() - started
        # Checked at once: a later agent run on this machine removes a dead agent's groups.
        groups_left = [group for group in groups if group.exists()]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert process.returncode == 130, stderr
    assert json.loads(stdout)["error"]["kind"] == "interrupted"
    assert took < 10, f"the sandboxes were waited for ({took:.1f} s)"
    assert "Traceback" not in stderr
    # Every process of both sandboxes (bwrap, the sleeping test) is gone, not orphaned.
    assert len(family) >= 4
    assert wait_until(lambda: not [pid for pid in family if _alive(pid)], timeout=5)
    # And the agent removed their control groups before it exited.
    made, _ = control_groups_here()
    assert len(groups) == 2 * len(made)
    assert groups_left == []


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit():
            parents[int(entry.name)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    family = {root}
    while more := {pid for pid, parent in parents.items() if parent in family} - family:
        family |= more
    return family - {root}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return not stat[stat.rfind(b")") + 2 :].startswith((b"Z", b"X"))


def _lines(log: Path) -> list[str]:
    try:
        return log.read_text().splitlines()
    except FileNotFoundError:
        return []

"""An interrupted batch stops its work: no further planner call, attempt or sandbox, its
running sandboxes stopped, every finished result kept, and a second signal ends it at once.

The batches are real `agent batch` processes against a real loopback provider, signalled
by the test; the pool's own behaviour is checked in-process with real signals too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import AGENT, FIXED_CALCULATOR, FakeProvider, Reply, noting_processes, wait_until
from test_candidates import SLOW, slow_plan

from sandboxed_coding_agent.core.runs.task_pool import StopRequest, run_tasks


def write_tasks(path: Path, count: int, **fields: object) -> Path:
    lines = [{"seed": "calculator", "id": f"t{n}", **fields} for n in range(1, count + 1)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def sandboxes_started(log: Path) -> int:
    try:
        return sum("bwrap" in line for line in log.read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        return 0


def results_in(out: Path) -> list[dict[str, object]]:
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_batch_starts_nothing_more_and_stops_its_sandboxes(
    provider: FakeProvider, agent_env: dict[str, str], tmp_path: Path, sig: signal.Signals
) -> None:
    # The first task's plan passes at once; the others' sleep a minute in their sandboxes
    # and would then be repaired twice more, each with a new planner call and sandbox.
    provider.reply(200, json.dumps(_completion(FIXED_CALCULATOR)).encode())
    provider.default = slow_plan(SLOW)
    tasks = write_tasks(tmp_path / "tasks.jsonl", 4, attempts=3)
    out = tmp_path / "results.jsonl"
    log = tmp_path / "started.jsonl"
    batch = subprocess.Popen(
        [str(AGENT), "batch", str(tasks), "--out", str(out), "--jobs", "3"],
        env=noting_processes(agent_env, log),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # One task passed and was written; the three others sleep in their sandboxes.
        assert wait_until(lambda: len(results_in(out)) == 1, timeout=60)
        assert wait_until(lambda: sandboxes_started(log) >= 4 and len(provider.requests) >= 4)
        time.sleep(0.5)
        calls, sandboxes = len(provider.requests), sandboxes_started(log)
        batch.send_signal(sig)
        # Far less than the minute the sleeping tests would take, let alone their repairs.
        _, stderr = batch.communicate(timeout=45)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()

    assert batch.returncode == 130, stderr
    assert len(provider.requests) == calls, "a planner call started after the signal"
    assert sandboxes_started(log) == sandboxes, "a sandbox started after the signal"
    assert [r["status"] for r in results_in(out)] == ["passed"]  # whichever task got the fix
    assert "Traceback" not in stderr
    assert "no further task, planner call or sandbox starts" in stderr
    assert "the sandboxes of 3 running task(s) were stopped" in stderr
    assert "abandoned" not in stderr  # each ended when told, none was left behind
    assert "1 of 4 tasks have a result" in stderr
    assert f"--out {out} --resume" in stderr
    assert "the sandbox (if any) was terminated" not in stderr  # a run's words, not a batch's

    # The stopped tasks have no result: a resume runs them, and the one never started.
    provider.default = Reply(200, json.dumps(_completion(FIXED_CALCULATOR)).encode())
    resumed = subprocess.run(
        [str(AGENT), "batch", str(tasks), "--out", str(out), "--resume"],
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(r["id"] for r in results_in(out)) == ["t1", "t2", "t3", "t4"]


def test_a_task_waiting_on_the_planner_is_given_up_after_the_grace(
    provider: FakeProvider, agent_env: dict[str, str], tmp_path: Path
) -> None:
    provider.default = slow_plan(FIXED_CALCULATOR, delay=120)  # a provider that hangs
    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    out = tmp_path / "results.jsonl"
    batch = subprocess.Popen(
        [str(AGENT), "batch", str(tasks), "--out", str(out), "--jobs", "2"],
        env=agent_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: len(provider.requests) == 2, timeout=60)
        batch.send_signal(signal.SIGINT)
        _, stderr = batch.communicate(timeout=60)  # the provider would answer in 120 s
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()

    assert batch.returncode == 130, stderr
    assert "2 of them had not ended after 5 s (waiting on the planner" in stderr
    assert "abandoned" in stderr
    assert results_in(out) == []


# --- the pool itself, in this process, with real signals ---------------------------------------


def _signal_me(times: int, gap: float) -> None:
    def send() -> None:
        for _ in range(times):
            time.sleep(gap)
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=send, daemon=True).start()


def test_the_second_signal_ends_the_wait_at_once() -> None:
    release = threading.Event()
    told: list[tuple[str, int]] = []
    started = time.monotonic()

    _signal_me(times=2, gap=0.5)
    with pytest.raises(KeyboardInterrupt):
        run_tasks(
            [1, 2],
            lambda _: release.wait(60),
            jobs=2,
            started=lambda _: None,
            finished=lambda _: None,
            interrupted=lambda n: told.append(("interrupted", n)),
            gave_up=lambda n: told.append(("gave up", n)),
            grace_seconds=60,
        )
    took = time.monotonic() - started
    release.set()

    assert told == [("interrupted", 2), ("gave up", 2)]
    assert took < 30, "the second signal did not end the 60 s wait"


def test_the_stop_request_reaches_the_runs_and_no_task_starts_after_it() -> None:
    stop = StopRequest()
    seen: list[int] = []
    stopped = threading.Event()

    def one(task: int) -> int:
        seen.append(task)
        with stop.listen(stopped):  # as a run listens
            stopped.wait(60)
        return task

    _signal_me(times=1, gap=0.5)
    with pytest.raises(KeyboardInterrupt):
        run_tasks(
            list(range(10)),
            one,
            jobs=2,
            started=lambda _: None,
            finished=lambda _: None,
            interrupted=lambda _: None,
            stop=stop,
            grace_seconds=30,
        )

    assert stop.is_set()
    assert stopped.is_set()
    assert len(seen) == 2  # the two running when the signal came; no other started


def _completion(content: str) -> dict[str, object]:
    from conftest import completion, plan_json

    return completion(plan_json(("calculator.py", content)))

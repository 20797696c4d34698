"""Remote sandboxes never leak, transient failures are retried, one release per definition.

No real LazyCloud control plane can run here: these tests point the real SDK at the
in-memory stand-in (``lazycloud_standin``), a real HTTP server on 127.0.0.1 that the
``agent`` subprocesses reach too. What the stand-in cannot show: the real service's
idle stop (``keep_warm``), its clocks, and what its load balancer does to a request
whose connection resets (here, a reset comes before or after the request's work).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import AGENT, FIXED_CALCULATOR, AgentRun, FakeProvider, Reply, completion, plan_json
from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
    ControlPlane,
    control_plane_fixture,
    lazycloud_env_fixture,
    lazycloud_sdk_fixture,
    subprocess_environment,
)

from sandboxed_coding_agent.core.model import SandboxJob, SeedRuntime
from sandboxed_coding_agent.plugins.lazycloud import releases
from sandboxed_coding_agent.plugins.lazycloud.ledger import (
    Entry,
    Ledger,
    ledger_directory,
    this_process,
)
from sandboxed_coding_agent.plugins.lazycloud.runner import LazyCloudRunner

SLOW_CALCULATOR = "import time\ntime.sleep(60)\n\ndef add(left, right):\n    return left + right\n"
STOP_PATH = r"/containers/[^/]+/stop$"

RunAgent = Callable[..., AgentRun]


@pytest.fixture
def environment(agent_env: dict[str, str], lazycloud_env: dict[str, str]) -> dict[str, str]:
    return subprocess_environment(lazycloud_env, base=agent_env)


@pytest.fixture
def agent(environment: dict[str, str], tmp_path: Path) -> RunAgent:
    def run(*args: str, timeout: float = 120) -> AgentRun:
        done = subprocess.run(
            [str(AGENT), *args],
            env=environment,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return AgentRun(done.returncode, done.stdout, done.stderr, tmp_path)

    return run


@pytest.fixture
def state(tmp_path: Path, lazycloud_sdk: ControlPlane) -> dict[str, str]:
    """This process's environment with a private state directory (the ledger's home)."""
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def ledger_of(environ: dict[str, str]) -> Ledger:
    return Ledger(ledger_directory(environ))


def killed_while_testing(
    argv: list[str], environment: dict[str, str], plane: ControlPlane, cwd: Path, running: int
) -> None:
    """Start ``agent ARGV``, SIGKILL it once ``running`` sandboxes run a test."""
    agent = subprocess.Popen(
        [str(AGENT), *argv],
        env=environment,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while sum(bool(s.processes) for s in plane.live_sandboxes()) < running:
            assert agent.poll() is None, agent.communicate()
            assert time.monotonic() < deadline, "the tests never started"
            time.sleep(0.05)
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait()


def only_stale_rows(listed: AgentRun) -> list[dict[str, Any]]:
    assert listed.returncode == 0, listed.stderr
    return [row for row in json.loads(listed.stdout) if row["stale"]]


# --------------------------------------------------------------------------- SIGKILL


def test_a_sigkilled_run_leaves_a_sandbox_the_next_run_stops(
    agent: RunAgent,
    environment: dict[str, str],
    control_plane: ControlPlane,
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    slow = write_plan({"files": [{"path": "calculator.py", "content": SLOW_CALCULATOR}]})
    argv = ["run", "--plan", str(slow), "--runner", "lazycloud", "--json"]

    killed_while_testing(argv, environment, control_plane, tmp_path, running=1)

    (left,) = control_plane.live_sandboxes()  # SIGKILL stops nothing: it is still running
    (entry,) = ledger_of(environment).entries()
    assert entry.sandbox_id == left.id
    assert not entry.agent_alive()
    stale = only_stale_rows(agent("lazycloud", "sandboxes", "--json"))
    assert [row["sandbox_id"] for row in stale] == [left.id]

    fixed = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    run = agent("run", "--plan", str(fixed), "--runner", "lazycloud", "--json")

    assert run.returncode == 0, run.stderr
    assert left.stopped
    assert f"left running by an agent that is gone: {left.id}" in run.stderr
    assert control_plane.live_sandboxes() == []
    assert ledger_of(environment).entries() == []


def test_a_sigkilled_batch_leaves_sandboxes_that_batch_resume_stops(
    agent: RunAgent,
    environment: dict[str, str],
    control_plane: ControlPlane,
    provider: FakeProvider,
    tmp_path: Path,
) -> None:
    def answer(content: str) -> None:
        body = json.dumps(completion(plan_json(("calculator.py", content)))).encode()
        provider.default = Reply(200, body)

    answer(SLOW_CALCULATOR)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"seed": "calculator", "runner": "lazycloud"}) + "\n" for _ in range(4))
    )
    out = tmp_path / "results.jsonl"
    argv = ["batch", str(tasks), "--out", str(out), "--jobs", "2"]

    killed_while_testing(argv, environment, control_plane, tmp_path, running=2)

    left = control_plane.live_sandboxes()
    assert len(left) == 2
    answer(FIXED_CALCULATOR)
    resumed = agent(*argv, "--resume", timeout=240)

    assert resumed.returncode == 0, resumed.stderr
    assert all(sandbox.stopped for sandbox in left)
    assert control_plane.live_sandboxes() == []
    assert ledger_of(environment).entries() == []


def test_the_stop_command_stops_what_a_sigkilled_run_left(
    agent: RunAgent,
    environment: dict[str, str],
    control_plane: ControlPlane,
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    slow = write_plan({"files": [{"path": "calculator.py", "content": SLOW_CALCULATOR}]})
    argv = ["run", "--plan", str(slow), "--runner", "lazycloud", "--json"]
    killed_while_testing(argv, environment, control_plane, tmp_path, running=1)
    (left,) = control_plane.live_sandboxes()

    listed = agent("lazycloud", "sandboxes")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[:2]
    assert header.split() == ["SANDBOX", "STATUS", "CREATED", "AGENT", "STALE"]
    assert row.startswith(left.id)
    assert " gone " in row
    assert row.endswith("stale")

    stopped = agent("lazycloud", "sandboxes", "stop", "--stale", "--json")

    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout) == {"stopped": [{"sandbox_id": left.id, "stopped": True}]}
    assert left.stopped
    assert ledger_of(environment).entries() == []
    assert only_stale_rows(agent("lazycloud", "sandboxes", "--json")) == []


def test_the_stop_command_stops_one_by_id_and_refuses_what_is_not_an_id(
    agent: RunAgent, control_plane: ControlPlane, lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud import App

    sandbox = App("sandboxed_coding_agent").sandbox(name="test-patch").create()

    for hostile in ("../../etc/passwd", "*", f"{sandbox.container_id}/../x", "-1", " "):
        refused = agent("lazycloud", "sandboxes", "stop", "--", hostile)
        assert refused.returncode == 2, (hostile, refused.stderr)
    assert control_plane.requests_to("POST", STOP_PATH) == []
    assert agent("lazycloud", "sandboxes", "stop").returncode == 2  # nothing named

    stopped = agent("lazycloud", "sandboxes", "stop", sandbox.container_id.upper())

    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.split() == [sandbox.container_id, "stopped"]
    assert control_plane.live_sandboxes() == []


@pytest.mark.parametrize(("made", "rival"), [(1, False), (2, False), (1, True)])
def test_a_create_in_flight_when_the_agent_was_killed_is_found_by_its_release_and_window(
    agent: RunAgent,
    environment: dict[str, str],
    control_plane: ControlPlane,
    lazycloud_sdk: ControlPlane,
    made: int,
    rival: bool,
) -> None:
    from lazycloud import App

    definition = App("sandboxed_coding_agent").sandbox(name="test-patch")
    release = definition.prepare()
    earlier = definition.create(stub_id=release).container_id  # before the create was sent
    time.sleep(6)  # beyond the clock slack
    sent = time.time()
    created = [definition.create(stub_id=release).container_id for _ in range(made)]
    folder = ledger_directory(environment)
    folder.mkdir(mode=0o700, parents=True)
    pending = {
        "format": 1,
        "run_id": "lazycloud-00000000000a",
        "pid": 2**22 + 12345,  # gone
        "pid_start": "1",
        "created_at": sent,
        "stale_after": sent + 600,
        "endpoint": control_plane.endpoint,
        "workspace": control_plane.workspace,
        "release_id": release,
        "sandbox_id": None,
    }
    (folder / "lazycloud-00000000000a.json").write_text(json.dumps(pending))
    if rival:  # a live agent (this test) was creating one of the same release then
        rival_entry = {**pending, "run_id": "lazycloud-00000000000b", "pid": os.getpid()}
        rival_entry["pid_start"] = this_process()["pid_start"]
        (folder / "lazycloud-00000000000b.json").write_text(json.dumps(rival_entry))

    stopped = agent("lazycloud", "sandboxes", "stop", "--stale", "--json")

    assert stopped.returncode == 0, stopped.stderr
    live = {sandbox.id for sandbox in control_plane.live_sandboxes()}
    if made == 1 and not rival:  # the one its create made
        assert live == {earlier}
    else:  # maybe another agent's: none is stopped
        assert live == {earlier, *created}
    assert [entry.run_id for entry in ledger_of(environment).entries()] == (
        ["lazycloud-00000000000b"] if rival else []
    )


# --------------------------------------------------------------------------- a hostile ledger


def plain_job(**overrides: Any) -> SandboxJob:
    fields: dict[str, Any] = {
        "seed": "plain",
        "files": {"check.py": b"print('ok')\n"},
        "test_command": ("python", "check.py"),
    }
    return SandboxJob(**{**fields, **overrides})


def test_a_hostile_ledger_is_never_trusted_and_its_ids_reach_no_stop(
    state: dict[str, str], lazycloud_sdk: ControlPlane, tmp_path: Path
) -> None:
    from lazycloud import App

    # Someone else's sandbox, which every hostile entry names: it must keep running.
    victim = App("sandboxed_coding_agent").sandbox(name="test-patch").create().container_id
    folder = ledger_directory(state)
    folder.mkdir(mode=0o700, parents=True)

    def entry(number: int, **overrides: Any) -> tuple[Path, str]:
        run_id = f"lazycloud-{number:012d}"
        dead = {  # a valid entry of an agent that is gone
            "format": 1,
            "run_id": run_id,
            "pid": 2**22 + 12345,  # above pid_max: no such process
            "pid_start": "1",
            "created_at": time.time(),
            "stale_after": time.time() + 60,
            "endpoint": lazycloud_sdk.endpoint,
            "workspace": lazycloud_sdk.workspace,
            "release_id": None,
            "sandbox_id": victim,
        }
        return folder / f"{run_id}.json", json.dumps({**dead, **overrides})

    path, text = entry(1)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(text)
    path.symlink_to(elsewhere)  # a symlink to a valid entry
    path, text = entry(2)
    path.write_text(text + " " * 100_000)  # a valid entry, but huge
    path, text = entry(3)
    path.write_text(text[:-1])  # garbage
    for number, hostile in enumerate(
        ("../../../containers", victim.replace("-", "/"), victim + "/../x", "x" * 36), start=4
    ):
        path, text = entry(number, sandbox_id=hostile)
        path.write_text(text)
    if os.geteuid() == 0:
        path, text = entry(9)
        path.write_text(text)
        os.chown(path, 54321, 54321)  # another user's

    assert ledger_of(state).entries() == []
    outcome = LazyCloudRunner(environ=state).run_test(plain_job())

    assert outcome.exit_code == 0, outcome.output
    (stop,) = lazycloud_sdk.requests_to("POST", STOP_PATH)  # the run's own sandbox only
    assert outcome.sandbox_id in stop.path
    assert [sandbox.id for sandbox in lazycloud_sdk.live_sandboxes()] == [victim]
    assert len(list(folder.iterdir())) == 8 if os.geteuid() == 0 else 7  # all left alone


def test_a_ledger_folder_that_is_a_symlink_starts_no_sandbox(
    state: dict[str, str], lazycloud_sdk: ControlPlane, tmp_path: Path
) -> None:
    from sandboxed_coding_agent.core.errors import SandboxError

    folder = ledger_directory(state)
    folder.parent.mkdir(parents=True)
    target = tmp_path / "someone-elses"
    target.mkdir(mode=0o700)
    folder.symlink_to(target)

    with pytest.raises(SandboxError, match="not a private folder of yours"):
        LazyCloudRunner(environ=state).run_test(plain_job())

    assert lazycloud_sdk.sandboxes == {}
    assert list(target.iterdir()) == []


def test_an_entry_of_a_live_agent_is_not_stale_and_a_dead_ones_is(state: dict[str, str]) -> None:
    now = time.time()
    mine = Entry(
        run_id="lazycloud-0123456789ab",
        created_at=now,
        stale_after=now + 60,
        endpoint="http://x",
        workspace="w",
        **this_process(),
    )
    assert mine.agent_alive()
    assert not mine.stale(now)
    assert mine.stale(now + 61)
    reused = attrs.evolve(mine, pid_start="1")  # the PID, but another process
    assert not reused.agent_alive()
    assert reused.stale(now)


# --------------------------------------------------------------------------- transient errors


def test_connection_resets_and_503s_are_retried_and_the_task_passes(
    state: dict[str, str], lazycloud_sdk: ControlPlane
) -> None:
    plane = lazycloud_sdk
    plane.reset("POST", r"/images/resolve$", times=2)
    plane.reset("POST", r"/releases$", times=1)
    plane.fail("POST", r"/releases$", status=503, times=1)
    plane.reset("POST", r"/instances$", times=1)  # before the create: nothing made
    plane.reset("POST", r"/connect$", times=1)
    plane.fail("PUT", r"/files/content$", status=502, times=2)
    plane.reset("POST", STOP_PATH, times=1)

    outcome = LazyCloudRunner(environ=state).run_test(plain_job())

    assert outcome.exit_code == 0, outcome.output
    assert all(fault.hits == fault.times for fault in plane.faults)
    assert len(plane.sandboxes) == 1
    assert plane.live_sandboxes() == []
    assert ledger_of(state).entries() == []


def test_eight_tests_at_once_pass_through_resets_and_unavailable_answers(
    state: dict[str, str], lazycloud_sdk: ControlPlane
) -> None:
    plane = lazycloud_sdk
    plane.reset("POST", r"/images/resolve$", times=3)
    plane.fail("POST", r"/releases$", status=503, times=2)
    plane.reset("POST", r"/instances$", times=3)
    plane.fail("POST", r"/instances$", status=502, times=2, after=True)
    plane.reset("POST", r"/connect$", times=3)
    plane.fail("POST", r"/connect$", status=429, times=2)
    plane.reset("PUT", r"/files/content$", times=4)
    plane.reset("POST", STOP_PATH, times=3, after=True)
    runner = LazyCloudRunner(environ=state)
    outcomes: list[Any] = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(runner.run_test(plain_job())))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert [outcome.exit_code for outcome in outcomes] == [0] * 8
    assert len(plane.sandboxes) == 8
    assert plane.live_sandboxes() == []
    assert len(plane.releases) == 1
    assert ledger_of(state).entries() == []


@pytest.mark.parametrize("lost", ["reset", "504"])
def test_a_create_whose_answer_is_lost_is_found_again_not_made_twice(
    state: dict[str, str], lazycloud_sdk: ControlPlane, lost: str
) -> None:
    if lost == "reset":
        lazycloud_sdk.reset("POST", r"/instances$", times=1, after=True)  # made, answer lost
    else:
        lazycloud_sdk.fail("POST", r"/instances$", status=504, times=1, after=True)

    outcome = LazyCloudRunner(environ=state).run_test(plain_job())

    assert outcome.exit_code == 0, outcome.output
    (sandbox,) = lazycloud_sdk.sandboxes.values()
    assert outcome.sandbox_id == sandbox.id
    assert len(lazycloud_sdk.requests_to("POST", r"/instances$")) == 1
    assert sandbox.stopped
    assert ledger_of(state).entries() == []


def test_a_refusal_is_not_retried(state: dict[str, str], lazycloud_sdk: ControlPlane) -> None:
    from sandboxed_coding_agent.core.errors import SandboxError

    lazycloud_sdk.fail("POST", r"/instances$", status=400, times=1)

    with pytest.raises(SandboxError, match=r"HTTP 400|invalid_request|internal"):
        LazyCloudRunner(environ=state).run_test(plain_job())

    assert len(lazycloud_sdk.requests_to("POST", r"/instances$")) == 1
    assert lazycloud_sdk.sandboxes == {}
    assert ledger_of(state).entries() == []


# --------------------------------------------------------------------------- releases


def test_one_release_serves_every_test_of_a_definition_across_processes(
    state: dict[str, str], lazycloud_sdk: ControlPlane
) -> None:
    runner = LazyCloudRunner(environ=state)
    jobs = [plain_job() for _ in range(3)]
    threads = [threading.Thread(target=runner.run_test, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    runner.run_test(plain_job())
    releases._known.clear()  # as a new agent process: the file remembers it
    runner.run_test(plain_job())

    assert len(lazycloud_sdk.releases) == 1
    assert len(lazycloud_sdk.requests_to("POST", r"/releases$")) == 1
    assert {s.release.id for s in lazycloud_sdk.sandboxes.values()} == set(lazycloud_sdk.releases)
    assert len(lazycloud_sdk.sandboxes) == 5

    runner.run_test(plain_job(runtime=SeedRuntime(requirements=("attrs",))))  # another image
    assert len(lazycloud_sdk.releases) == 2


def test_a_release_the_control_plane_forgot_is_made_again(
    state: dict[str, str], lazycloud_sdk: ControlPlane
) -> None:
    runner = LazyCloudRunner(environ=state)
    runner.run_test(plain_job())
    lazycloud_sdk.releases.clear()

    outcome = runner.run_test(plain_job())

    assert outcome.exit_code == 0, outcome.output
    assert len(lazycloud_sdk.releases) == 1
    assert len(lazycloud_sdk.requests_to("POST", r"/releases$")) == 2


# --------------------------------------------------------------------------- run_test_until


SLOW_CHECK = b"import time\nprint('started', flush=True)\ntime.sleep(60)\n"


@pytest.fixture
def slow_job() -> SandboxJob:
    return plain_job(files={"check.py": SLOW_CHECK})


def test_run_test_until_stops_the_remote_sandbox_within_a_second(
    state: dict[str, str], lazycloud_sdk: ControlPlane, slow_job: SandboxJob
) -> None:
    stop = threading.Event()
    outcomes: list[Any] = []
    worker = threading.Thread(
        target=lambda: outcomes.append(
            LazyCloudRunner(environ=state).run_test_until(slow_job, stop)
        )
    )
    worker.start()
    deadline = time.monotonic() + 60
    # The agent waits for the test's end (it asked for its result).
    while not lazycloud_sdk.requests_to("GET", r"/processes/[^/]+$"):
        assert time.monotonic() < deadline, "the test never started"
        time.sleep(0.02)
    time.sleep(0.3)

    stop.set()
    stopped_at = time.monotonic()
    worker.join(30)

    assert time.monotonic() - stopped_at < 1.0 + 2.0  # noticed at once; output read at most 2 s
    (outcome,) = outcomes
    (sandbox,) = lazycloud_sdk.sandboxes.values()
    assert outcome.sandbox_id == sandbox.id
    assert outcome.exit_code is None
    assert not outcome.timed_out
    assert sandbox.stopped
    assert ledger_of(state).entries() == []


def test_run_test_until_with_stop_already_set_creates_nothing(
    state: dict[str, str], lazycloud_sdk: ControlPlane
) -> None:
    stop = threading.Event()
    stop.set()

    outcome = LazyCloudRunner(environ=state).run_test_until(plain_job(), stop)

    assert outcome.exit_code is None
    assert lazycloud_sdk.requests == []


def test_first_pass_stops_the_other_candidates_remote_sandbox(
    agent: RunAgent, control_plane: ControlPlane, provider: FakeProvider
) -> None:
    def plan(content: str, delay: float = 0.0) -> Reply:
        body = completion(plan_json(("calculator.py", content)))
        return Reply(200, json.dumps(body).encode(), delay=delay)

    provider.replies.append(plan(SLOW_CALCULATOR))
    provider.replies.append(plan(FIXED_CALCULATOR, delay=3.0))  # once the slow one runs

    started = time.monotonic()
    done = agent(
        "run", "--runner", "lazycloud", "--candidates", "2", "--jobs", "2", "--first-pass", "--json"
    )
    took = time.monotonic() - started

    assert done.returncode == 0, done.stderr
    assert took < 30, f"the sleeping candidate's sandbox was waited for ({took:.1f} s)"
    verdicts = sorted(c["attempts"][0]["verdict"] for c in done.json()["candidates"])
    assert verdicts == ["passed", "stopped"]
    # The candidates' two, and the one that listed the unpatched seed's tests first.
    assert len(control_plane.sandboxes) == 3
    slow = next(
        s for s in control_plane.sandboxes.values() if b"sleep" in b"".join(s.files.values())
    )
    assert slow.processes  # its test was running when it was stopped
    assert control_plane.live_sandboxes() == []

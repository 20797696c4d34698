"""`agent batch --executor ray`: tasks run on the nodes of a real Ray cluster, each with the
local sandbox there; the results come back to the driver, which alone writes them.

The cluster (a head and a second node with its own temporary folder, one CPU each: Ray
2.60 takes ``--temp-dir`` on a node that is not the head), the loopback provider and the
driver all run in a network namespace of their own, holding only loopback: Ray's servers
bind every interface of the namespace they are in, and there it is 127.0.0.1 alone.
Making the namespace needs root; the module skips without it. One cluster serves every
test of the module; it is ended by killing every process of the namespace (each one this
module started), never by name (``ray stop`` would end every Ray process of the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import attrs
import pytest
from conftest import AGENT, API_KEY, FIXED_CALCULATOR, MODEL, AgentRun, plan_json, wait_until

TESTS = Path(__file__).resolve().parent
CALCULATOR = TESTS.parent / "seed_projects" / "calculator"
BIN = Path(sys.executable).parent
HEAD_PORT = 6380

#: A provider for the namespace: the fix, unless the task's prompt says otherwise. BREAK:
#: a plan that breaks the calculator; SLOW-ONCE: the fix, after 30 s the first time it is
#: asked (a worker is killed meanwhile), at once after; SLOW-TWICE: the same, the first
#: two times; NODE-A, NODE-B: the fix, after 8 s the first time; HANG: the fix after five
#: minutes.
PROVIDER = """
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
sys.path.insert(0, {tests!r})
from conftest import FIXED_CALCULATOR, completion, plan_json

BROKEN = FIXED_CALCULATOR.replace("left + right", "left - right")
seen = {{}}
lock = threading.Lock()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        with open({log!r}, "a") as log:
            markers = ("BREAK", "HANG", "SLOW-ONCE", "SLOW-TWICE", "NODE-A", "NODE-B")
            log.write(" ".join(m for m in markers if m in body) + "\\n")
        source = FIXED_CALCULATOR
        if "BREAK" in body:
            source = BROKEN
        if "HANG" in body:
            time.sleep(300)
        for marker, slow_times, seconds in (
            ("SLOW-ONCE", 1, 30), ("SLOW-TWICE", 2, 30), ("NODE-A", 1, 8), ("NODE-B", 1, 8)
        ):
            if marker in body:
                with lock:
                    seen[marker] = seen.get(marker, 0) + 1
                    slow = seen[marker] <= slow_times
                if slow:
                    time.sleep(seconds)
        reply = json.dumps(completion(plan_json(("calculator.py", source)))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open({port_file!r} + ".part", "w") as out:
    out.write(str(server.server_address[1]))
import os
os.rename({port_file!r} + ".part", {port_file!r})
server.serve_forever(poll_interval=0.05)
"""


@attrs.frozen
class Cluster:
    holder: subprocess.Popen[str]
    namespace: str
    address: str
    env: dict[str, str]
    folder: Path
    requests: Path

    def command(self, *args: str) -> list[str]:
        """``args`` run in the cluster's network namespace."""
        return ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", *args]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def batch(self, tasks: Path, out: Path, *more: str) -> list[str]:
        """``agent batch`` on the cluster, as its words."""
        return [
            str(AGENT), "batch", str(tasks), "--out", str(out),
            "--executor", "ray", "--ray-address", self.address, *more,
        ]  # fmt: skip

    def pids(self) -> list[int]:
        """Every process in the namespace but its holder."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.holder.pid:
                continue
            with contextlib.suppress(OSError):
                if os.readlink(entry / "ns" / "net") == self.namespace:
                    found.append(int(entry.name))
        return found

    def raylets_of(self, temp_dir: Path) -> list[int]:
        """The raylet of the node whose temporary folder is ``temp_dir``."""
        found = []
        for pid in self.pids():
            with contextlib.suppress(OSError):
                words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if words[0].endswith(b"/raylet") and f"--temp_dir={temp_dir}".encode() in words:
                    found.append(pid)
        return found

    def start_second_node(self) -> None:
        """Start the second node, unless it runs: a new one, with a temporary folder of its
        own."""
        if self.raylets_of(self.folder / "node"):
            return
        for leftover in self.pids_under(self.folder / "node"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)
        shutil.rmtree(self.folder / "node", ignore_errors=True)
        node = self.run(
            "ray", "start", f"--address={self.address}", f"--temp-dir={self.folder / 'node'}",
            "--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats",
        )  # fmt: skip
        assert node.returncode == 0, node.stderr[-2000:]

    def pids_under(self, temp_dir: Path) -> list[int]:
        """The processes of the namespace whose command line names ``temp_dir``."""
        found = []
        for pid in self.pids():
            with contextlib.suppress(OSError):
                if str(temp_dir).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
        return found

    def workers_running_a_task(self) -> list[int]:
        """The Ray worker processes running a task of the batch (by their title)."""
        found = []
        for pid in self.pids():
            with contextlib.suppress(OSError):
                title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if title.startswith(b"ray::run_ray_job"):
                    found.append(pid)
        return found


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "a network namespace of loopback only needs root (unshare --net)"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not (BIN / "ray").is_file():
        return "Ray is not installed (the extra sandboxed-coding-agent[ray])"
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("ray")
    holder = subprocess.Popen(
        ["unshare", "--net", "sh", "-c", "ip link set lo up && echo up && exec sleep 900"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CODING_AGENT_", "SANDBOXED_CODING_AGENT_", "RAY_"))
    }
    (folder / "tmp").mkdir()
    env.update(
        CODING_AGENT_MODEL=MODEL,
        CODING_AGENT_API_KEY=API_KEY,
        TMPDIR=str(folder / "tmp"),
        XDG_STATE_HOME=str(folder / "state"),
        RAY_USAGE_STATS_ENABLED="0",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    assert holder.stdout.readline().strip() == "up"
    namespace = os.readlink(f"/proc/{holder.pid}/ns/net")
    made = Cluster(
        holder, namespace, f"127.0.0.1:{HEAD_PORT}", env, folder, folder / "requests.jsonl"
    )
    try:
        port_file = folder / "provider-port"
        script = PROVIDER.format(tests=str(TESTS), log=str(made.requests), port_file=str(port_file))
        subprocess.Popen(made.command(sys.executable, "-c", script), env=env)
        assert wait_until(port_file.exists, timeout=20)
        env["CODING_AGENT_BASE_URL"] = f"http://127.0.0.1:{port_file.read_text()}/v1"
        common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
        head = made.run(
            "ray", "start", "--head", f"--port={HEAD_PORT}", "--include-dashboard=false",
            f"--temp-dir={folder / 'head'}", *common,
        )  # fmt: skip
        assert head.returncode == 0, head.stderr[-2000:]
        node = made.run(
            "ray", "start", f"--address={made.address}", f"--temp-dir={folder / 'node'}",
            *common,
        )  # fmt: skip
        assert node.returncode == 0, node.stderr[-2000:]
        yield made
    finally:
        for sig, seconds in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
            for pid in made.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            wait_until(lambda: not made.pids(), timeout=seconds)
        holder.kill()
        holder.wait()
        assert not made.pids()


def calculator_folder(tmp_path: Path) -> Path:
    """The calculator as a seed folder of its own."""
    seed = tmp_path / "my-calculator"
    shutil.copytree(CALCULATOR, seed)
    (seed / "seed.toml").write_text(
        'name = "my-calculator"\ndescription = "the calculator"\n'
        'tests = ["check_calculator.py"]\neditable = ["calculator.py"]\n'
        'default_prompt = "Fix add."\n'
        'test_command = ["python", "-m", "unittest", "-v", "check_calculator"]\n'
    )
    return seed


def write_tasks(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def results(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_batch_runs_across_the_nodes_with_every_verdict_right(
    cluster: Cluster, tmp_path: Path
) -> None:
    seed = calculator_folder(tmp_path)  # a folder: it travels by content
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "fix-1"},
            {"seed": "calculator", "id": "break", "prompt": "BREAK the calculator."},
            {"seed": str(seed), "id": "folder"},
            {"seed": "calculator", "id": "fix-2"},
        ],
    )
    out = tmp_path / "results.jsonl"

    done = cluster.run(*cluster.batch(tasks, out, "--json"))

    assert done.returncode == 1, done.stderr[-3000:]
    found = {r["id"]: r for r in results(out)}
    assert {k: r["status"] for k, r in found.items()} == {
        "fix-1": "passed",
        "break": "failed",
        "folder": "passed",
        "fix-2": "passed",
    }
    assert found["folder"]["seed"] == str(seed)
    assert "agent-seed-" not in json.dumps(found["folder"])  # the node's copy is not named
    assert {r["executor"] for r in found.values()} == {"ray"}
    workers = {r["worker"] for r in found.values()}
    assert len(workers) == 2, workers  # both nodes ran tasks
    assert all(isinstance(w, str) and len(w) == 56 for w in workers)
    summary = json.loads(done.stdout)
    assert summary["counts"]["passed"] == 3
    # The seed folder was unpacked on its node in a temporary folder, removed since.
    assert not list((cluster.folder / "tmp").glob("agent-seed-*"))


def test_a_budget_bounds_the_batch_and_resume_runs_what_it_stopped(
    cluster: Cluster, tmp_path: Path
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"seed": "calculator", "id": f"t{n}"} for n in (1, 2, 3)]
    )
    out = tmp_path / "results.jsonl"

    spent = cluster.run(*cluster.batch(tasks, out, "--jobs", "1", "--max-planner-calls", "1"))

    assert spent.returncode == 6, spent.stderr[-3000:]
    first = results(out)
    assert [(r["id"], r["status"]) for r in first] == [
        ("t1", "passed"),
        ("t2", "budget"),
        ("t3", "budget"),
    ]
    assert first[1]["worker"] is None  # never sent to a node
    assert first[0]["spend"]["planner_calls"] == 1

    resumed = cluster.run(*cluster.batch(tasks, out, "--resume"))

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    again = results(out)
    assert sorted((r["id"], r["status"]) for r in again[3:]) == [
        ("t2", "passed"),
        ("t3", "passed"),
    ]
    assert {r["executor"] for r in again} == {"ray"}


def test_a_worker_killed_mid_task_has_its_task_run_again_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"seed": "calculator", "id": "slow", "prompt": "SLOW-ONCE"}]
    )
    out = tmp_path / "results.jsonl"
    batch = subprocess.Popen(
        cluster.command(*cluster.batch(tasks, out)),
        env=cluster.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: len(cluster.workers_running_a_task()) == 1, timeout=60)
        assert wait_until(lambda: "SLOW-ONCE" in _read(cluster.requests), timeout=30)
        (victim,) = cluster.workers_running_a_task()
        os.kill(victim, signal.SIGKILL)
        _, stderr = batch.communicate(timeout=90)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()

    assert batch.returncode == 0, stderr[-3000:]
    (line,) = results(out)  # counted once
    assert line["status"] == "passed"
    assert line["executor"] == "ray"
    assert _read(cluster.requests).count("SLOW-ONCE") == 2  # asked again by the second run


def test_a_lost_nodes_task_runs_again_on_another_node_and_is_counted_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"seed": "calculator", "id": name, "prompt": name} for name in ("NODE-A", "NODE-B")],
    )
    out = tmp_path / "results.jsonl"
    batch = subprocess.Popen(
        cluster.command(*cluster.batch(tasks, out)),
        env=cluster.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # One task on each node, both waiting on the provider: the second node goes.
        assert wait_until(lambda: len(cluster.workers_running_a_task()) == 2, timeout=60)
        assert wait_until(partial(_asked, cluster, "NODE-A", 1), timeout=30)
        assert wait_until(partial(_asked, cluster, "NODE-B", 1), timeout=30)
        (raylet,) = cluster.raylets_of(cluster.folder / "node")
        os.kill(raylet, signal.SIGKILL)
        _, stderr = batch.communicate(timeout=90)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
        cluster.start_second_node()  # for the other tests, in whatever order they run

    assert batch.returncode == 0, stderr[-3000:]
    lines = results(out)
    assert sorted((r["id"], r["status"]) for r in lines) == [
        ("NODE-A", "passed"),
        ("NODE-B", "passed"),
    ]  # one line each
    assert len({r["worker"] for r in lines}) == 1  # both ended on the head
    requests = _read(cluster.requests)
    assert requests.count("NODE-A") + requests.count("NODE-B") == 3  # one of them run again


def test_a_task_whose_worker_is_killed_twice_ends_in_a_sandbox_error(
    cluster: Cluster, tmp_path: Path
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"seed": "calculator", "id": "lost", "prompt": "SLOW-TWICE"}]
    )
    out = tmp_path / "results.jsonl"
    batch = subprocess.Popen(
        cluster.command(*cluster.batch(tasks, out)),
        env=cluster.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for times in (1, 2):
            assert wait_until(partial(_asked, cluster, "SLOW-TWICE", times), timeout=60)
            assert wait_until(lambda: len(cluster.workers_running_a_task()) == 1, timeout=30)
            (victim,) = cluster.workers_running_a_task()
            os.kill(victim, signal.SIGKILL)
        _, stderr = batch.communicate(timeout=90)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()

    assert batch.returncode == 1, stderr[-3000:]
    (line,) = results(out)
    assert line["status"] == "sandbox-error"
    assert line["error"]["kind"] == "sandbox"
    assert "lost, and so was the one that ran it again" in line["error"]["message"]
    assert "lost" in stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_cancels_the_clusters_tasks(
    cluster: Cluster, tmp_path: Path, sig: signal.Signals
) -> None:
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"seed": "calculator", "id": f"hang-{n}", "prompt": "HANG"} for n in (1, 2, 3)],
    )
    out = tmp_path / "results.jsonl"
    batch = subprocess.Popen(
        cluster.command(*cluster.batch(tasks, out)),
        env=cluster.env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: len(cluster.workers_running_a_task()) == 2, timeout=60)
        assert wait_until(lambda: _read(cluster.requests).count("HANG") >= 2, timeout=30)
        time.sleep(0.5)
        started = time.monotonic()
        batch.send_signal(sig)
        _, stderr = batch.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()

    assert batch.returncode == 130, stderr[-3000:]
    assert took < 20, took
    assert "interrupted" in stderr
    assert "--resume" in stderr
    assert results(out) == []
    assert wait_until(lambda: not cluster.workers_running_a_task(), timeout=15)


def _asked(cluster: Cluster, marker: str, times: int) -> bool:
    """Whether the provider was asked ``times`` times for a task whose prompt says ``marker``."""
    return _read(cluster.requests).count(marker) == times


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def test_an_address_nothing_answers_at_is_a_usage_error_at_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}])
    out = tmp_path / "results.jsonl"
    started = time.monotonic()

    done = cluster.run(*cluster.batch(tasks, out)[:-1], "127.0.0.1:1")

    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot reach a Ray cluster at '127.0.0.1:1': Connection refused" in done.stderr
    assert time.monotonic() - started < 20
    assert "Traceback" not in done.stderr
    assert results(out) == []


def test_verify_many_tests_plans_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    seed = calculator_folder(tmp_path)
    fixed = plan_json(("calculator.py", FIXED_CALCULATOR))
    broken = plan_json(("calculator.py", FIXED_CALCULATOR.replace("left + right", "left * right")))
    script = (
        "import json\nfrom sandboxed_coding_agent import verify_many\n"
        f"items = [('calculator', {fixed!r}), ('calculator', {broken!r}), "
        f"({str(seed)!r}, {fixed!r})]\n"
        f"found = verify_many(items, executor='ray', ray_address={cluster.address!r})\n"
        "print(json.dumps(sorted([i, v.reward, v.seed, v.error and v.error.message] "
        "for i, v in found)))\n"
    )

    done = cluster.run(sys.executable, "-c", script)

    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [
        [0, 1.0, "calculator", None],
        [1, 0.0, "calculator", None],
        [2, 1.0, str(seed), None],
    ]


# Without a cluster: what travels, and what a batch refuses before it starts.


def test_a_seed_folder_travels_by_content_and_is_unpacked_whole(tmp_path: Path) -> None:
    from sandboxed_coding_agent.core.batches.seed_bundles import pack_seed, unpack_seed

    seed = tmp_path / "seed"
    (seed / "pkg" / "deep").mkdir(parents=True)
    (seed / "seed.toml").write_text("name = 'x'\n")
    (seed / "pkg" / "deep" / "mod.py").write_bytes(b"\xff\x00binary")
    (seed / "run.sh").write_text("#!/bin/sh\n")
    (seed / "run.sh").chmod(0o755)
    (seed / ".git").mkdir()
    (seed / ".git" / "HEAD").write_text("ref\n")
    (seed / "pkg" / "__pycache__").mkdir()

    bundle = pack_seed(str(seed))
    assert bundle is not None
    assert pack_seed("calculator") is None  # an installed seed travels by name
    into = tmp_path / "node"
    into.mkdir()
    assert unpack_seed(bundle, into) == str(into)
    copied = sorted(p.relative_to(into).as_posix() for p in into.rglob("*"))
    assert copied == ["pkg", "pkg/deep", "pkg/deep/mod.py", "run.sh", "seed.toml"]
    assert (into / "pkg" / "deep" / "mod.py").read_bytes() == b"\xff\x00binary"
    assert os.access(into / "run.sh", os.X_OK)
    assert not os.access(into / "seed.toml", os.X_OK)

    named = pack_seed(str(seed / "seed.toml"))  # the manifest named: the same, named so
    assert named is not None
    again = tmp_path / "again"
    again.mkdir()
    assert unpack_seed(named, again) == str(again / "seed.toml")


def test_a_seed_folder_that_cannot_travel_is_refused_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandboxed_coding_agent.core.batches import seed_bundles
    from sandboxed_coding_agent.core.errors import UsageError

    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "seed.toml").write_text("name = 'x'\n")
    (seed / "big.bin").write_bytes(b"x" * 1000)
    monkeypatch.setattr(seed_bundles, "MAX_BUNDLE_BYTES", 999)
    with pytest.raises(UsageError, match="more than 999 bytes"):
        seed_bundles.pack_seed(str(seed))
    monkeypatch.undo()
    (seed / "link").symlink_to("/etc/passwd")
    with pytest.raises(UsageError, match="symbolic link, 'link'"):
        seed_bundles.pack_seed(str(seed))
    with pytest.raises(UsageError, match="cannot read the seed folder"):
        seed_bundles.pack_seed(str(tmp_path / "missing"))
    outside = seed_bundles.SeedBundle(manifest=None, folders=(), files=(("../x", b"", False),))
    with pytest.raises(UsageError, match="outside its folder"):
        seed_bundles.unpack_seed(outside, tmp_path / "seed")


def test_ray_not_installed_is_a_usage_error_saying_how_to_install_it(
    run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    shadow = tmp_path / "shadow" / "ray"  # a Ray that cannot be imported
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}])
    out = tmp_path / "results.jsonl"

    run = run_agent(
        "batch", str(tasks), "--out", str(out), "--executor", "ray",
        env={"PYTHONPATH": str(tmp_path / "shadow")},
    )  # fmt: skip

    assert run.returncode == 2, run.stderr
    assert "sandboxed-coding-agent[ray]" in run.stderr
    assert "Traceback" not in run.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--executor", "dask"], "unknown executor 'dask'; the executors are: local, ray"),
        (["--ray-address", "127.0.0.1:1"], "--ray-address and --ray-cpus go with --executor ray"),
    ],
)
def test_an_executor_option_given_wrong_is_a_usage_error(
    run_agent: Callable[..., AgentRun], tmp_path: Path, args: list[str], said: str
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator"}])
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out), *args)

    assert run.returncode == 2, run.stderr
    assert said in run.stderr
    assert not out.exists()


def test_verify_many_on_ray_without_ray_says_how_to_install_it(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    script = (
        "from sandboxed_coding_agent import VerifyError, verify_many\n"
        "try:\n    verify_many([('calculator', 'x')], executor='ray')\n"
        "except VerifyError as error:\n    print('REFUSED', error.message)\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "shadow")},
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("REFUSED executor='ray' needs Ray"), done.stdout
    assert "sandboxed-coding-agent[ray]" in done.stdout

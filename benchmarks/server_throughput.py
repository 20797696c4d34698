"""Throughput of ``agent serve``: verdicts per second, against ``agent batch`` on the same plans.

For each ``--jobs`` J, the same N plans (the calculator's fix) are verified three ways:

* ``server``: ``agent serve --jobs J`` on loopback, N ``POST /v1/verify`` requests sent by
  2J client threads at once, timed from the first request to the last answer (the
  server's start is not counted);
* ``server batch``: the same N plans in ``POST /v1/verify/batch`` requests of J + 16;
* ``agent batch``: a tasks file of N calculator tasks, ``--jobs J``, each planned by an
  OpenAI-compatible server on loopback that answers at once with the same fix (a batch
  always plans), timed by the batch's own wall time (its ``--json`` summary), so the
  CLI's start is not counted.

And the per-request overhead: one request at a time to a ``--jobs 1`` server, against
:func:`sandboxed_coding_agent.verify` called in this process on the same plan (medians of
``--repeat`` interleaved rounds): what HTTP, JSON and the server's thread add to a verdict.

Run: ``uv run python benchmarks/server_throughput.py [--plans N] [--jobs J ...] [--repeat R]``.
Nothing here is a pass/fail test; compare between versions on the same machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from overhead import AGENT, FIXED, Provider

PLAN = {"files": [{"path": "calculator.py", "content": FIXED}]}


class Served:
    """An ``agent serve`` process on a free loopback port."""

    def __init__(self, jobs: int, env: dict[str, str]) -> None:
        argv = [AGENT, "serve", "--port", "0", "--jobs", str(jobs), "--queue", "1000"]
        self.process = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on http://"):
            sys.exit(f"agent serve did not start: {line!r}")
        host, port = line.split("//")[1].strip().rsplit(":", 1)
        self.host, self.port = host, int(port)

    def post(self, path: str, body: object) -> Any:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=600)
        connection.request("POST", path, body=json.dumps(body))
        answer = connection.getresponse()
        data = json.loads(answer.read())
        connection.close()
        if answer.status != 200:
            sys.exit(f"the server answered {answer.status}: {data}")
        return data

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()


def through_server(jobs: int, plans: int, env: dict[str, str]) -> tuple[float, float]:
    """(verdicts per second one request each, in batch requests)."""
    server = Served(jobs, env)
    try:
        request = {"seed": "calculator", "plan": PLAN}
        server.post("/v1/verify", request)  # the trusted list, made once
        started = time.perf_counter()
        with ThreadPoolExecutor(2 * jobs) as pool:
            rewards = list(pool.map(lambda _: server.post("/v1/verify", request), range(plans)))
        single = plans / (time.perf_counter() - started)
        assert all(r["reward"] == 1.0 for r in rewards), rewards[:1]
        size = jobs + 16
        chunks = [[request] * min(size, plans - i) for i in range(0, plans, size)]
        started = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            answers = list(
                pool.map(lambda c: server.post("/v1/verify/batch", {"items": c}), chunks)
            )
        batched = plans / (time.perf_counter() - started)
        assert all(v["reward"] == 1.0 for a in answers for v in a["verdicts"])
        return single, batched
    finally:
        server.close()


def through_batch(jobs: int, plans: int, env: dict[str, str], folder: Path) -> float:
    provider = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    planned = {
        **env,
        "CODING_AGENT_BASE_URL": f"http://127.0.0.1:{provider.server_address[1]}/v1",
        "CODING_AGENT_MODEL": "bench",
        "CODING_AGENT_API_KEY": "sk-bench-0123456789",
    }
    tasks = folder / "tasks.jsonl"
    tasks.write_text('{"seed": "calculator"}\n' * plans, encoding="utf-8")
    out = folder / f"results-{jobs}.jsonl"
    done = subprocess.run(
        [AGENT, "batch", str(tasks), "--out", str(out), "--jobs", str(jobs), "--json"],
        env=planned,
        capture_output=True,
        text=True,
        check=False,
    )
    provider.shutdown()
    if done.returncode != 0:
        sys.exit(f"agent batch failed ({done.returncode}):\n{done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    return float(summary["tasks_per_second"])


def overhead(repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """(median ms of one request to a --jobs 1 server, of verify() in process)."""
    from sandboxed_coding_agent import verify

    os.environ.update({k: env[k] for k in ("XDG_STATE_HOME", "XDG_CACHE_HOME")})
    server = Served(1, env)
    request = {"seed": "calculator", "plan": PLAN}
    served: list[float] = []
    local: list[float] = []
    try:
        server.post("/v1/verify", request)
        verify("calculator", PLAN)
        for _ in range(repeat):
            started = time.perf_counter()
            server.post("/v1/verify", request)
            served.append(time.perf_counter() - started)
            started = time.perf_counter()
            verify("calculator", PLAN)
            local.append(time.perf_counter() - started)
    finally:
        server.close()
    return statistics.median(served) * 1000, statistics.median(local) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plans", type=int, default=60)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        env = {
            **os.environ,
            "XDG_STATE_HOME": str(folder / "state"),
            "XDG_CACHE_HOME": str(folder / "cache"),
        }
        print(f"{options.plans} plans (the calculator's fix), verdicts per second")
        print(f"{'--jobs':>6}  {'server':>8}  {'server batch':>12}  {'agent batch':>11}")
        for jobs in options.jobs:
            single, batched = through_server(jobs, options.plans, env)
            batch = through_batch(jobs, options.plans, env, folder)
            print(f"{jobs:>6}  {single:>8.2f}  {batched:>12.2f}  {batch:>11.2f}")
        served, local = overhead(options.repeat, env)
        print(
            f"\none request at a time (median of {options.repeat}): server {served:.1f} ms, "
            f"verify() in process {local:.1f} ms, {served / local:.2f}x"
        )


if __name__ == "__main__":
    main()

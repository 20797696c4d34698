"""Throughput of ``agent batch``: tasks per second for a 100-task batch.

The provider is an OpenAI-compatible server on loopback that answers at once
with the calculator's fix, so what is measured is the agent's own cost per task
(planner call, policies, a fresh sandbox and its test, the run record, the
result line) at a given ``--jobs``. The figure is the batch's own wall time
(from its ``--json`` summary, so the CLI's start-up is not counted) and the
whole command's.

Run: ``uv run python benchmarks/batch_throughput.py [--tasks N] [--jobs J ...] [--json]``.
Nothing here is a pass/fail test; compare between versions on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from overhead import AGENT, Provider


def batch(tasks: int, jobs: int, env: dict[str, str]) -> tuple[float, float, dict[str, int]]:
    """(tasks per second by the batch's wall time, by the whole command's, status counts)."""
    with tempfile.TemporaryDirectory() as folder:
        tasks_file = Path(folder) / "tasks.jsonl"
        tasks_file.write_text('{"seed": "calculator"}\n' * tasks, encoding="utf-8")
        out = Path(folder) / "results.jsonl"
        started = time.perf_counter()
        done = subprocess.run(
            [AGENT, "batch", str(tasks_file), "--out", str(out), "--jobs", str(jobs), "--json"],
            env={**env, "XDG_STATE_HOME": str(Path(folder) / "state")},
            capture_output=True,
            text=True,
            check=False,
        )
        whole = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"agent batch failed ({done.returncode}):\n{done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    return summary["tasks_per_second"], tasks / whole, summary["counts"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, os.cpu_count() or 1, 8])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "CODING_AGENT_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "CODING_AGENT_MODEL": "bench",
        "CODING_AGENT_API_KEY": "sk-bench-0123456789",
    }
    rows = []
    for jobs in dict.fromkeys(options.jobs):
        per_second, whole, counts = batch(options.tasks, jobs, env)
        rows.append(
            {
                "jobs": jobs,
                "tasks": options.tasks,
                "tasks_per_second": round(per_second, 2),
                "command_tasks_per_second": round(whole, 2),
                "passed": counts["passed"],
            }
        )
    if options.json:
        print(json.dumps({"cpus": os.cpu_count(), "rows": rows}))
    else:
        print(f"{options.tasks} tasks, {os.cpu_count()} CPUs")
        for row in rows:
            print(
                f"--jobs {row['jobs']:<3} {row['tasks_per_second']:6.2f} tasks/s in the batch, "
                f"{row['command_tasks_per_second']:6.2f} tasks/s for the whole command, "
                f"{row['passed']} passed"
            )
    server.shutdown()


if __name__ == "__main__":
    main()

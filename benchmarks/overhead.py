"""How much the agent adds to running a seed's test directly.

Reference: the calculator's test run by the same Python in a fresh copy of the
seed (what a developer would do by hand). Measured against it, each as a ratio
of medians:

* ``sandbox``: the local runner alone, in-process (bwrap, limits, capture, cleanup);
* ``cli --plan``: ``agent run --plan`` end to end (start-up, policies, sandbox);
* ``cli + provider``: ``agent run`` against an OpenAI-compatible server on loopback
  that answers at once, so only the agent's own cost of planning is counted.

Run: ``uv run python benchmarks/overhead.py [--repeat N]``. Nothing here is a
pass/fail test; compare the ratios between versions on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sandboxed_coding_agent.core.model import SandboxJob
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox

FIXED = "def add(left, right):\n    return left + right\n"
AGENT = str(Path(sys.executable).with_name("agent"))


def median_seconds(action: Callable[[], None], repeat: int) -> float:
    action()  # warm caches once
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def direct_test() -> None:
    seed = calculator_seed()
    with tempfile.TemporaryDirectory() as folder:
        for path, data in seed.read_files().items():
            Path(folder, path).write_bytes(data)
        Path(folder, "calculator.py").write_text(FIXED)
        subprocess.run(
            [sys.executable, *seed.test_command[1:]],
            cwd=folder,
            capture_output=True,
            check=True,
        )


def sandbox_only() -> None:
    seed = calculator_seed()
    files = {**seed.read_files(), "calculator.py": FIXED.encode()}
    job = SandboxJob(seed=seed.name, files=files, test_command=seed.test_command)
    outcome = LocalSandbox().run_test(job)
    assert outcome.tests_passed, outcome.output


class Provider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answer = json.dumps(
        {
            "id": "chatcmpl-bench",
            "model": "bench",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": json.dumps(
                            {"files": [{"path": "calculator.py", "content": FIXED}]}
                        ),
                    },
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
    ).encode()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *_: Any) -> None:
        pass


def cli(args: list[str], env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        done = subprocess.run([AGENT, *args], env=env, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr.decode()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    repeat = parser.parse_args().repeat

    state = tempfile.mkdtemp(prefix="agent-bench-")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    plan = Path(state, "plan.json")
    plan.write_text(json.dumps({"files": [{"path": "calculator.py", "content": FIXED}]}))
    env = {
        **os.environ,
        "XDG_STATE_HOME": state,
        "CODING_AGENT_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "CODING_AGENT_MODEL": "bench",
        "CODING_AGENT_API_KEY": "sk-bench",
    }
    try:
        reference = median_seconds(direct_test, repeat)
        rows = [
            ("direct test (reference)", reference),
            ("sandbox", median_seconds(sandbox_only, repeat)),
            ("cli --plan", median_seconds(cli(["run", "--plan", str(plan)], env), repeat)),
            ("cli + provider", median_seconds(cli(["run"], env), repeat)),
        ]
    finally:
        server.shutdown()
        shutil.rmtree(state, ignore_errors=True)
    print(f"median of {repeat} runs each")
    for name, seconds in rows:
        print(f"{name:<24} {seconds * 1000:8.1f} ms  {seconds / reference:5.2f}x")


if __name__ == "__main__":
    main()

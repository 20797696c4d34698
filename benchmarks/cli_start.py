"""Where the start of ``agent`` goes: each layer of its imports timed in a fresh interpreter.

``overhead.py`` gives ``agent --help`` and ``agent run --plan`` against their
references; this splits the start into what each layer adds, each a fresh process
of the agent's own interpreter, interleaved, median of ``--repeat`` rounds:

* ``python -c pass``: the interpreter with ``site`` (the reference of ``--help``);
* ``import typer``: the command-line library the CLI is built on;
* ``import core.model``: the data model (its attrs classes, built at import);
* ``import core.plugins``: the plugin host, with the hook specs and what it checks;
* ``plugin host made``: the host with every plugin registered (built-in modules
  imported, entry points read), as every command makes it;
* ``agent --help`` and ``agent run --plan``: the commands themselves.

Run: ``uv run python benchmarks/cli_start.py [--repeat N]``. Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from overhead import AGENT, FIXED, PLAIN_ENVIRONMENT, interleaved

CORE = "sandboxed_coding_agent.core"


def python(code: str) -> Callable[[], None]:
    def run() -> None:
        subprocess.run([sys.executable, "-c", code], env=PLAIN_ENVIRONMENT, check=True)

    return run


def agent(args: list[str], env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        done = subprocess.run([AGENT, *args], env=env, capture_output=True, check=False)
        assert done.returncode == 0, done.stderr.decode()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as state:
        plan = Path(state, "plan.json")
        plan.write_text(json.dumps({"files": [{"path": "calculator.py", "content": FIXED}]}))
        env = {**PLAIN_ENVIRONMENT, "XDG_STATE_HOME": state, "XDG_CACHE_HOME": state}
        os.environ["XDG_CACHE_HOME"] = state
        medians = interleaved(
            {
                "python -c pass": python("pass"),
                "import typer": python("import typer"),
                "import core.model": python(f"import {CORE}.model"),
                "import core.plugins": python(f"import {CORE}.plugins"),
                "plugin host made": python(f"from {CORE}.plugins import PluginHost; PluginHost()"),
                "agent --help": agent(["--help"], env),
                "agent run --plan": agent(["run", "--plan", str(plan), "--json"], env),
            },
            options.repeat,
        )
    print(f"median of {options.repeat} interleaved rounds\n")
    for name, seconds in medians.items():
        print(f"{name:<24} {seconds * 1000:7.1f} ms")


if __name__ == "__main__":
    main()

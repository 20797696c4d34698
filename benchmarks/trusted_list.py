"""What the trusted list costs: a seed's first run pays for one more sandbox, later runs nothing.

Before a plan is tested, the agent runs the unpatched seed once to list the tests a
pass needs (see ``core/verdicts/trusted_tests.py``), and keeps that list by the seed's content.
Each round runs, interleaved:

* ``direct test``: the calculator's test run directly by the same Python in a fresh
  copy of the seed (what a developer would do by hand): the reference;
* ``agent run --plan, list kept``: the whole command as a fresh process, with a state
  folder that already holds the calculator's list (every run after a seed's first);
* ``agent run --plan, first run``: the same with an empty state folder, so the run
  lists the unpatched seed's tests first (a seed's first run, or its first after a
  change to its files).

Figures are medians of the rounds; the ratios say what the list adds on a first run
(first run / list kept) and what a later run pays in all (list kept / direct test).

Run: ``uv run python benchmarks/trusted_list.py [--repeat N]``. Nothing here is a
pass/fail test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "examples" / "plans" / "calculator-fix.json"
AGENT = Path(sys.executable).with_name("agent")


def _timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-2000:]}")
    return took * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    arguments = parser.parse_args()
    seed = calculator_seed()
    work = Path(tempfile.mkdtemp(prefix="trusted-list-bench-"))
    kept_state = work / "kept"
    base = {k: v for k, v in os.environ.items() if not k.startswith("CODING_AGENT_")}
    run = [str(AGENT), "run", "--seed", "calculator", "--plan", str(PLAN)]
    figures: dict[str, list[float]] = {"direct": [], "kept": [], "first": []}
    try:
        _timed(run, {**base, "XDG_STATE_HOME": str(kept_state)})  # the list, kept
        for number in range(arguments.repeat):
            copy = work / f"seed-{number}"
            shutil.copytree(seed.root, copy)
            command = [sys.executable, *seed.test_command[1:]]
            # The broken seed's test fails; the direct test runs the fixed one.
            (copy / "calculator.py").write_text(
                (seed.root / "calculator.py").read_text().replace("left - right", "left + right")
            )
            figures["direct"].append(_timed(command, base, cwd=copy))
            figures["kept"].append(_timed(run, {**base, "XDG_STATE_HOME": str(kept_state)}))
            fresh = work / f"fresh-{number}"
            figures["first"].append(_timed(run, {**base, "XDG_STATE_HOME": str(fresh)}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    direct, kept, first = (statistics.median(figures[k]) for k in ("direct", "kept", "first"))
    print(f"median of {arguments.repeat} interleaved rounds\n")
    print(f"{'figure':<34}{'ms':>8}  {'reference':<28}{'ms':>8}  ratio")
    rows = [
        ("agent run --plan, list kept", kept, "direct test", direct),
        ("agent run --plan, first run", first, "agent run --plan, list kept", kept),
    ]
    for name, value, reference, against in rows:
        print(f"{name:<34}{value:>8.1f}  {reference:<28}{against:>8.1f}  {value / against:.2f}x")
    print(f"\nthe first run's list costs {first - kept:.1f} ms; a later run pays nothing for it")


if __name__ == "__main__":
    main()

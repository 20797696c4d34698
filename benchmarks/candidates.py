"""Throughput of parallel candidates: K = 1, 2, 4, 8 sandboxes at once, with given plans.

Each round runs ``orchestrator.run`` with ``candidates=K`` and ``jobs=K`` for
the calculator seed, through a planner that returns a fixed (passing) plan at
once, so no provider is involved: what is measured is the candidates'
machinery and K local sandboxes side by side. For each K:

* ``tests/s``: K divided by the median wall time of a round;
* ``peak MiB``: the median, over rounds, of the peak resident memory of this
  process and every process it started (sandboxes included), summed, sampled
  every 5 ms. Shared pages count once per process, so this overstates a little.

The K are interleaved (1, 2, 4, 8, 1, 2, ...) so that a machine getting busier
or warmer affects them alike.

Run: ``uv run python benchmarks/candidates.py [--repeat N] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from sandboxed_coding_agent.core.model import PatchFile, PatchPlan, PlannerResult, PlanRequest
from sandboxed_coding_agent.core.runs import orchestrator
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox

FIXED = "def add(left, right):\n    return left + right\n"
KS = (1, 2, 4, 8)
PAGE = os.sysconf("SC_PAGE_SIZE")


@attrs.frozen
class GivenPlanner:
    """Answers every request with the same plan, at once."""

    name: str = "given"
    description: str = "a fixed plan"

    def plan(self, request: PlanRequest) -> PlannerResult:
        plan = PatchPlan((PatchFile("calculator.py", FIXED),))
        return PlannerResult(self.name, f"given-{secrets.token_hex(8)}", plan)


def tree_rss_bytes(root: int) -> int:
    """Resident memory of ``root`` and all its descendants, summed."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        parents[int(entry)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
    family, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in family} - family
        family |= more
        grew = bool(more)
    total = 0
    for pid in family:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError):
            continue
    return total


class PeakMemory:
    """Samples :func:`tree_rss_bytes` of this process in a thread; the highest seen."""

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, tree_rss_bytes(os.getpid()))
            self._done.wait(0.005)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join()


def one_round(k: int) -> tuple[float, int]:
    """Wall seconds and peak bytes of one run with ``k`` candidates."""
    seed = calculator_seed()
    with PeakMemory() as memory:
        started = time.perf_counter()
        result = orchestrator.run(
            seed,
            runner=LocalSandbox(),
            policies=(),
            planner=GivenPlanner(),
            candidates=k,
            jobs=k,
        )
        seconds = time.perf_counter() - started
    assert result.tests_passed, result.test_output
    assert len(result.candidates) == (k if k > 1 else 0)
    return seconds, memory.peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args()

    one_round(1)  # warm caches once
    seconds: dict[int, list[float]] = {k: [] for k in KS}
    peaks: dict[int, list[int]] = {k: [] for k in KS}
    for _ in range(options.repeat):
        for k in KS:
            took, peak = one_round(k)
            seconds[k].append(took)
            peaks[k].append(peak)
    rows: list[dict[str, Any]] = []
    for k in KS:
        median = statistics.median(seconds[k])
        rows.append(
            {
                "candidates": k,
                "median_seconds": round(median, 4),
                "tests_per_second": round(k / median, 2),
                "peak_mib": round(statistics.median(peaks[k]) / 2**20, 1),
            }
        )
    machine = {"cpus": os.cpu_count(), "memory_gib": round(_memory_bytes() / 2**30, 1)}
    if options.json:
        print(json.dumps({"repeat": options.repeat, "machine": machine, "rows": rows}))
        return
    print(f"median of {options.repeat} interleaved rounds; {machine['cpus']} CPUs")
    print(f"{'K':>3} {'median s':>9} {'tests/s':>8} {'peak MiB':>9}")
    for row in rows:
        print(
            f"{row['candidates']:>3} {row['median_seconds']:>9.3f} "
            f"{row['tests_per_second']:>8.2f} {row['peak_mib']:>9.1f}"
        )


def _memory_bytes() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


if __name__ == "__main__":
    main()

"""What the guard costs per test, for a seed with many tests: ratios to the same sandbox.

``overhead.py`` measures the calculator, whose two tests make the guard's
per-test work invisible. Here one unittest module holds ``--tests`` tests (400
by default), each a call of the code under test and an ``assertEqual``. Three
actions, interleaved one of each per round (so a machine getting busier
affects them alike), each the median of ``--repeat`` rounds:

* ``direct test``: ``python -m unittest`` on a fresh copy of the seed.
* ``sandbox``: the local runner with no framework named (it only supervises).
* ``sandbox with report and guard``: as ``agent run`` tests a plan: unittest
  in-process under the guard, which compares the framework with what it noted
  at every outcome and at every test's end.

The guard's own cost per test is the difference of the last two, divided by the
number of tests.

Run: ``uv run python benchmarks/guard_per_test.py [--tests N] [--repeat N]``.
Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sandboxed_coding_agent.core.model import SandboxJob, SeedProject
from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.core.verdicts.verdict import harness_for, verified
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox

CODE = "def add(left, right):\n    return left + right\n"
COMMAND = ("python", "-m", "unittest", "discover", "-p", "test_*.py")


def test_module(count: int) -> str:
    lines = [
        "import unittest",
        "",
        "from calculator import add",
        "",
        "",
        "class Add(unittest.TestCase):",
    ]
    for number in range(count):
        lines += [
            f"    def test_add_{number}(self):",
            f"        self.assertEqual(add({number}, 1), {number + 1})",
            "",
        ]
    return "\n".join(lines) + "\n"


def seed_files(count: int) -> dict[str, bytes]:
    return {"calculator.py": CODE.encode(), "test_calculator.py": test_module(count).encode()}


def direct(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for path, data in files.items():
            Path(folder, path).write_bytes(data)
        subprocess.run([sys.executable, *COMMAND[1:]], cwd=folder, capture_output=True, check=True)


def seed_folder(folder: Path, files: dict[str, bytes]) -> SeedProject:
    for path, data in files.items():
        (folder / path).write_bytes(data)
    (folder / "seed.toml").write_text(
        'name = "many-tests"\ndescription = "many tests"\ntests = ["test_calculator.py"]\n'
        'editable = ["calculator.py"]\ndefault_prompt = "Keep add right."\n'
        f"test_command = {list(COMMAND)!r}\n".replace("'", '"')
        + "[limits]\ntest_timeout_seconds = 120\n"
    )
    return load_seed(folder)


def sandboxed(seed: SeedProject, files: dict[str, bytes], guarded: bool) -> None:
    harness = harness_for(seed, files) if guarded else None
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        limits=seed.limits,
        harness=harness,
    )
    outcome = LocalSandbox().run_test(job)
    if guarded:
        outcome = verified(job, outcome)
        assert outcome.test_report is not None
        assert not outcome.test_report.guard, outcome.test_report.guard
    assert outcome.tests_passed, outcome.output[-2000:]


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    files = seed_files(options.tests)
    folder = tempfile.TemporaryDirectory()
    seed = seed_folder(Path(folder.name), files)
    actions = {
        "direct test": lambda: direct(files),
        "sandbox": lambda: sandboxed(seed, files, guarded=False),
        "sandbox with report and guard": lambda: sandboxed(seed, files, guarded=True),
    }
    for action in actions.values():
        action()  # once unmeasured: caches, the harness's bytecode
    seconds: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(options.repeat):
        for name, action in actions.items():
            seconds[name].append(timed(action))
    median = {name: statistics.median(found) for name, found in seconds.items()}
    reference = median["direct test"]
    for name, value in median.items():
        print(f"{name:32} {value * 1000:8.1f} ms  {value / reference:5.2f}x the direct test")
    per_test = (median["sandbox with report and guard"] - median["sandbox"]) / options.tests
    print(f"the guard and the report, per test: {per_test * 1e6:.0f} µs ({options.tests} tests)")


if __name__ == "__main__":
    main()

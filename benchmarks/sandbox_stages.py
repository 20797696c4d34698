"""Where the sandbox stage's milliseconds go: each stage of a sandboxed test timed on its own.

``overhead.py`` gives the ratios the targets are about; this splits them. All actions
run interleaved, one of each per round, median of ``--repeat`` rounds:

* ``true``, run directly, and ``sandbox running true``: the sandbox's own fixed cost
  (the agent's side, the gate, bwrap and PID 1), with a command that does nothing;
* ``python -I -S -c pass``: an interpreter's start, as the harness starts;
* ``unittest -I -S``: the calculator's test run by ``python -I -S -m unittest`` in a
  copy of the seed, no sandbox: what the test itself costs with no ``site``;
* ``harness compiled`` and ``harness from source``: the same test run by the harness
  (the guard and the signed report on), outside any sandbox, from the ``.pyc`` files
  the local runner binds and from the ``.py`` files a seed runtime's interpreter gets;
* ``direct test``, ``sandbox`` and ``sandbox with report and guard``: as in
  ``overhead.py``.

Run: ``uv run python benchmarks/sandbox_stages.py [--repeat N]``. Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from overhead import (
    FIXED,
    direct_test,
    interleaved,
    sandbox_guarded,
    sandbox_only,
    sandbox_true,
)

from sandboxed_coding_agent.core import harness
from sandboxed_coding_agent.core.model import SandboxJob
from sandboxed_coding_agent.core.verdicts.verdict import harness_for, harness_settings
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import host_python

PYTHON = host_python()[0]


def run_quietly(argv: list[str], cwd: str | None = None) -> None:
    subprocess.run(argv, cwd=cwd, capture_output=True, check=False)


def harness_run(folder: Path, harness_folder: Path, main: str) -> Callable[[], None]:
    """The harness running the calculator's test in ``folder``, reading a fresh copy of its
    settings each time (it deletes the file it is given)."""
    seed = calculator_seed()
    files = {**seed.read_files(), "calculator.py": FIXED.encode()}
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        harness=harness_for(seed, files),
    )
    argv = [PYTHON, *seed.test_command[1:]]
    settings = harness_settings(job, argv, -1, writable=[str(folder)], report_path="report.txt")
    setup = folder.parent / f"setup-{main}.json"

    def run() -> None:
        setup.write_bytes(settings)
        done = subprocess.run(
            [PYTHON, "-I", "-B", "-S", str(harness_folder / main), "--setup-file", str(setup)],
            cwd=folder,
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()

    return run


def measure(repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        seed_copy = root / "seed"
        seed_copy.mkdir()
        for path, data in calculator_seed().read_files().items():
            (seed_copy / path).write_bytes(data)
        (seed_copy / "calculator.py").write_text(FIXED)
        compiled, source = root / "compiled", root / "source"
        for folder, contents in (
            (compiled, harness.compiled_files(str(compiled))),
            (source, harness.files()),
        ):
            folder.mkdir()
            for name, data in contents.items():
                (folder / name).write_bytes(data)
        test = calculator_seed().test_command[1:]
        return interleaved(
            {
                "true": lambda: run_quietly(["true"]),
                "sandbox running true": sandbox_true,
                "python -I -S -c pass": lambda: run_quietly([PYTHON, "-I", "-S", "-c", "pass"]),
                "unittest -I -S": lambda: run_quietly([PYTHON, "-I", "-S", *test], str(seed_copy)),
                "harness compiled": harness_run(seed_copy, compiled, "main.pyc"),
                "harness from source": harness_run(seed_copy, source, "main.py"),
                "direct test": direct_test,
                "sandbox": sandbox_only,
                "sandbox with report and guard": sandbox_guarded,
            },
            repeat,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    medians = measure(options.repeat)
    print(f"median of {options.repeat} interleaved rounds\n")
    for name, seconds in medians.items():
        print(f"{name:<32} {seconds * 1000:7.1f} ms")


if __name__ == "__main__":
    main()

"""How much the agent adds to running a seed's test, and to starting Python: every ratio at once.

Each figure is a ratio of medians to a reference measured in the same rounds
(the actions are interleaved, one of each per round, so a machine getting
busier affects them alike):

* ``sandbox``: the local runner alone, in-process (bwrap, limits, capture,
  cleanup), to the calculator's test run directly by the same Python in a fresh
  copy of the seed (what a developer would do by hand). Target: 1.15x. This job
  names no framework and has no output tests: its verdict rests on the exit status,
  and the sandbox's PID 1 is the execute-only shell of ``local_sandbox.init``.
* ``sandbox with report and guard``: the same, as ``agent run`` tests a plan:
  the harness runs unittest in-process under the guard (audit hook, framework
  snapshot) and signs each test's outcome, which the agent verifies. Target: 1.15x.
* ``sandbox, git seed of 5,000 files / 50 MB``: the same as the previous, for a git
  seed whose tree (checked out once beforehand, as the agent's cache keeps it) holds
  5,000 files of 10 KB in 50 folders, to the calculator's sandbox with report and
  guard. Target: 1.3x: a sandbox binds the tree, it does not copy it.
* ``sandbox running true``: the sandbox's own fixed cost (the agent's side, the
  gate, bwrap, PID 1), with a command that does nothing, to running ``true`` directly.
  No target: its milliseconds are what the sandbox adds to any test.
* ``agent run --plan``: the whole command as a fresh process (start-up,
  plugins, policies, sandbox, run record) to the same direct test. Target: 3.5x.
* ``agent run`` with a provider: against an OpenAI-compatible server on
  loopback that answers at once, so only the agent's own cost of planning
  counts. No target; shown for comparison.
* ``agent --help`` and ``agent seeds list`` to ``python -c pass`` with the same
  interpreter. Target: 4x for ``--help``, 8x for ``seeds list``.

It also reports what ``agent run --plan`` spends importing modules
(``python -X importtime``), and with ``--throughput`` the figures of
``candidates.py`` and ``batch_throughput.py``.

Run: ``uv run python benchmarks/overhead.py [--repeat N] [--throughput] [--json]
[--write benchmarks/RESULTS.md]``. Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
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

from sandboxed_coding_agent.core.model import SandboxJob, SeedProject
from sandboxed_coding_agent.core.seeds import git_source
from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.core.verdicts.verdict import harness_for, verified
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox

FIXED = "def add(left, right):\n    return left + right\n"
AGENT = str(Path(sys.executable).with_name("agent"))
HERE = Path(__file__).resolve().parent
#: The commands measured run as a user's would: writing bytecode caches (the first,
#: unmeasured run of each writes them), whatever this shell says.
PLAIN_ENVIRONMENT = {
    name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"
}

#: figure -> (reference, target ratio or None)
FIGURES: dict[str, tuple[str, float | None]] = {
    "sandbox": ("direct test", 1.15),
    "sandbox with report and guard": ("direct test", 1.15),
    "sandbox, git seed of 5,000 files / 50 MB": ("sandbox with report and guard", 1.3),
    "sandbox running true": ("direct true", None),
    "agent run --plan": ("direct test", 3.5),
    "agent run (loopback provider)": ("direct test", None),
    "agent --help": ("python -c pass", 4.0),
    "agent seeds list": ("python -c pass", 8.0),
}


def direct_test() -> None:
    seed = calculator_seed()
    with tempfile.TemporaryDirectory() as folder:
        for path, data in seed.read_files().items():
            Path(folder, path).write_bytes(data)
        Path(folder, "calculator.py").write_text(FIXED)
        subprocess.run(
            [sys.executable, *seed.test_command[1:]],
            cwd=folder,
            env=PLAIN_ENVIRONMENT,
            capture_output=True,
            check=True,
        )


def sandbox_only() -> None:
    seed = calculator_seed()
    files = {**seed.read_files(), "calculator.py": FIXED.encode()}
    job = SandboxJob(seed=seed.name, files=files, test_command=seed.test_command)
    outcome = LocalSandbox().run_test(job)
    assert outcome.tests_passed, outcome.output


def sandbox_guarded() -> None:
    """The sandbox as ``agent run`` uses it: unittest's signed report and the guard."""
    seed = calculator_seed()
    files = {**seed.read_files(), "calculator.py": FIXED.encode()}
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        harness=harness_for(seed, files),
    )
    outcome = verified(job, LocalSandbox().run_test(job))
    assert outcome.tests_passed, outcome.output
    assert outcome.test_report is not None
    assert outcome.test_report.framework == "unittest"


LARGE_TEST = (
    "import unittest\n\nfrom calculator import add\n\n\n"
    "class Add(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)


def large_tree_seed(folder: Path) -> SeedProject:
    """A git seed at a commit of 5,000 files of 10 KB (and the calculator), checked out."""
    repository = folder / "repository"
    for group in range(50):
        package = repository / f"package_{group}"
        package.mkdir(parents=True)
        for number in range(100):
            text = f"# module {group}.{number}\n" + "x = 1\n" * 1700
            (package / f"module_{number}.py").write_text(text)
    (repository / "calculator.py").write_text(FIXED.replace("+", "-"))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repository, check=True)
    subprocess.run([*git, "add", "."], cwd=repository, check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], cwd=repository, check=True)
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], cwd=repository, check=True, capture_output=True, text=True
    ).stdout.strip()
    seed = folder / "seed"
    seed.mkdir()
    (seed / "test_calculator.py").write_text(LARGE_TEST)
    (seed / "seed.toml").write_text(
        'name = "large-tree"\ndescription = "5,000 files"\neditable = ["calculator.py"]\n'
        'tests = ["test_calculator.py"]\ndefault_prompt = "Fix add."\n'
        'test_command = ["python", "-m", "unittest", "discover", "-p", "test_*.py"]\n'
        f'[source]\ngit = "{repository}"\ncommit = "{commit}"\n'
    )
    project = load_seed(seed)
    assert project.source is not None
    git_source.materialize(project.source)
    return project


def sandbox_large_tree(seed: SeedProject) -> Callable[[], None]:
    def run() -> None:
        files = {**seed.read_files(), "calculator.py": FIXED.encode()}
        job = SandboxJob(
            seed=seed.name,
            files=files,
            test_command=seed.test_command,
            harness=harness_for(seed, files),
            tree=seed.source,
        )
        outcome = verified(job, LocalSandbox().run_test(job))
        assert outcome.tests_passed, outcome.output

    return run


def sandbox_true() -> None:
    """What the sandbox itself costs: a command that does nothing, judged by its status."""
    seed = calculator_seed()
    job = SandboxJob(seed=seed.name, files=seed.read_files(), test_command=["true"])
    outcome = LocalSandbox().run_test(job)
    assert outcome.exit_code == 0, outcome.output


def direct_true() -> None:
    subprocess.run(["true"], env=PLAIN_ENVIRONMENT, check=True)


def python_pass() -> None:
    subprocess.run([sys.executable, "-c", "pass"], env=PLAIN_ENVIRONMENT, check=True)


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


def interleaved(actions: dict[str, Callable[[], None]], repeat: int) -> dict[str, float]:
    """Median seconds of each action, run once each per round for ``repeat`` rounds."""
    for action in actions.values():
        action()  # warm caches once
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(repeat):
        for name, action in actions.items():
            started = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def import_time(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """What a fresh ``agent ARGS`` spends importing: the total, and the largest packages."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", AGENT, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    by_package: dict[str, int] = {}
    total = 0
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if found is None:  # nested imports are indented: only top-level lines are summed
            continue
        microseconds, name = int(found.group(1)), found.group(2)
        if name.startswith(" "):
            continue
        total += microseconds
        package = name.split(".")[0]
        if package == "sandboxed_coding_agent":
            package = ".".join(name.split(".")[:3])
        by_package[package] = by_package.get(package, 0) + microseconds
    largest = sorted(by_package.items(), key=lambda item: -item[1])[:8]
    return {
        "total_ms": round(total / 1000, 1),
        "largest_ms": {name: round(us / 1000, 1) for name, us in largest},
    }


def throughput() -> dict[str, Any]:
    """The figures of the candidates and batch benchmarks (each as its own process)."""
    figures: dict[str, Any] = {}
    for name, args in (
        ("candidates", ["candidates.py", "--repeat", "5", "--json"]),
        ("batch", ["batch_throughput.py", "--tasks", "40", "--json"]),
    ):
        done = subprocess.run(
            [sys.executable, *args], cwd=HERE, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            sys.exit(f"{name} benchmark failed:\n{done.stderr[-2000:]}")
        figures[name] = json.loads(done.stdout)
    return figures


def machine() -> dict[str, Any]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    model = ""
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "memory_gib": round(memory / 2**30, 1),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def measure(repeat: int, with_throughput: bool) -> dict[str, Any]:
    state = tempfile.mkdtemp(prefix="agent-bench-")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    plan = Path(state, "plan.json")
    plan.write_text(json.dumps({"files": [{"path": "calculator.py", "content": FIXED}]}))
    env = {
        **PLAIN_ENVIRONMENT,
        "XDG_STATE_HOME": state,
        "CODING_AGENT_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "CODING_AGENT_MODEL": "bench",
        "CODING_AGENT_API_KEY": "sk-bench-0123456789",
    }
    run_plan = ["run", "--plan", str(plan), "--json"]
    # The git cache goes to the benchmark's own folder, like the run records.
    os.environ["XDG_CACHE_HOME"] = state
    large = large_tree_seed(Path(state))
    try:
        medians = interleaved(
            {
                "direct test": direct_test,
                "python -c pass": python_pass,
                "sandbox": sandbox_only,
                "sandbox with report and guard": sandbox_guarded,
                "sandbox, git seed of 5,000 files / 50 MB": sandbox_large_tree(large),
                "direct true": direct_true,
                "sandbox running true": sandbox_true,
                "agent run --plan": cli(run_plan, env),
                "agent run (loopback provider)": cli(["run", "--json"], env),
                "agent --help": cli(["--help"], env),
                "agent seeds list": cli(["seeds", "list"], env),
            },
            repeat,
        )
        imports = import_time(run_plan, env)
    finally:
        server.shutdown()
        shutil.rmtree(state, ignore_errors=True)
    figures = []
    for name, (reference, target) in FIGURES.items():
        ratio = medians[name] / medians[reference]
        figures.append(
            {
                "figure": name,
                "ms": round(medians[name] * 1000, 1),
                "reference": reference,
                "reference_ms": round(medians[reference] * 1000, 1),
                "ratio": round(ratio, 2),
                "target": target,
                "met": None if target is None else ratio <= target,
            }
        )
    result: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "repeat": repeat,
        "figures": figures,
        "imports_agent_run_plan": imports,
    }
    if with_throughput:
        result["throughput"] = throughput()
    return result


def as_text(result: dict[str, Any]) -> str:
    lines = [f"median of {result['repeat']} interleaved rounds", ""]
    lines.append(f"{'figure':<40} {'ms':>8}  {'reference':<29} {'ms':>7} {'ratio':>7}  target")
    for row in result["figures"]:
        target = "-" if row["target"] is None else f"{row['target']}x"
        verdict = "" if row["met"] is None else (" met" if row["met"] else " MISSED")
        lines.append(
            f"{row['figure']:<40} {row['ms']:>8.1f}  {row['reference']:<29} "
            f"{row['reference_ms']:>7.1f} {row['ratio']:>6.2f}x  {target}{verdict}"
        )
    imports = result["imports_agent_run_plan"]
    largest = ", ".join(f"{name} {ms}" for name, ms in imports["largest_ms"].items())
    lines += ["", f"agent run --plan imports: {imports['total_ms']} ms ({largest})"]
    if "throughput" in result:
        for row in result["throughput"]["candidates"]["rows"]:
            lines.append(
                f"candidates K={row['candidates']}: {row['tests_per_second']} tests/s, "
                f"peak {row['peak_mib']} MiB"
            )
        for row in result["throughput"]["batch"]["rows"]:
            lines.append(
                f"batch --jobs {row['jobs']}: {row['tasks_per_second']} tasks/s "
                f"({row['passed']}/{row['tasks']} passed)"
            )
    return "\n".join(lines)


def write_results(path: Path, result: dict[str, Any], command: str) -> None:
    """Replace the overhead section of RESULTS.md with this run's."""
    info = result["machine"]
    section = "\n".join(
        [
            "## Overhead (`benchmarks/overhead.py`)",
            "",
            f"- date: {result['date']}",
            f"- machine: {info['cpus']} CPU cores ({info['cpu']}), {info['memory_gib']} GiB "
            f"memory, {info['system']}, Python {info['python']}",
            f"- command: `{command}`",
            "",
            "```",
            as_text(result),
            "```",
            "",
        ]
    )
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n\n"
    start = text.find("## Overhead (`benchmarks/overhead.py`)")
    if start == -1:
        heading_end = text.find("\n## ")
        start = end = heading_end + 1 if heading_end != -1 else len(text)
    else:
        following = text.find("\n## ", start + 1)
        end = following + 1 if following != -1 else len(text)
    path.write_text(text[:start] + section + "\n" + text[end:].lstrip("\n"), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--throughput", action="store_true", help="add candidates and batch")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--write", type=Path, metavar="RESULTS.md", help="record this run there")
    options = parser.parse_args()
    result = measure(options.repeat, options.throughput)
    print(json.dumps(result, indent=2) if options.json else as_text(result))
    if options.write is not None:
        command = "uv run python benchmarks/overhead.py " + " ".join(sys.argv[1:])
        write_results(options.write, result, command.strip())


if __name__ == "__main__":
    main()

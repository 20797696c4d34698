"""The suite's strength in numbers: line coverage and a mutation score. Not a CI gate.

    uv run python tests/measure.py coverage [PYTEST ARGS]   # the whole suite by default
    uv run python tests/measure.py mutation [MODULE ...]    # every module of MUTATION by default

``coverage`` runs the suite under coverage.py, the ``agent`` processes the tests
start included (coverage's ``patch = subprocess``), and prints the report per
file; the data and an HTML report go to ``build/coverage``. A sandbox is
started by the agent's own process (no launcher of its own), so its start is
measured where the agent runs.

``mutation`` runs mutmut on each module of :data:`MUTATION` with the tests that
cover it, in a copy of the source under ``build/mutation`` (the working tree is
never changed), and prints the score per module and every mutant that survived.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COVERAGE = ROOT / "build" / "coverage"

#: Module label -> (the files mutated, the tests that must kill their mutants). Sandbox tests
#: are too slow to run once per mutant; the fast ones named here run in-process.
MUTATION = {
    "contract": (
        ["core/plans/contract.py"],
        ["tests/test_contract.py", "tests/test_contract_messages.py"],
    ),
    "transport": (
        ["plugins/openai_planner/transport.py", "plugins/openai_planner/call.py"],
        ["tests/test_provider_faults.py", "tests/test_provider_records.py"],
    ),
    "limits": (["plugins/local_sandbox/limits.py"], ["tests/test_limit_decisions.py"]),
    "cgroups": (["plugins/local_sandbox/cgroups.py"], ["tests/test_cgroup_layouts.py"]),
}
MUTATION_WORK = ROOT / "build" / "mutation"


def _coverage(pytest_args: list[str]) -> int:
    shutil.rmtree(COVERAGE, ignore_errors=True)
    COVERAGE.mkdir(parents=True)
    data_dir = Path(tempfile.mkdtemp(prefix="agent-coverage-"))
    rcfile = COVERAGE / "coveragerc"
    rcfile.write_text(
        "[run]\n"
        f"source =\n    {ROOT / 'core'}\n    {ROOT / 'plugins'}\n"
        "parallel = true\n"
        "patch = subprocess\n"
        f"data_file = {data_dir / '.coverage'}\n"
        "[report]\nshow_missing = true\nskip_empty = true\n"
        f"[html]\ndirectory = {COVERAGE / 'html'}\n"
    )
    run = [sys.executable, "-m", "coverage", "run", f"--rcfile={rcfile}"]
    suite = subprocess.run([*run, "-m", "pytest", *(pytest_args or ["tests"])], check=False)
    tool = [sys.executable, "-m", "coverage"]
    subprocess.run([*tool, "combine", f"--rcfile={rcfile}", str(data_dir)], check=True)
    shutil.move(data_dir / ".coverage", COVERAGE / ".coverage")
    shutil.rmtree(data_dir)
    report = [f"--rcfile={rcfile}", f"--data-file={COVERAGE / '.coverage'}"]
    subprocess.run([*tool, "html", *report], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*tool, "report", *report], check=True)
    _totals(tool, report)
    print(f"pytest exited with {suite.returncode}; HTML report: {COVERAGE / 'html/index.html'}")
    return suite.returncode


def _totals(tool: list[str], report: list[str]) -> None:
    for label, pattern in (("core/", "core/*"), ("plugins/", "plugins/*"), ("all", "*")):
        total = subprocess.run(
            [*tool, "report", *report, f"--include={ROOT}/{pattern}", "--format=total"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(f"line coverage, {label}: {total}%")


def _mutation(labels: list[str]) -> int:
    """mutmut on each module, in a copy where ``sandboxed_coding_agent`` is a plain folder."""
    scores = []
    for label in labels:
        files, tests = MUTATION[label]
        work = MUTATION_WORK / label
        shutil.rmtree(work, ignore_errors=True)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for folder in ("core", "plugins"):
            shutil.copytree(ROOT / folder, work / "sandboxed_coding_agent" / folder, ignore=ignore)
        shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
        (work / "pyproject.toml").write_text(
            "[tool.mutmut]\n"
            'source_paths = ["sandboxed_coding_agent"]\n'
            f"only_mutate = {[f'sandboxed_coding_agent/{file}' for file in files]!r}\n"
            'also_copy = ["tests"]\n'
            f"pytest_add_cli_args_test_selection = {tests!r}\n"
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
            "[tool.pytest.ini_options]\n"
            'testpaths = ["tests"]\n'
        )
        mutmut = [sys.executable, "-m", "mutmut"]
        with (work / "mutmut-run.log").open("w") as log:
            print(f"{label}: mutmut run (progress in {work / 'mutmut-run.log'})", flush=True)
            subprocess.run([*mutmut, "run"], cwd=work, check=False, stdout=log, stderr=log)
        listed = subprocess.run(
            [*mutmut, "results", "--all", "true"],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        status: dict[str, list[str]] = {}
        for line in listed.splitlines():
            name, _, result = line.strip().rpartition(": ")
            if name:
                status.setdefault(result, []).append(name)
        total = sum(len(names) for names in status.values())
        killed = len(status.get("killed", [])) + len(status.get("timeout", []))
        scores.append(
            f"{label}: {killed}/{total} mutants killed ({100 * killed / max(total, 1):.1f}%)"
        )
        for result, names in sorted(status.items()):
            if result not in ("killed", "timeout"):
                print(f"{label}: {len(names)} {result}:", *names, sep="\n    ")
    print(*scores, sep="\n")
    print(f"See a mutant: cd {MUTATION_WORK}/<module> && uv run mutmut show <name>")
    return 0


def main(argv: list[str]) -> int:
    os.chdir(ROOT)
    match argv:
        case ["coverage", *rest]:
            return _coverage(rest)
        case ["mutation", *rest]:
            return _mutation(rest or list(MUTATION))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

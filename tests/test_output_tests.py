"""Output tests: compared by the agent outside the sandbox, so nothing inside can forge them.

Every test runs a seed folder with ``agent run --seed FOLDER --plan PLAN --json``
in a real sandbox, as a user would, except the manifest checks (``agent seeds
show``) and the repair feedback (the fake provider behind the built-in planner).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, AgentRun, FakeProvider
from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
    ControlPlane,
    control_plane_fixture,
    lazycloud_env_fixture,
    subprocess_environment,
)

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
#: A program reading two numbers from its arguments (or its stdin) and printing their sum.
PROGRAM = (
    "import sys\nfrom calc import add\n"
    "numbers = sys.argv[1:] or sys.stdin.read().split()\n"
    "print(add(int(numbers[0]), int(numbers[1])))\n"
)
#: A value equal to everything: an int subclass whose == always says yes.
EQUAL_TO_EVERYTHING = (
    "class Anything(int):\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n"
    "    __hash__ = int.__hash__\n"
    "def add(a, b):\n    return Anything(a - b)\n"
)
CALL_TESTS = (
    '[[output_tests]]\nname = "add-2-3"\ncall = "calc:add"\nargs = [2, 3]\nexpect = 5\n'
    '[[output_tests]]\nname = "add-hidden"\ncall = "calc:add"\nargs = [-7, 19]\n'
    "expect = 12\nhidden = true\n"
)
PROGRAM_TESTS = (
    'output_command = ["python", "prog.py"]\n'
    '[[output_tests]]\nname = "argv"\nargv = ["2", "3"]\nstdout = "5\\n"\n'
    '[[output_tests]]\nname = "stdin"\nstdin = "40 2"\nstdout = "42\\n"\nhidden = true\n'
)
UNITTEST = (
    "import unittest\nfrom calc import add\n\n\n"
    "class Add(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)


def seed_folder(
    folder: Path,
    manifest: str,
    *,
    test_command: str | None = '["python", "-m", "unittest", "-v", "test_calc"]',
    files: dict[str, str] | None = None,
) -> Path:
    """A seed whose editable ``calc.py`` has a broken ``add``, with these manifest lines."""
    folder.mkdir()
    (folder / "calc.py").write_text(BROKEN)
    (folder / "test_calc.py").write_text(UNITTEST)
    (folder / "prog.py").write_text(PROGRAM)
    for path, text in (files or {}).items():
        (folder / path).write_text(text)
    command = "" if test_command is None else f"test_command = {test_command}\n"
    (folder / "seed.toml").write_text(
        f'name = "{folder.name}"\ndescription = "add() with output tests"\n'
        'tests = ["test_calc.py"]\neditable = ["calc.py"]\n'
        f'default_prompt = "Fix add."\n{command}{manifest}'
    )
    return folder


def run_plan(
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    seed: Path,
    text: str,
    *options: str,
    timeout: float = 120,
) -> AgentRun:
    plan = write_plan({"files": [{"path": "calc.py", "content": text}]})
    return run_agent(
        "run",
        "--seed",
        str(seed),
        "--plan",
        str(plan),
        "--json",
        "--no-policy",
        "python-ast",
        *options,
        timeout=timeout,
    )


def outputs(done: AgentRun) -> dict[str, dict[str, Any]]:
    return {test["name"]: test for test in done.json()["output_tests"]}


@pytest.fixture
def call_seed(tmp_path: Path) -> Path:
    return seed_folder(tmp_path / "calls", CALL_TESTS)


def test_the_unchanged_code_fails_its_output_tests(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], call_seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, call_seed, BROKEN)

    assert done.returncode == 1, done.stderr
    assert done.json()["tests_passed"] is False
    assert outputs(done) == {
        "add-2-3": {
            "name": "add-2-3",
            "hidden": False,
            "passed": False,
            "why": "returned -1; expected 5",
        },
        # A hidden test says how it failed in general terms, never a value.
        "add-hidden": {"name": "add-hidden", "hidden": True, "passed": False, "why": "wrong value"},
    }


def test_the_honest_fix_passes_every_output_test(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], call_seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, call_seed, FIXED)

    assert done.returncode == 0, done.stderr
    result = done.json()
    assert result["tests_passed"] is True
    assert [(t["name"], t["passed"], t["why"]) for t in result["output_tests"]] == [
        ("add-2-3", True, None),
        ("add-hidden", True, None),
    ]
    assert [t["passed"] for t in result["attempts"][0]["output_tests"]] == [True, True]


def test_a_value_equal_to_everything_passes_the_framework_but_fails_the_output_tests(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], call_seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, call_seed, EQUAL_TO_EVERYTHING)

    result = done.json()
    # assertEqual believed it: the framework's report is all passes...
    assert result["test_report"]["status"] == "complete"
    assert {t["outcome"] for t in result["test_report"]["tests"]} == {"passed"}
    # ...but what the call returned is no plain JSON value, compared outside the sandbox.
    assert result["tests_passed"] is False
    assert done.returncode == 1
    found = outputs(done)
    assert found["add-2-3"]["passed"] is False
    assert found["add-2-3"]["why"].startswith("not plain JSON")
    assert found["add-hidden"]["why"] == "not plain JSON"


def test_a_forged_plain_value_still_fails_a_hidden_output_test(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], call_seed: Path
) -> None:
    # Code that answers the visible test by its arguments cannot know the hidden value.
    forged = "def add(a, b):\n    return 5 if (a, b) == (2, 3) else a - b\n"

    done = run_plan(run_agent, write_plan, call_seed, forged)

    assert done.json()["tests_passed"] is False
    assert outputs(done)["add-2-3"]["passed"] is True
    assert outputs(done)["add-hidden"]["passed"] is False


def test_values_compare_type_for_type(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = seed_folder(
        tmp_path / "types",
        '[[output_tests]]\ncall = "calc:add"\nargs = [2, 3]\nexpect = 5\n',
        test_command=None,
    )

    as_float = run_plan(run_agent, write_plan, seed, "def add(a, b):\n    return float(a + b)\n")
    as_true = run_plan(run_agent, write_plan, seed, "def add(a, b):\n    return True\n")

    assert outputs(as_float)["output-1"]["why"] == "returned 5.0; expected 5"
    assert outputs(as_true)["output-1"]["why"] == "returned true; expected 5"
    assert as_float.json()["tests_passed"] is False
    assert as_true.json()["tests_passed"] is False


def test_a_hidden_expected_value_is_nowhere_inside_the_sandbox(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    # The marker is only a hidden test's expected value and expected stdout; the plan
    # spells it in two halves, so that its own file does not hold it.
    marker = "QZX-hidden-expect-7c1e"
    seed = seed_folder(
        tmp_path / "secret",
        'output_command = ["python", "calc.py"]\n'
        f'[[output_tests]]\nname = "h1"\ncall = "calc:add"\nargs = [1, 1]\nexpect = "{marker}"\n'
        "hidden = true\n"
        f'[[output_tests]]\nname = "h2"\nargv = ["x"]\nstdout = "{marker}\\n"\nhidden = true\n'
        "[limits]\ntest_timeout_seconds = 600\n",
        test_command='["python", "calc.py"]',
    )
    search = (
        "import os, sys\n"
        "MARK = ('QZX-hidden-' + 'expect-7c1e').encode()\n"
        "def scan():\n"
        "    found = []\n"
        "    for name, value in os.environ.items():\n"
        "        if MARK in (name + '=' + value).encode():\n"
        "            found.append('environment')\n"
        "    for pid in os.listdir('/proc'):\n"
        "        for part in ('cmdline', 'environ'):\n"
        "            try:\n"
        "                with open(f'/proc/{pid}/{part}', 'rb') as f:\n"
        "                    if MARK in f.read():\n"
        "                        found.append(f'/proc/{pid}/{part}')\n"
        "            except OSError:\n"
        "                pass\n"
        "    read = 0\n"
        "    for root, folders, files in os.walk('/'):\n"
        "        if root == '/':\n"
        "            folders[:] = [f for f in folders if f not in ('proc', 'sys', 'dev')]\n"
        "        for name in files:\n"
        "            path = os.path.join(root, name)\n"
        "            try:\n"
        "                if os.path.islink(path) or not os.path.isfile(path):\n"
        "                    continue\n"
        "                if os.path.getsize(path) > 1 << 22:\n"
        "                    continue\n"
        "                with open(path, 'rb') as f:\n"
        "                    data = f.read()\n"
        "                read += 1\n"
        "                if MARK in data:\n"
        "                    found.append(path)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return found, read\n"
        "def add(a, b):\n"
        "    with open('/tmp/probe-scan', 'w') as f:\n"
        "        f.write(repr(scan()))\n"
        "    return a + b\n"
        "if __name__ == '__main__' and len(sys.argv) == 1:\n"
        "    found, read = scan()\n"
        "    print('COMMAND', 'FOUND' if found else 'NOTFOUND', found, read, 'files read')\n"
        "    try:\n"
        "        print('PROBE', open('/tmp/probe-scan').read())\n"
        "    except OSError:\n"
        "        print('PROBE did not scan')\n"
    )

    done = run_plan(run_agent, write_plan, seed, search, timeout=900)

    output = done.json()["test_output"]
    assert "COMMAND NOTFOUND [] " in output, output
    assert "PROBE ([], " in output, output
    assert done.json()["tests_passed"] is False
    assert marker not in done.stdout.replace(f'expect = "{marker}"', "")


def test_an_early_exit_with_an_exit_status_command_fails_the_output_tests(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = seed_folder(
        tmp_path / "exit-status",
        CALL_TESTS,
        test_command='["python", "check.py"]',
        files={"check.py": "from calc import add\nassert add(2, 3) == 5\n"},
    )

    done = run_plan(run_agent, write_plan, seed, "import os\nos._exit(0)\n")

    result = done.json()
    assert result["test_exit_code"] == 0  # the exit status alone would have passed it
    assert result["tests_passed"] is False
    assert done.returncode == 1
    assert [t["passed"] for t in result["output_tests"]] == [False, False]


def test_a_seed_with_output_tests_alone_runs_its_program(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = seed_folder(tmp_path / "alone", PROGRAM_TESTS, test_command=None)

    broken = run_plan(run_agent, write_plan, seed, BROKEN)
    fixed = run_plan(run_agent, write_plan, seed, FIXED)

    assert broken.returncode == 1, broken.stderr
    assert outputs(broken)["argv"]["why"] == 'wrote "-1\\n" to stdout; expected "5\\n"'
    assert outputs(broken)["stdin"]["why"] == "wrong output"
    assert fixed.returncode == 0, fixed.stderr
    assert [t["passed"] for t in fixed.json()["output_tests"]] == [True, True]
    assert fixed.json()["evidence"] == "output"


def test_a_program_must_end_with_the_exit_code_it_declares(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    seed = seed_folder(
        tmp_path / "exit-code",
        PROGRAM_TESTS.replace('stdout = "5\\n"', 'stdout = "5\\n"\nexit_code = 3'),
        test_command=None,
    )

    done = run_plan(run_agent, write_plan, seed, FIXED)

    assert outputs(done)["argv"]["why"] == "exited with 0; expected 3"
    assert done.json()["tests_passed"] is False


def test_a_probe_that_hangs_is_killed_and_fails(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    # Each probe may take a third of the 45 s (two probes, and a share for the command):
    # the hanging one is killed at 15 s, the next one still runs.
    seed = seed_folder(
        tmp_path / "hangs",
        CALL_TESTS + "[limits]\ntest_timeout_seconds = 45\n",
        test_command=None,
    )
    hangs = (
        "import time\ndef add(a, b):\n"
        "    while (a, b) == (2, 3):\n        time.sleep(1)\n"
        "    return a + b\n"
    )

    done = run_plan(run_agent, write_plan, seed, hangs)

    result = done.json()
    assert result["test_timed_out"] is False  # the probe was killed, not the sandbox
    assert outputs(done)["add-2-3"]["why"] == "timed out, and was killed"
    assert outputs(done)["add-hidden"]["passed"] is True
    assert result["tests_passed"] is False


def test_feedback_on_a_hidden_output_test_names_it_and_carries_no_value(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    seed = seed_folder(tmp_path / "feedback", CALL_TESTS)
    wrong = "def add(a, b):\n    return a * b + 1000\n"
    provider.reply_plan(("calc.py", wrong))
    provider.reply_plan(("calc.py", FIXED))

    done = run_agent("run", "--seed", str(seed), "--attempts", "2", "--json")

    assert done.returncode == 0, done.stderr
    feedback = str(provider.requests[1].json()["messages"][-1]["content"])
    assert "output test 'add-2-3' failed: returned 1006; expected 5" in feedback
    assert "hidden output test 'add-hidden' failed" in feedback
    assert "wrong value" not in feedback  # nor how it failed, which could tell a value apart
    # Neither what the hidden call returned (-133 + 1000) nor what it had to (12).
    assert "867" not in feedback
    assert "12" not in feedback.replace("'add-hidden'", "")
    assert "-7" not in feedback
    assert "19" not in feedback


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        ('[[output_tests]]\ncall = "calc:add"\nexpect = 5\ncolour = 1\n', "colour: unknown key"),
        ('[[output_tests]]\ncall = "calc.add"\nexpect = 5\n', "call: must be module:function"),
        ('[[output_tests]]\ncall = "calc:add"\n', "needs expect"),
        (
            'output_command = ["python", "prog.py"]\n[[output_tests]]\nargv = ["2", 3]\n'
            'stdout = ""\n',
            "argv: must be a list",
        ),
        (
            'output_command = ["python", "prog.py"]\n[[output_tests]]\nargv = []\n',
            "needs stdout",
        ),
        (
            'output_command = ["python", "prog.py"]\n[[output_tests]]\ncall = "calc:add"\n'
            'expect = 5\nargv = ["1"]\nstdout = ""\n',
            "not both nor neither",
        ),
        ("[[output_tests]]\nhidden = true\n", "not both nor neither"),
        ('[[output_tests]]\nargv = ["1"]\nstdout = ""\n', "no output_command"),
        (
            '[[output_tests]]\nname = "same"\ncall = "calc:add"\nexpect = 5\n' * 2,
            "another output test has that name",
        ),
        ('[[output_tests]]\ncall = "calc:add"\nexpect = nan\n', "no nan or inf"),
    ],
)
def test_a_bad_output_test_is_one_clear_manifest_error(
    lines: str, problem: str, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    seed = seed_folder(tmp_path / "bad", lines)

    done = run_agent("seeds", "show", str(seed))

    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert problem in done.stderr
    assert "line " in done.stderr
    assert "output_tests[" in done.stderr
    assert "Traceback" not in done.stderr


def test_too_many_output_tests_are_refused(
    run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    many = "".join(
        f'[[output_tests]]\nname = "t{n}"\ncall = "calc:add"\nexpect = 1\n' for n in range(101)
    )
    seed = seed_folder(tmp_path / "many", many)

    done = run_agent("seeds", "show", str(seed))

    assert done.returncode == 2
    assert "101 tests; at most 100" in done.stderr


def test_the_summary_lists_the_output_tests_and_why_they_failed(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], call_seed: Path
) -> None:
    plan = write_plan({"files": [{"path": "calc.py", "content": BROKEN}]})

    done = run_agent("run", "--seed", str(call_seed), "--plan", str(plan))

    assert done.returncode == 1, done.stderr
    assert (
        "output tests:    0 of 2 passed; failed: add-2-3 (returned -1; expected 5), "
        "add-hidden (hidden, wrong value)"
    ) in done.stdout


def test_a_batch_line_and_its_report_list_the_calculators_output_tests(
    provider: FakeProvider, run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    provider.reply_plan(("calculator.py", EQUAL_TO_EVERYTHING.replace("a - b", "a + b")))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"seed": "calculator"}\n')
    out = tmp_path / "results.jsonl"
    html = tmp_path / "report.html"

    batch = run_agent("batch", str(tasks), "--out", str(out))
    shown = run_agent("report", str(out), "--html", str(html))

    assert batch.returncode in (0, 1), batch.stderr
    line = json.loads(out.read_text("utf-8"))
    assert line["result"]["tests_passed"] is False
    assert [(t["name"], t["passed"]) for t in line["result"]["output_tests"]] == [
        ("add-2-3", False),
        ("add-hidden", False),
    ]
    assert shown.returncode == 0, shown.stderr
    page = html.read_text("utf-8")
    assert "output tests: 0 of 2 passed" in page
    assert "add-hidden (hidden, not plain JSON)" in page
    # The attempt's own line is left as it was.
    assert '<details class="attempt" open><summary>attempt 1 ' in page
    assert "· o · f ·" not in page


def test_seeds_show_names_the_output_tests_but_none_of_their_values(
    run_agent: Callable[..., AgentRun], tmp_path: Path
) -> None:
    seed = seed_folder(tmp_path / "shown", PROGRAM_TESTS, test_command=None)

    shown = run_agent("seeds", "show", str(seed))
    as_json = run_agent("seeds", "show", str(seed), "--json")

    assert shown.returncode == 0, shown.stderr
    assert "test command:   none: 2 output tests" in shown.stdout
    assert "output tests:   2 (1 hidden): argv, stdin (hidden)" in shown.stdout
    assert "verdict:        its 2 output tests alone" in shown.stdout
    row = as_json.json()
    assert row["test_command"] == []
    assert row["output_command"] == ["python", "prog.py"]
    assert [test["name"] for test in row["output_tests"]] == ["argv", "stdin"]
    assert "42" not in as_json.stdout  # the hidden test's expected stdout


def test_a_run_record_keeps_the_output_tests_verdict_for_its_replay(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], call_seed: Path
) -> None:
    done = run_plan(run_agent, write_plan, call_seed, EQUAL_TO_EVERYTHING)

    replayed = run_agent("replay", done.json()["run_id"], "--json")

    (chosen,) = [test for test in replayed.json()["tests"] if test["chosen"]]
    # The framework's report alone would have recorded a pass.
    assert chosen["recorded_passed"] is False
    assert chosen["passed"] is False
    assert chosen["matches"] is True


def signed_report(key: str, *records: dict[str, Any]) -> str:
    """Report lines as the harness writes them: ``HMAC BODY``, each body a JSON object."""
    lines = []
    for record in records:
        body = json.dumps(record, sort_keys=True)
        mac = hmac.new(bytes.fromhex(key), body.encode(), hashlib.sha256).hexdigest()
        lines.append(f"{mac} {body}\n")
    return "".join(lines)


PROBE_LINE = {"kind": "output", "name": "add-2-3", "result": '{"value": 5}', "truncated": False}
GUARD_LINES = ({"kind": "test", "id": "t.T.test", "outcome": "passed", "seq": 1},)


def test_the_probes_lines_come_first_numbered_apart_from_the_frameworks() -> None:
    from sandboxed_coding_agent.core.verdicts.evidence import TestHarness
    from sandboxed_coding_agent.core.verdicts.output_tests import OutputTest, compare_all
    from sandboxed_coding_agent.core.verdicts.verdict import read_report

    key = "11" * 32
    harness = TestHarness(key=key, framework="unittest")
    test = OutputTest(name="add-2-3", call="calc:add", args="[2, 3]", expect="5")
    first = signed_report(
        key, {**PROBE_LINE, "seq": 1}, *GUARD_LINES, {"kind": "end", "seq": 2, "code": 0}
    )
    # A probe's line written after the framework's began is not the harness's.
    late = signed_report(
        key, *GUARD_LINES, {**PROBE_LINE, "seq": 2}, {"kind": "end", "seq": 3, "code": 0}
    )
    forged = signed_report("22" * 32, {**PROBE_LINE, "seq": 1})

    assert read_report(first, harness).status == "complete"
    assert compare_all([test], first, key)[0].passed is True
    assert read_report(late, harness).status == "tampered"
    assert compare_all([test], late, key)[0].passed is False
    assert compare_all([test], forged, key)[0].why == (
        "the harness reported no result for it (the sandbox ended first)"
    )


REMOTE = ("--runner", "lazycloud", "--json", "--no-policy", "python-ast")


def test_the_lazycloud_runner_runs_the_probes_and_brings_their_report_back(
    agent_env: dict[str, str],
    lazycloud_env: dict[str, str],
    control_plane: ControlPlane,
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    environment = subprocess_environment(lazycloud_env, base=agent_env)
    # Output tests alone: the harness writes a report only for them.
    seed = seed_folder(tmp_path / "remote", CALL_TESTS, test_command=None)
    hack = EQUAL_TO_EVERYTHING.replace("a - b", "a + b")

    def run(text: str) -> Any:
        plan = write_plan({"files": [{"path": "calc.py", "content": text}]})
        done = subprocess.run(
            [str(AGENT), "run", "--seed", str(seed), "--plan", str(plan), *REMOTE],
            env=environment,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return json.loads(done.stdout)

    hacked, fixed = run(hack), run(FIXED)

    assert hacked["tests_passed"] is False
    assert [t["why"] for t in hacked["output_tests"]] == [
        "not plain JSON: a Anything",
        "not plain JSON",
    ]
    assert fixed["tests_passed"] is True
    assert [t["passed"] for t in fixed["output_tests"]] == [True, True]


@pytest.mark.parametrize(
    "fields",
    [
        {"call": "calc:add", "expect": "five"},  # not JSON
        {"call": "calc.add", "expect": "5"},
        {"call": "calc:add", "expect": "5", "args": '{"a": 1}'},
        {"call": "calc:add", "expect": "5", "stdout": "5\n"},
        {"argv": ("1",)},  # no stdout
    ],
)
def test_a_plugins_output_test_is_checked_as_the_manifests_are(fields: dict[str, Any]) -> None:
    from sandboxed_coding_agent.core.verdicts.output_tests import OutputTest

    with pytest.raises(ValueError, match=r"."):
        OutputTest(name="t", **fields)


def test_a_report_line_that_is_not_ascii_fails_the_run_without_an_internal_error(
    run_agent: Callable[..., AgentRun], write_plan: Callable[..., Path], call_seed: Path
) -> None:
    # Written by the code under test to every pipe it holds: the harness's report among them.
    scribble = (
        "import os, stat\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        if stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
        "            os.write(fd, '\\u00e9 x\\n'.encode())\n"
        "    except OSError:\n"
        "        pass\n" + FIXED
    )

    done = run_plan(run_agent, write_plan, call_seed, scribble)

    assert done.returncode == 1, done.stderr
    assert done.json()["tests_passed"] is False
    assert done.json()["test_report"]["status"] == "tampered"

"""Every verdict names its evidence: ``exit-status``, ``framework`` or ``output``, the weakest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun

from sandboxed_coding_agent.core.verdicts.evidence import TestReport, evidence_tier

FIXED = "def add(a, b):\n    return a + b\n"


def _seed(folder: Path, test_command: str, check: str) -> Path:
    folder.mkdir()
    (folder / "calculator.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "check.py").write_text(check)
    (folder / "seed.toml").write_text(
        f'name = "{folder.name}"\ndescription = "add()"\ntests = ["check.py"]\n'
        f'editable = ["calculator.py"]\ntest_command = {test_command}\n'
        'default_prompt = "Fix add."\n'
    )
    return folder


@pytest.mark.parametrize(
    ("command", "check", "tier", "said"),
    [
        (
            '["python", "check.py"]',
            "import sys\nfrom calculator import add\nsys.exit(add(2, 3) != 5)\n",
            "exit-status",
            "the test command's exit status alone",
        ),
        (
            '["python", "-m", "unittest", "check"]',
            "import unittest\nfrom calculator import add\n\n"
            "class T(unittest.TestCase):\n    def test_add(self):\n"
            "        self.assertEqual(add(2, 3), 5)\n",
            "framework",
            "unittest reported 1 passed (1 test needed, from the unpatched seed's run)",
        ),
    ],
)
def test_a_run_names_the_evidence_its_verdict_rests_on(
    command: str,
    check: str,
    tier: str,
    said: str,
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    seed = _seed(tmp_path / "tiers", command, check)
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED}]})

    as_json = run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json")
    as_text = run_agent("run", "--seed", str(seed), "--plan", str(plan))

    assert as_json.returncode == 0, as_json.stderr
    assert as_json.json()["evidence"] == tier
    assert f"evidence:        {tier}: {said}" in as_text.stdout


OUTPUT_TEST = '[[output_tests]]\ncall = "calculator:add"\nargs = [2, 3]\nexpect = 5\n'


@pytest.mark.parametrize(
    ("command", "tier"),
    [
        (None, "output"),
        ('["python", "check.py"]', "exit-status"),
        ('["python", "-m", "unittest", "check"]', "framework"),
    ],
)
def test_output_tests_name_the_output_tier_alone_and_the_weaker_beside_a_test_command(
    command: str | None,
    tier: str,
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    check = (
        "import sys\nfrom calculator import add\nsys.exit(add(2, 3) != 5)\n"
        if tier == "exit-status"
        else "import unittest\nfrom calculator import add\n\n"
        "class T(unittest.TestCase):\n    def test_add(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n"
    )
    seed = _seed(tmp_path / "outputs", command or '["python", "check.py"]', check)
    manifest = seed / "seed.toml"
    text = manifest.read_text()
    if command is None:
        text = text.replace('test_command = ["python", "check.py"]\n', "")
    manifest.write_text(text + OUTPUT_TEST)
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED}]})

    done = run_agent("run", "--seed", str(seed), "--plan", str(plan), "--json")

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.json()["evidence"] == tier


def test_a_verdict_resting_on_more_than_one_tier_names_the_weakest() -> None:
    framework = TestReport("unittest", "complete")
    exit_status = TestReport(None, "exit-status")

    assert evidence_tier(framework) == "framework"
    assert evidence_tier(framework, output_tests=True) == "framework"
    assert evidence_tier(exit_status, output_tests=True) == "exit-status"
    assert evidence_tier(None, test_command=False, output_tests=True) == "output"

"""Every verdict names its evidence: ``exit-status``, ``framework`` or ``output``, the weakest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun

from sandboxed_coding_agent.core.evidence import TestReport, evidence_tier

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


def test_a_verdict_resting_on_more_than_one_tier_names_the_weakest() -> None:
    framework = TestReport("unittest", "complete")
    exit_status = TestReport(None, "exit-status")

    assert evidence_tier(framework) == "framework"
    assert evidence_tier(framework, output_tests=True) == "framework"
    assert evidence_tier(exit_status, output_tests=True) == "exit-status"
    assert evidence_tier(None, test_command=False, output_tests=True) == "output"

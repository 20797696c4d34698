"""Edit formats through the real CLI: `agent run --edit-format`, `--plan` with a diff, a task
line's `edit_format`, a large module fixed by a one-line edit, all against a loopback
provider and tested in a real sandbox."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import FIXED_CALCULATOR, AgentRun, FakeProvider

RunAgent = Callable[..., AgentRun]
CALC_DIFF = (
    "diff --git a/calculator.py b/calculator.py\n"
    "index c8e341f..bac4ccd 100644\n"
    "--- a/calculator.py\n"
    "+++ b/calculator.py\n"
    "@@ -3,4 +3,4 @@\n"
    " \n"
    " def add(left, right):\n"
    '     """Return the sum of left and right."""\n'
    "-    return left - right\n"
    "+    return left + right\n"
)
FIX_EDIT = {"path": "calculator.py", "search": "left - right", "replace": "left + right"}


def request_json(provider: FakeProvider, index: int = 0) -> Any:
    return json.loads(provider.requests[index].body)


def test_search_replace_answer_through_agent_run_passes_and_the_prompt_asks_for_it(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply_content(json.dumps({"edits": [FIX_EDIT]}))

    run = run_agent("run", "--edit-format", "search-replace", "--structured-output", "--json")

    assert run.returncode == 0, run.stderr
    assert run.json()["changed_files"] == ["calculator.py"]
    body = request_json(provider)
    system = body["messages"][0]["content"]
    assert '{"edits": [{"path": "<an editable path>", "search"' in system
    assert '"content"' not in system
    assert "files change; the changed files together stay under 12000 bytes" in system
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["edits"]
    assert schema["properties"]["edits"]["items"]["properties"]["path"]["enum"] == ["calculator.py"]


def test_udiff_answer_through_agent_run_passes_and_the_prompt_asks_for_it(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply_content(
        "Here is the fix:\n```json\n" + json.dumps({"diff": CALC_DIFF}) + "\n```"
    )

    run = run_agent("run", "--edit-format", "udiff", "--structured-output", "--json")

    assert run.returncode == 0, run.stderr
    body = request_json(provider)
    assert '{"diff": "<a unified diff' in body["messages"][0]["content"]
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["diff"]


def test_whole_files_stay_the_default_and_an_answer_in_another_format_is_taken(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply_content(json.dumps({"diff": CALC_DIFF}))

    run = run_agent("run", "--json")  # asked for whole files, answered with a diff

    assert run.returncode == 0, run.stderr
    system = request_json(provider)["messages"][0]["content"]
    assert '{"files": [{"path": "<an editable path>", "content"' in system


def test_edit_that_does_not_match_is_refused_and_the_repair_is_told_why_verbatim(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    wrong = {"path": "calculator.py", "search": "return left -right", "replace": "x"}
    provider.reply_content(json.dumps({"edits": [wrong]}))
    provider.reply_content(json.dumps({"edits": [FIX_EDIT]}))

    run = run_agent("run", "--edit-format", "search-replace", "--attempts", "2", "--json")

    assert run.returncode == 0, run.stderr
    first, second = run.json()["attempts"]
    assert first["verdict"] == "rejected"
    assert [r["rule"] for r in first["rejections"]] == ["edit-no-match"]
    feedback = request_json(provider, 1)["messages"][-1]["content"]
    assert "[patch-contract:edit-no-match] (calculator.py) edit 1's search text" in feedback
    assert second["verdict"] == "passed"


def test_edit_that_does_not_match_ends_the_run_as_a_refused_plan(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply_content(json.dumps({"edits": [{**FIX_EDIT, "search": "left"}]}))

    run = run_agent("run", "--edit-format", "search-replace")

    assert run.returncode == 4, run.stderr
    assert "edit-ambiguous" in run.stderr
    assert "occurs 3 times, at lines 4, 5, 6" in run.stderr
    assert "Traceback" not in run.stderr


def test_edit_of_the_test_file_is_still_refused_by_the_contract(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    cheat = {"path": "check_calculator.py", "search": "5)", "replace": "-1)"}
    provider.reply_content(json.dumps({"edits": [cheat]}))

    run = run_agent("run", "--edit-format", "search-replace")

    assert run.returncode == 4, run.stderr
    assert "path-not-editable" in run.stderr
    assert run.sandboxes == []


def test_edit_format_is_checked_and_not_given_with_a_plan_file(
    provider: FakeProvider, run_agent: RunAgent, write_plan: Callable[..., Path]
) -> None:
    bad = run_agent("run", "--edit-format", "diff")
    assert bad.returncode == 2, bad.stderr
    assert "--edit-format must be one of whole, search-replace, udiff, not 'diff'" in bad.stderr

    plan = write_plan(CALC_DIFF)
    with_plan = run_agent("run", "--plan", str(plan), "--edit-format", "udiff")
    assert with_plan.returncode == 2, with_plan.stderr
    assert "--edit-format needs a planner" in with_plan.stderr
    assert provider.requests == []


def test_plan_file_written_by_git_diff_is_tested(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calculator.py").write_text(FIXED_CALCULATOR.replace("left + right", "left - right"))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "seed"], check=True)
    (repo / "calculator.py").write_text(FIXED_CALCULATOR)
    patch = tmp_path / "fix.patch"
    patch.write_bytes(subprocess.run([*git, "diff"], check=True, capture_output=True).stdout)

    run = run_agent("run", "--plan", str(patch), "--json")

    assert run.returncode == 0, run.stderr
    assert run.json()["changed_files"] == ["calculator.py"]
    assert provider.requests == []


def test_plan_file_whose_diff_does_not_apply_is_a_refused_plan(
    run_agent: RunAgent, write_plan: Callable[..., Path]
) -> None:
    plan = write_plan(CALC_DIFF.replace("-    return left - right", "-    return left * right"))

    run = run_agent("run", "--plan", str(plan))

    assert run.returncode == 4, run.stderr
    assert "[patch-contract:diff-no-match] (calculator.py) hunk 1" in run.stderr
    assert "Traceback" not in run.stderr


def test_plan_file_that_is_neither_json_nor_a_diff_is_a_usage_error_naming_the_file(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    prose = write_plan("Fix calculator.add so the test passes.\n")
    empty = write_plan("")
    binary = tmp_path / "plan.bin"
    binary.write_bytes(b"\xff\xfe\x00plan")
    cases = [(prose, "read as JSON: Expecting value"), (empty, "it is empty")]
    cases.append((binary, "it is not UTF-8 text"))

    for plan, why in cases:
        run = run_agent("run", "--plan", str(plan))
        as_json = run_agent("run", "--plan", str(plan), "--json")

        assert run.returncode == 2, run.stderr
        assert run.stderr.startswith(
            f"agent: usage error: plan file '{plan}' is neither a plan's JSON nor a unified "
            f"diff ({why}"
        ), run.stderr
        assert len(run.stderr.splitlines()) == 1
        assert "policy" not in run.stderr
        assert as_json.returncode == 2
        assert as_json.json()["error"]["kind"] == "usage"
        assert run.sandboxes == []
    # A JSON plan of the wrong shape is still a plan a policy judges.
    assert run_agent("run", "--plan", str(write_plan([1, 2]))).returncode == 4


def test_plan_file_diff_never_tells_a_hidden_test_from_an_absent_file(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    folder = tmp_path / "hidden"
    folder.mkdir()
    (folder / "calculator.py").write_text(FIXED_CALCULATOR)
    (folder / "test_calculator.py").write_text("import unittest\n")
    (folder / "held_out_test.py").write_text("import unittest\n")
    (folder / "seed.toml").write_text(
        'name = "held-out"\ndescription = "a hidden test"\n'
        'tests = ["test_calculator.py"]\nhidden_tests = ["held_out_test.py"]\n'
        'editable = ["calculator.py"]\n'
        'test_command = ["python", "-m", "unittest", "discover", "-p", "*test*.py"]\n'
        'default_prompt = "Fix add."\n'
    )

    def diff_of(path: str) -> Path:
        return write_plan(f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-import unittest\n+x\n")

    hidden = run_agent("run", "--seed", str(folder), "--plan", str(diff_of("held_out_test.py")))
    absent = run_agent("run", "--seed", str(folder), "--plan", str(diff_of("no_such_test.py")))

    assert hidden.returncode == absent.returncode == 4
    said = [
        run.stderr.replace("held_out_test.py", "P").replace("no_such_test.py", "P")
        for run in (hidden, absent)
    ]
    assert said[0] == said[1]
    assert "edit-no-file" in said[0]


def large_seed(folder: Path) -> Path:
    """A seed with a module of about 150 KB whose one function returns the wrong number."""
    folder.mkdir()
    functions = [
        f'def value_{n}():\n    """The number {n}, for the test."""\n    return {n}\n\n\n'
        for n in range(2000)
    ]
    functions[1500] = functions[1500].replace("return 1500", "return 1501")
    (folder / "numbers.py").write_text("".join(functions))
    (folder / "test_numbers.py").write_text(
        "import unittest\n\nfrom numbers import value_1500\n\n\n"
        "class Numbers(unittest.TestCase):\n"
        "    def test_value(self):\n        self.assertEqual(value_1500(), 1500)\n"
    )
    (folder / "seed.toml").write_text(
        'name = "large-module"\ndescription = "a 150 KB module with one wrong line"\n'
        'files = ["numbers.py", "test_numbers.py"]\n'
        'tests = ["test_numbers.py"]\neditable = ["numbers.py"]\n'
        'test_command = ["python", "-m", "unittest", "-v", "test_numbers"]\n'
        'default_prompt = "Fix value_1500."\n'
        "[limits]\nmax_total_bytes = 400000\n"
    )
    return folder


def test_one_line_edit_fixes_a_large_module_with_a_small_answer(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    seed = large_seed(tmp_path / "large")
    module = (seed / "numbers.py").read_text()
    assert len(module.encode()) > 140_000
    search = 'def value_1500():\n    """The number 1500, for the test."""\n    return 1501\n'
    answer = json.dumps(
        {
            "edits": [
                {"path": "numbers.py", "search": search, "replace": search.replace("1501", "1500")}
            ]
        }
    )
    whole = json.dumps(
        {"files": [{"path": "numbers.py", "content": module.replace("return 1501", "return 1500")}]}
    )
    assert len(answer.encode()) < 400 < 140_000 < len(whole.encode())
    provider.reply_content(answer)

    run = run_agent("run", "--seed", str(seed), "--edit-format", "search-replace", "--json")

    assert run.returncode == 0, run.stderr
    result = run.json()
    assert result["changed_files"] == ["numbers.py"]
    assert "-    return 1501\n+    return 1500" in result["diff"]
    assert len(run.tested_sandboxes) == 1


def write_tasks(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_task_line_edit_format_asks_for_it_and_a_bad_one_is_an_invalid_line(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply_content(json.dumps({"diff": CALC_DIFF}))
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "diffed", "edit_format": "udiff"},
            {"seed": "calculator", "id": "bad", "edit_format": "patch"},
        ],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1, run.stderr  # the bad line
    assert "line 2: 'edit_format' must be one of whole, search-replace, udiff" in run.stderr
    [line] = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    assert (line["id"], line["status"]) == ("diffed", "passed")
    assert len(provider.requests) == 1
    assert '{"diff": "<a unified diff' in request_json(provider)["messages"][0]["content"]


def test_validate_reads_a_diff_and_names_the_hunk_that_does_not_apply(
    run_agent: RunAgent, write_plan: Callable[..., Path]
) -> None:
    good = write_plan(CALC_DIFF)
    bad = write_plan(CALC_DIFF.replace(" def add(left, right):", " def add(a, b):"))

    run = run_agent("validate", str(good), str(bad))

    assert run.returncode == 4, run.stderr
    assert f"ok {good}" in run.stdout
    assert f"rejected {bad}:" in run.stdout
    assert "diff-no-match" in run.stdout

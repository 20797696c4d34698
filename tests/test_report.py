"""`agent report`: batches' results as one self-contained, escaped HTML page."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from conftest import API_KEY, FIXED_CALCULATOR, AgentRun, FakeProvider, plan_json

RunAgent = Callable[..., AgentRun]
BROKEN_CALCULATOR = FIXED_CALCULATOR.replace("left + right", "left - right")


class Page(HTMLParser):
    """The page as a browser's parser reads it: its tags, and the text of its scripts."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._in: str | None = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "style":
            self.styles.append(data)

    def policy(self) -> dict[str, str]:
        (content,) = [
            a["content"] or ""
            for tag, a in self.tags
            if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy"
        ]
        return dict(part.strip().split(" ", 1) for part in content.split(";"))


def sha256_source(text: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"


def task_bodies(page: str) -> dict[str, str]:
    """Each task's part of the page (its row and its details), by the task's name."""
    found = re.findall(r'<tbody class="task" (.*?)</tbody>', page, re.S)
    return {re.search(r'data-id="([^"]*)"', body)[1]: body for body in found}  # type: ignore[index]


def order_of(page: str) -> list[str]:
    return re.findall(r'<tbody class="task"[^>]*? data-id="([^"]*)"', page)


HOSTILE = '<script>alert("pwned")</script><img src="http://example.com/x.png">'


def test_report_shows_pass_rate_rows_and_escaped_details_with_nothing_remote(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    # The model's file prints markup when the test imports it: hostile test output.
    fixed = FIXED_CALCULATOR + f"\nprint({HOSTILE!r})\n"
    provider.reply_content(plan_json(("calculator.py", fixed)))
    provider.reply(401, {"error": {"message": "bad key"}})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"seed": "calculator", "id": "good"}\n{"seed": "calculator"}\n', "utf-8")
    out = tmp_path / "results.jsonl"
    assert run_agent("batch", str(tasks), "--out", str(out), "--jobs", "1").returncode == 1
    html_file = tmp_path / "report.html"

    run = run_agent("report", str(out), "--html", str(html_file))

    assert run.returncode == 0, run.stderr
    page = html_file.read_text(encoding="utf-8")
    assert "50.0%" in page
    bodies = task_bodies(page)
    assert '<span class="status s-passed"' in bodies["good"]
    assert ">provider-error</span>" in bodies["line-2"]
    # One word for the outcome: the error's details are named as the badge names it.
    assert "<summary>provider-error</summary>" in bodies["line-2"]
    assert "(the agent&#x27;s error kind: provider)" in bodies["line-2"]
    assert "&lt;script&gt;alert(" in bodies["good"]
    # Each test the framework reported, with what the verdict rests on.
    assert "unittest reported 1 passed" in page
    assert "passed   check_calculator.AddTest.test_adds_two_numbers" in page
    parsed = Page(page)
    # One script, the page's own, and no element that loads anything.
    assert [a for tag, a in parsed.tags if tag == "script"] == [{}]
    assert not {"img", "link", "iframe", "object", "embed"} & {name for name, _ in parsed.tags}
    assert not [attrs for _, attrs in parsed.tags if {"src", "href"} & set(attrs)]
    assert parsed.policy()["default-src"] == "'none'"
    # Without the script every task is listed, its details openable, the filters hidden.
    assert not [a for tag, a in parsed.tags if tag == "tbody" and "hidden" in a]
    assert ("div", {"id": "controls", "hidden": None}) in parsed.tags
    assert page.count("<details><summary>details of ") == 2
    assert json.loads(out.read_text("utf-8").splitlines()[0])["id"] == "good"


def test_the_policy_allows_exactly_the_pages_own_script_and_style_by_hash(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(a_result("a") + "\n", "utf-8")
    html = tmp_path / "page.html"

    assert run_agent("report", str(results), "--html", str(html)).returncode == 0

    parsed = Page(html.read_text("utf-8"))
    policy = parsed.policy()
    (script,) = parsed.scripts
    (style,) = parsed.styles
    assert policy["script-src"] == sha256_source(script)
    assert policy["style-src"] == sha256_source(style)
    assert "unsafe-inline" not in str(policy)
    assert policy["base-uri"] == "'none'"
    # Long lines wrap at spaces, and break a word only when it is wider than the page.
    assert "white-space: pre-wrap; overflow-wrap: anywhere;" in style
    assert "break-all" not in style
    assert "@media (prefers-color-scheme: dark)" in style


def test_report_of_a_missing_file_is_a_usage_error(run_agent: RunAgent, tmp_path: Path) -> None:
    run = run_agent("report", str(tmp_path / "none.jsonl"), "--html", str(tmp_path / "r.html"))
    assert run.returncode == 2
    assert not (tmp_path / "r.html").exists()


def a_result(task_id: str, **changes: Any) -> str:
    """A results line as `agent batch` writes it."""
    fields = {"id": task_id, "line": 1, "seed": "calculator", "status": "failed", "seconds": 1.5}
    return json.dumps({**fields, **changes})


def a_run(**changes: Any) -> dict[str, Any]:
    """A run's result as a results line holds it."""
    fields = {
        "seed": "calculator",
        "instruction": "fix it",
        "planner": "openai",
        "planner_task_id": "plan-1",
        "runner": "local",
        "sandbox_id": "sbx-1",
        "changed_files": ["calculator.py"],
        "diff": "",
        "tests_passed": False,
        "test_exit_code": 1,
        "test_output": "",
        "test_output_truncated": False,
        "test_timed_out": False,
    }
    return {**fields, **changes}


def refused(run: AgentRun, words: str) -> None:
    assert run.returncode == 2, run.stderr
    assert words in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_report_refuses_to_write_over_its_results_file(run_agent: RunAgent, tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(a_result("a") + "\n", "utf-8")
    (tmp_path / "hard.html").hardlink_to(results)
    (tmp_path / "link.html").symlink_to(results)
    other = tmp_path / "other.jsonl"
    other.write_text(a_result("b") + "\n", "utf-8")

    for html in ("results.jsonl", "hard.html", "link.html"):
        run = run_agent("report", str(other), str(results), "--html", str(tmp_path / html))
        refused(run, "is the results file")
    assert results.read_text("utf-8") == a_result("a") + "\n"


def test_report_refuses_an_html_path_that_is_not_a_file(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(a_result("a") + "\n", "utf-8")
    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)

    refused(run_agent("report", str(results), "--html", str(fifo)), "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_report_of_a_file_without_results_or_with_damaged_lines_exits_2(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    cases = {
        "passwd": "root:x:0:0:root:/root:/bin/bash\n",
        "empty": "",
        "damaged": a_result("a") + "\n{not json\n",
        "nan": a_result("a", seconds=float("nan")) + "\n",
        "inf": a_result("a", seconds=float("inf")) + "\n",
        "negative": a_result("a", tokens=-5) + "\n",
        "bad-env": a_result("a", env={"agent_version": 1}) + "\n",
    }
    good = tmp_path / "good.jsonl"
    good.write_text(a_result("g") + "\n", "utf-8")
    for name, text in cases.items():
        results = tmp_path / f"{name}.jsonl"
        results.write_text(text, "utf-8")
        html = tmp_path / f"{name}.html"
        # Alone, or after a good file: a damaged file refuses the whole report.
        for files in ([results], [good, results]):
            run = run_agent("report", *map(str, files), "--html", str(html))
            assert run.returncode == 2, (name, run.stderr)
            assert "Traceback" not in run.stderr
            assert not html.exists(), name
    assert (
        "'seconds' must be a finite number"
        in run_agent(
            "report", str(tmp_path / "nan.jsonl"), "--html", str(tmp_path / "x.html")
        ).stderr
    )


def test_report_refuses_the_same_results_file_named_twice(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(a_result("a") + "\n", "utf-8")
    html = tmp_path / "page.html"

    run = run_agent(
        "report", str(results), str(tmp_path / "." / "results.jsonl"), "--html", str(html)
    )

    refused(run, "name each results file once")
    assert not html.exists()


def test_report_blanks_the_api_key_a_hand_made_results_file_holds(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    env = {"agent_version": "0.1.0", "python": "3", "host": "h", "command_line": ["--k", API_KEY]}
    results.write_text(
        a_result(
            API_KEY,
            prompt=f"use {API_KEY}",
            error={"kind": "usage", "message": API_KEY},
            env=env,
            result=a_run(diff=f"+{API_KEY}", test_output=API_KEY),
        )
        + "\n",
        "utf-8",
    )
    html = tmp_path / "page.html"

    run = run_agent("report", str(results), "--html", str(html))

    assert run.returncode == 0, run.stderr
    page = html.read_text("utf-8")
    assert "[redacted]" in page
    assert API_KEY not in page
    assert API_KEY not in run.stderr


def test_report_shows_each_tasks_resolution_and_how_many_resolved_each_way(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    from test_batch import run_graded_batch

    assert run_graded_batch(provider, run_agent, tmp_path).returncode == 1
    html_file = tmp_path / "report.html"

    run = run_agent("report", str(tmp_path / "results.jsonl"), "--html", str(html_file))

    assert run.returncode == 0, run.stderr
    page = html_file.read_text(encoding="utf-8")
    assert '<option value="resolution" data-type="text">resolution</option>' in page
    for name in ("FULL", "PARTIAL", "NO"):
        assert f"<b>1</b>resolved {name}</div>" in page
    rows = task_bodies(page)
    assert '<span class="status s-FULL" title="resolution">FULL</span>' in rows["full"]
    assert '<span class="status s-PARTIAL" title="resolution">PARTIAL</span>' in rows["partial"]
    assert '<span class="status s-NO" title="resolution">NO</span>' in rows["no"]
    assert "not graded</small>" in rows["ungraded"]
    assert "<summary>graded PARTIAL</summary>" in rows["partial"]
    assert "fail_to_pass failed   tests/test_calc.py::Mul::test_multiplies" in rows["partial"]
    assert "pass_to_pass failed   test_negates (tests.test_calc.Neg.test_negates)" in rows["no"]


def test_report_of_a_batch_without_graded_seeds_shows_no_resolution(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply_content(plan_json(("calculator.py", FIXED_CALCULATOR)))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"seed": "calculator"}\n', "utf-8")
    out = tmp_path / "results.jsonl"
    assert run_agent("batch", str(tasks), "--out", str(out)).returncode == 0
    html_file = tmp_path / "report.html"

    assert run_agent("report", str(out), "--html", str(html_file)).returncode == 0

    page = html_file.read_text(encoding="utf-8")
    assert "resolved FULL" not in page
    assert 'value="resolution"' not in page


def cards_of(page: str) -> dict[str, str]:
    """The headline cards: label -> figure."""
    summary = page.split('<div class="summary">')[1].split("</div>\n</div>")[0] + "</div>"
    return {label: value for value, label in re.findall(r"<b>(.*?)</b>(.*?)</div>", summary)}


def test_report_headline_keeps_the_essential_cards_and_hides_figures_that_are_zero(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    lines = [a_result("a", line=1, status="passed"), a_result("b", line=2, status="passed")]
    results.write_text("\n".join(lines) + "\n", "utf-8")
    html = tmp_path / "report.html"
    assert run_agent("report", str(results), "--html", str(html)).returncode == 0

    cards = cards_of(html.read_text("utf-8"))

    assert cards == {
        "pass rate (2 of 2)": "100.0%",
        "tasks": "2",
        "passed": "2",
        "tokens": "0",
        "task time": "3.0 s",
    }

    spend = {"planner_calls": 2, "prompt_tokens": 80, "completion_tokens": 20, "cost": 0.5}
    lines.append(a_result("c", line=3, status="rejected", tokens=100, spend=spend))
    results.write_text("\n".join(lines) + "\n", "utf-8")
    assert run_agent("report", str(results), "--html", str(html)).returncode == 0

    cards = cards_of(html.read_text("utf-8"))

    assert list(cards) == [
        "pass rate (2 of 3)",
        "tasks",
        "passed",
        "rejected",
        "tokens",
        "prompt / completion",
        "planner calls",
        "cost",
        "task time",
    ]
    assert cards["rejected"] == "1"
    assert cards["cost"] == "$0.5000"

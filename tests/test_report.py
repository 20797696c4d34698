"""`agent report`: a batch's results as one self-contained, escaped HTML page."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from conftest import API_KEY, FIXED_CALCULATOR, AgentRun, FakeProvider, plan_json

RunAgent = Callable[..., AgentRun]


def tags_of(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Every tag of the page as a browser's parser reads it, with its attributes."""
    found: list[tuple[str, dict[str, str | None]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, dict(attrs)))

    Tags().feed(page)
    return found


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
    assert '<span class="status passed">passed</span>' in page
    assert '<span class="status error">provider-error</span>' in page
    assert page.count("<details>") >= 3  # diff, test output, the error
    assert "&lt;script&gt;alert(" in page
    # Each test the framework reported, with what the verdict rests on.
    assert "unittest reported 1 passed" in page
    assert "passed   check_calculator.AddTest.test_adds_two_numbers" in page
    first = json.loads(out.read_text("utf-8").splitlines()[0])
    (test,) = first["result"]["test_report"]["tests"]
    assert test["id"] == "check_calculator.AddTest.test_adds_two_numbers"
    assert test["outcome"] == "passed"
    tags = tags_of(page)
    assert not {"script", "img", "link", "iframe", "object"} & {name for name, _ in tags}
    # Nothing is loaded from anywhere: no src or href attributes, and a policy forbidding it.
    assert not [attrs for _, attrs in tags if {"src", "href"} & set(attrs)]
    assert "default-src 'none'" in page
    assert json.loads(out.read_text("utf-8").splitlines()[0])["id"] == "good"


def test_report_of_a_missing_file_is_a_usage_error(run_agent: RunAgent, tmp_path: Path) -> None:
    run = run_agent("report", str(tmp_path / "none.jsonl"), "--html", str(tmp_path / "r.html"))
    assert run.returncode == 2
    assert not (tmp_path / "r.html").exists()


def a_result(task_id: str, **changes: Any) -> str:
    """A results line as `agent batch` writes it."""
    fields = {"id": task_id, "line": 1, "seed": "calculator", "status": "failed", "seconds": 1.5}
    return json.dumps({**fields, **changes})


def refused(run: AgentRun, words: str) -> None:
    assert run.returncode == 2, run.stderr
    assert words in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_report_refuses_to_write_over_its_results_file(run_agent: RunAgent, tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(a_result("a") + "\n", "utf-8")
    (tmp_path / "hard.html").hardlink_to(results)
    (tmp_path / "link.html").symlink_to(results)

    for html in ("results.jsonl", "hard.html", "link.html"):
        run = run_agent("report", str(results), "--html", str(tmp_path / html))
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
    }
    for name, text in cases.items():
        results = tmp_path / f"{name}.jsonl"
        results.write_text(text, "utf-8")
        html = tmp_path / f"{name}.html"
        run = run_agent("report", str(results), "--html", str(html))
        assert run.returncode == 2, (name, run.stderr)
        assert "Traceback" not in run.stderr
        assert not html.exists(), name
    assert (
        "'seconds' must be a finite number"
        in run_agent(
            "report", str(tmp_path / "nan.jsonl"), "--html", str(tmp_path / "x.html")
        ).stderr
    )


def test_report_blanks_the_api_key_a_hand_made_results_file_holds(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(
        a_result(API_KEY, prompt=f"use {API_KEY}", error={"kind": "usage", "message": API_KEY})
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
    assert "<th>resolution</th>" in page
    for name in ("FULL", "PARTIAL", "NO"):
        assert f"<div><b>1</b>resolved {name}</div>" in page
    rows = {row.split("</code>", 1)[0]: row for row in page.split("<tr><td><code>")[1:]}
    assert '<span class="status passed">FULL</span>' in rows["full"]
    assert '<span class="status partial">PARTIAL</span>' in rows["partial"]
    assert '<span class="status failed">NO</span>' in rows["no"]
    assert "<td><small" in rows["ungraded"]
    assert "<summary>graded PARTIAL</summary>" in rows["partial"]
    assert "fail_to_pass failed   tests/test_calc.py::Mul::test_multiplies" in rows["partial"]
    assert "pass_to_pass failed   test_negates (tests.test_calc.Neg.test_negates)" in rows["no"]


def test_report_of_a_batch_without_graded_seeds_shows_no_resolution_counts(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply_content(plan_json(("calculator.py", FIXED_CALCULATOR)))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"seed": "calculator"}\n', "utf-8")
    out = tmp_path / "results.jsonl"
    assert run_agent("batch", str(tasks), "--out", str(out)).returncode == 0
    html_file = tmp_path / "report.html"

    assert run_agent("report", str(out), "--html", str(html_file)).returncode == 0

    assert "resolved FULL" not in html_file.read_text(encoding="utf-8")

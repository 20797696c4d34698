"""`agent report`: a batch's results as one self-contained, escaped HTML page."""

from __future__ import annotations

import json
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

from conftest import FIXED_CALCULATOR, AgentRun, FakeProvider, plan_json

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

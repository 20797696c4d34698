"""The report in a real browser: its script runs under its own Content-Security-Policy,
sorts and filters as the address asks, and hostile text never runs."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from chromium import Chromium
from conftest import AgentRun
from test_report import a_result, a_run

RunAgent = Callable[..., AgentRun]

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium")

PWN = "<script>document.documentElement.setAttribute('data-pwned', '1')</script>"


def run_chromium(page: Path, fragment: str) -> tuple[str, str]:
    """The DOM Chromium builds from the page after its scripts ran, and what it logged."""
    import shutil
    import subprocess
    import tempfile

    chromium = shutil.which("chromium")
    assert chromium is not None
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                chromium,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=2000",
                "--dump-dom",
                f"{page.as_uri()}#{fragment}",
            ],
            capture_output=True,
            text=True,
            timeout=25,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def test_the_pages_script_runs_in_chromium_and_sorts_and_filters_as_the_address_asks(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    lines = [
        a_result("t1", line=1, status="passed", tokens=10),
        a_result(
            "t2",
            line=2,
            tokens=30,
            result=a_run(diff=f"-x\n+</script>{PWN}\n", test_output="the-needle"),
        ),
        a_result("t3", line=3, tokens=20, prompt=f"</script>{PWN}"),
    ]
    results.write_text("\n".join(lines) + "\n", "utf-8")
    html = tmp_path / "report.html"
    assert run_agent("report", str(results), "--html", str(html)).returncode == 0

    dom, log = run_chromium(html, "sort=-tokens&status=failed")

    assert "Refused to execute" not in log
    root = re.search(r"<html[^>]*>", dom)
    assert root is not None
    assert 'data-script="ran"' in root[0]
    assert 'data-sorted="-tokens"' in root[0]
    assert 'data-shown="2"' in root[0]
    assert "data-pwned" not in root[0]
    bodies = re.findall(r'<tbody class="task"[^>]*>', dom)
    assert [re.search(r'data-id="(\w+)"', b)[1] for b in bodies] == ["t2", "t3", "t1"]  # type: ignore[index]
    assert ["hidden" in b for b in bodies] == [False, False, True]
    assert re.search(r'<th data-sort="tokens"[^>]*aria-sort="descending"', dom)
    assert '<div id="controls">' in dom  # shown once the script runs

    # A search of each task's text, its details included.
    dom, log = run_chromium(html, "q=THE-NEEDLE")
    root = re.search(r"<html[^>]*>", dom)
    assert root is not None
    assert 'data-shown="1"' in root[0]
    shown = re.findall(r'<tbody class="task"[^>]*>', dom)
    assert ["hidden" in b for b in shown] == [True, False, True]


LONG = "x" * 400


def wide_results(path: Path) -> Path:
    """Results as wide as real ones get: long IDs and model names, unbroken lines in a
    diff, a test output and a refused answer, prices, and a task that ended in an error."""
    spend = {
        "planner_calls": 3,
        "prompt_tokens": 1234567,
        "completion_tokens": 234567,
        "cost": 12.5,
    }
    refused = {
        "number": 1,
        "verdict": "rejected",
        "planner_task_id": "plan-" + "f" * 40,
        "rejections": [{"policy": "contract", "rule": "path-not-editable", "message": LONG}],
        "usage": {"prompt_tokens": 4000, "completion_tokens": 400},
        "answer": '{"files": [{"path": "' + LONG + '"}]}',
    }
    lines = [
        a_result(
            f"django__django-{n}-{LONG[:60]}",
            line=n,
            seed=f"django__django-{n}-{LONG[:50]}",
            model=f"provider/model-with-a-very-long-name-{n}-{LONG[:40]}",
            planner="openai-compatible-planner",
            runner="local-sandbox-runner",
            tokens=1469134,
            spend=spend,
            prompt="Fix it. " + "word " * 200,
            result=a_run(
                diff=f"-x\n+{LONG * 5}\n",
                test_output=f"{LONG * 5}\n" + "line " * 300,
                model=f"answered/{LONG[:80]}",
                planner_seconds=12345.6,
                sandbox_seconds=45678.9,
            ),
        )
        for n in (1, 2)
    ]
    lines.append(
        a_result(
            "rejected-" + LONG[:80],
            line=3,
            status="rejected",
            error={
                "kind": "policy",
                "message": LONG,
                "candidates": [{"number": 1, "attempts": [refused]}],
            },
        )
    )
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


#: The page's widths, every task's details opened: the document's, the window's, the
#: right edge of the last cell of each task row, and of every box of text.
MEASURE = """
(function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  var right = function (e) { return e.getBoundingClientRect().right; };
  return {
    scroll: document.documentElement.scrollWidth,
    window: window.innerWidth,
    client: document.documentElement.clientWidth,
    lastCells: Array.from(document.querySelectorAll("tr.row > td:last-child")).map(right),
    boxes: Array.from(document.querySelectorAll("pre, select, table, dl")).map(right),
    diffs: Array.from(document.querySelectorAll("pre.diff, pre.log")).map(function (p) {
      return [p.scrollWidth, p.clientWidth];
    })
  };
})()
"""


def test_report_fits_a_1280_pixel_window_and_wide_text_scrolls_in_its_own_box(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = wide_results(tmp_path / "results.jsonl")
    html = tmp_path / "report.html"
    assert run_agent("report", str(results), "--html", str(html)).returncode == 0

    with Chromium(1280, 900) as browser:
        browser.open(html)
        seen = browser.value(MEASURE)

    assert seen["window"] == 1280
    assert seen["scroll"] <= seen["window"], seen
    assert seen["scroll"] <= seen["client"], seen
    assert len(seen["lastCells"]) == 3
    assert all(right <= seen["client"] for right in seen["lastCells"]), seen["lastCells"]
    assert all(right <= seen["client"] for right in seen["boxes"]), seen["boxes"]
    # A diff's and an output's long lines are kept whole: their own box scrolls.
    assert seen["diffs"]
    assert all(width > shown for width, shown in seen["diffs"]), seen["diffs"]


def in_view(task: str) -> str:
    """Whether the task's details are open and its row is at the top of the window."""
    return f"""
(function () {{
  var body = document.getElementById({task!r});
  var top = body.getBoundingClientRect().top;
  return {{
    open: body.querySelector("tr.more details").open,
    top: top,
    seen: top >= 0 && top < window.innerHeight / 2,
    scrolled: window.scrollY
  }};
}})()
"""


def many_tasks(path: Path, count: int = 40) -> Path:
    lines = [
        a_result(f"t{n}", line=n, result=a_run(test_output="out\n" * 30))
        for n in range(1, count + 1)
    ]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def test_a_task_id_in_the_address_opens_that_task_and_scrolls_to_it(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = many_tasks(tmp_path / "results.jsonl")
    html = tmp_path / "report.html"
    assert run_agent("report", str(results), "--html", str(html)).returncode == 0

    with Chromium(1280, 900) as browser:
        browser.open(html, "t30")
        browser.settle()
        loaded = browser.value(in_view("t30"))
        closed = browser.value(in_view("t5"))
        browser.value("location.hash = 't5'")
        browser.settle()
        changed = browser.value(in_view("t5"))
        browser.value("location.hash = 't38'")
        browser.settle()
        again = browser.value(in_view("t38"))

    assert loaded["open"], loaded
    assert loaded["seen"], loaded
    assert loaded["scrolled"] > 0
    assert not closed["open"]  # only the task asked for
    assert changed["open"], changed
    assert changed["seen"], changed
    assert again["open"], again
    assert again["seen"], again
    assert again["scrolled"] > changed["scrolled"]


def test_several_models_get_a_task_by_model_grid_whose_outcomes_open_each_task(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    lines = [
        a_result("fix-m1", line=1, model="m1", status="passed", prompt="Fix add."),
        a_result("fix-m2", line=2, model="m2", prompt="Fix add."),
        a_result("other-m1", line=3, model="m1", prompt=f"Other {PWN}"),
        *(a_result(f"pad{n}", line=3 + n, model="m1", prompt="Pad.") for n in range(1, 30)),
        a_result("fix-m2-again", line=40, model="m2", prompt="Fix add.", status="passed"),
    ]
    results.write_text("\n".join(lines) + "\n", "utf-8")
    html = tmp_path / "report.html"
    assert run_agent("report", str(results), "--html", str(html)).returncode == 0
    page = html.read_text("utf-8")

    grid = page.split('<table class="grid" id="grid">')[1].split("</table>")[0]
    heads = re.findall(r"<th>(.*?)</th>", grid)
    assert heads == ["work", "<code>m1</code>", "<code>m2</code>"]
    rows = re.findall(r"<tr><td>(.*?)</tr>", grid)
    assert len(rows) == 3  # Fix add., Other..., Pad.
    fix = next(r for r in rows if "Fix add." in r)
    cells = fix.split("</td><td>")
    assert re.findall(r'href="#([^"]+)"', cells[1]) == ["fix-m1"]
    assert re.findall(r'href="#([^"]+)"', cells[2]) == ["fix-m2", "fix-m2-again"]
    other = next(r for r in rows if "Other" in r)
    assert "not run" in other.split("</td><td>")[2]
    assert "&lt;script&gt;" in other
    assert "<script>document" not in grid

    with Chromium(1280, 900) as browser:
        browser.open(html)
        browser.value("document.querySelector('#grid a[href=\"#fix-m2-again\"]').click()")
        browser.settle()
        opened = browser.value(in_view("fix-m2-again"))
        fits = browser.value("document.documentElement.scrollWidth <= window.innerWidth")
        pwned = browser.value("document.documentElement.hasAttribute('data-pwned')")
    assert opened["open"], opened
    assert opened["seen"], opened
    assert fits
    assert not pwned


def test_a_report_of_one_model_has_no_grid(run_agent: RunAgent, tmp_path: Path) -> None:
    results = many_tasks(tmp_path / "results.jsonl", 3)
    html = tmp_path / "report.html"
    assert run_agent("report", str(results), "--html", str(html)).returncode == 0
    assert 'class="grid"' not in html.read_text("utf-8")

"""The report in a real browser: its script runs under its own Content-Security-Policy,
sorts and filters as the address asks, and hostile text never runs."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
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

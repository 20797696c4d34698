"""What the report holds: every attempt with its feedback, coloured diffs, the commands to
dig deeper, pass rates by model, seed and file, several results files as one, the
environment, hostile text shown as text, and a batch of thousands of tasks kept readable."""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import API_KEY, FIXED_CALCULATOR, AgentRun, FakeProvider
from test_models import answer_by_model, write_tasks
from test_report import Page, a_result, a_run, order_of, sha256_source, task_bodies

from sandboxed_coding_agent.core.batches.environment import REDACTED, scrub_command_line

RunAgent = Callable[..., AgentRun]
BROKEN_CALCULATOR = FIXED_CALCULATOR.replace("left + right", "left * right")


def report(run_agent: RunAgent, tmp_path: Path, *results: Path) -> str:
    html = tmp_path / "report.html"
    run = run_agent("report", *map(str, results), "--html", str(html))
    assert run.returncode == 0, run.stderr
    return html.read_text("utf-8")


def test_report_lists_every_attempt_with_its_feedback_coloured_diff_and_commands(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply_plan(("check_calculator.py", "print('the test is mine now')\n"))
    provider.reply_plan(("calculator.py", BROKEN_CALCULATOR))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"seed": "calculator", "attempts": 3}])
    out = tmp_path / "results.jsonl"
    assert run_agent("batch", str(tasks), "--out", str(out)).returncode == 0
    line = json.loads(out.read_text("utf-8"))

    page = report(run_agent, tmp_path, out)

    (body,) = task_bodies(page).values()
    attempts = re.split(r'<details class="attempt" open><summary>', body)[1:]
    verdicts = [re.search(r'class="status s-(\w+)"', a)[1] for a in attempts]  # type: ignore[index]
    assert verdicts == ["rejected", "failed", "passed"]
    # The feedback each next attempt got: the rejections, the failed test's output.
    assert "rejections (the feedback the next attempt got)" in attempts[0]
    assert "path-not-editable" in attempts[0]
    assert "its end was the feedback the next attempt got" in attempts[1]
    assert "AssertionError" in attempts[1]
    assert "feedback" not in attempts[2]
    # Each attempt's own tokens and times.
    assert all("321 prompt + 45 completion tokens" in a for a in attempts)
    assert "sandbox " in attempts[1]
    assert "planner " in attempts[1]
    # The diff coloured line by line.
    assert '<span class="del">-    return left - right</span>' in attempts[1]
    assert '<span class="add">+    return left * right</span>' in attempts[1]
    assert '<span class="add">+    return left + right</span>' in attempts[2]
    assert re.search(r'<span class="hunk">@@ -\d+', attempts[2])
    assert '<span class="meta">--- a/calculator.py</span>' in attempts[2]
    # The commands to dig deeper, one per planner call.
    run_id = line["run_id"]
    assert f"<code>agent replay {run_id}</code>" in body
    assert f"<code>agent diff {run_id}</code>" in body
    calls = [a["planner_task_id"] for a in line["result"]["attempts"]]
    assert len(set(calls)) == 3
    for call in calls:
        assert f"<code>agent logs {call}</code>" in body
    # The row: attempts, tokens with prompt / completion, both times.
    row = body.split('<tr class="more">')[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[4] == "3"
    assert cells[5] == "1,098<br><small>963 / 135</small>"
    assert re.fullmatch(
        r"[\d.]+ s<br><small>planner [\d.]+ s<br>sandbox [\d.]+ s</small>", cells[6]
    )
    assert "<br><small>openai \u00b7 local</small>" in cells[3]
    assert 'data-planner-seconds="' in body
    assert 'data-sandbox-seconds="' in body
    # Seven columns, each sorting by its first figure; every figure can be sorted by.
    heads = re.findall(r'<th data-sort="([^"]+)"', page)
    assert heads == ["id", "status", "seed", "model", "attempts", "tokens", "seconds"]
    sorts = re.findall(r'<option value="([^"]+)" data-type', page)
    assert sorts == [
        "order",
        "id",
        "status",
        "seed",
        "model",
        "planner",
        "runner",
        "attempts",
        "tokens",
        "cost",
        "planner-seconds",
        "sandbox-seconds",
        "seconds",
    ]
    # The details are in a full-width row of their own, closed until opened.
    colspan = re.search(r'<tr class="more"><td colspan="(\d+)"><details><summary>', body)
    assert colspan
    assert int(colspan[1]) == len(heads)


def test_report_compares_models_with_tokens_cost_and_times(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_by_model(provider, {"a": FIXED_CALCULATOR, "b": BROKEN_CALCULATOR})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"seed": "calculator", "id": f"{m}{n}", "model": m} for n in (1, 2) for m in "ab"],
    )
    prices = tmp_path / "prices.toml"
    prices.write_text(
        '[models."a"]\ninput_per_mtok = 1\noutput_per_mtok = 2\n'
        '[models."b"]\ninput_per_mtok = 10\noutput_per_mtok = 20\n',
        encoding="utf-8",
    )
    out = tmp_path / "results.jsonl"
    assert run_agent("batch", str(tasks), "--out", str(out), "--prices", str(prices)).returncode

    page = report(run_agent, tmp_path, out)

    table = page.split("<h2>by model</h2>")[1].split("</table>")[0]
    rows = {r[0]: r[1:] for r in re.findall(r"<tr><td><code>(\w+)</code></td>(.*?)</tr>", table)}
    a, b = (re.findall(r'<td class="num">(.*?)</td>', rows[m][0]) for m in "ab")
    assert a[:6] == ["2", "2", "100.0% (2 of 2)", "732", "642 / 90", "$0.0008"]
    assert b[:6] == ["2", "0", "0.0% (0 of 2)", "732", "642 / 90", "$0.0082"]
    assert a[6].endswith(" s")
    assert b[7].endswith(" s")
    assert "<h2>by seed</h2>" not in page  # one seed: nothing to compare
    # The tasks in the tasks file's order, whatever order they ended in.
    assert order_of(page) == ["a1", "b1", "a2", "b2"]
    # Filters for each status, model and seed there is, hidden without the script.
    assert '<div id="controls" hidden>' in page
    assert '<option value="failed">failed (2)</option>' in page
    assert '<option value="b">b</option>' in page
    assert task_bodies(page)["b2"].count('data-model="b"') == 1


def test_report_merges_several_files_naming_ids_that_collide_by_file(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = tmp_path / "a" / "results.jsonl"
    second = tmp_path / "b" / "results.jsonl"
    first.write_text(
        a_result("x", line=3, status="budget", seed="s1")
        + "\n"
        + a_result("only-a", line=2, seed="s1")
        + "\n"
        + a_result("x", line=3, status="passed", seed="s1")  # its resumed run: it counts
        + "\n",
        "utf-8",
    )
    second.write_text(
        a_result("x", line=1, seed="s2", status="passed") + "\n" + a_result("z", line=2) + "\n",
        "utf-8",
    )

    page = report(run_agent, tmp_path, first, second)

    a, b = str(first), str(second)  # both are named results.jsonl: the path tells them apart
    assert order_of(page) == [f"{b}:x", "only-a", "z", f"{a}:x"]
    bodies = task_bodies(page)
    assert ">passed</span>" in bodies[f"{a}:x"]
    assert "budget" not in bodies[f"{a}:x"]
    assert "2 results files: 4 tasks" in page
    assert "<h2>by results file</h2>" in page
    assert "<h2>by seed</h2>" in page
    seeds = page.split("<h2>by seed</h2>")[1].split("</table>")[0]
    assert re.search(r"<code>s2</code></td><td class=\"num\">1</td><td class=\"num\">1</td>", seeds)
    assert f"{a} (3 lines), {b} (2 lines)" in page


def test_report_gives_the_environment_and_the_batch_time_of_a_real_batch(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    answer_by_model(provider, {"m": FIXED_CALCULATOR})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"seed": "calculator", "id": "t1"}, {"bad": 1}, {"seed": "calculator", "id": "t3"}],
    )
    out = tmp_path / "results.jsonl"
    run = run_agent("batch", str(tasks), "--out", str(out), "--model", "m")
    assert run.returncode == 1, run.stderr  # the line that was skipped
    lines = [json.loads(line) for line in out.read_text("utf-8").splitlines()]

    page = report(run_agent, tmp_path, out)

    env = lines[0]["env"]
    assert env["host"] == socket.gethostname()
    assert env["agent_version"] == "0.1.0"
    assert env["python"].endswith(
        ".".join(map(str, sys.version_info[:2])) + "." + str(sys.version_info[2])
    )
    assert env["command_line"][1:] == ["batch", str(tasks), "--out", str(out), "--model", "m"]
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", line["started_at"]) for line in lines
    )
    environment = page.split("<h2>environment</h2>")[1]
    assert f"<dt>host</dt><dd>{socket.gethostname()}</dd>" in environment
    assert "batch --out" not in environment  # the words in order, quoted as a shell would
    assert f"batch {tasks} --out {out} --model m</dd>" in environment
    assert "<dt>first task started</dt>" in environment
    assert "<dt>batch duration</dt>" in environment
    notes = page.split("<h2>notes</h2>")[1]
    assert "1 line of the tasks file before the last one with a result has no result" in notes
    assert "tasks not run yet): 2." in notes
    assert "agent batch names each on its standard error" in notes


def test_report_shows_every_candidate_the_chosen_one_and_those_stopped(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    def attempt(number: int, verdict: str, marker: str) -> dict[str, Any]:
        return {"number": number, "verdict": verdict, "diff": f"+{marker}\n"}

    candidates = [
        {"number": 1, "attempts": [attempt(1, "failed", "C1A1"), attempt(2, "failed", "C1A2")]},
        {"number": 2, "attempts": [attempt(1, "passed", "C2A1")]},
        {"number": 3, "attempts": [attempt(1, "stopped", "C3A1")], "stopped": True},
    ]
    env = {"agent_version": "0", "python": "3", "host": "h", "command_line": ["--key", "s3cret"]}
    results = tmp_path / "results.jsonl"
    results.write_text(
        a_result(
            "k",
            status="passed",
            env=env,
            result=a_run(candidates=candidates, chosen_candidate=2, tests_passed=True),
        )
        + "\n",
        "utf-8",
    )

    page = report(run_agent, tmp_path, results)

    body = task_bodies(page)["k"]
    assert "<h4>candidate 1</h4>" in body
    assert "<h4>candidate 2 (chosen, passed)</h4>" in body
    assert "<h4>candidate 3 (stopped)</h4>" in body
    markers = re.findall(r'<span class="add">\+(C\dA\d)</span>', body)
    assert markers == ["C1A1", "C1A2", "C2A1", "C3A1"]
    assert '<span class="status s-stopped">stopped</span>' in body
    assert re.search(r"<td[^>]*>4</td>", body)  # attempts of every candidate
    assert "s3cret" not in page  # a hand-made line's command line is scrubbed again


def test_report_of_old_lines_without_time_or_environment_says_so(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(a_result("old", result=a_run(diff="-a\n+b\n")) + "\n", "utf-8")

    page = report(run_agent, tmp_path, results)

    assert "not recorded by 1 older results lines" in page
    assert "first task started" not in page
    body = task_bodies(page)["old"]
    assert '<span class="add">+b</span>' in body  # a run without attempts: its one diff
    assert "<td>1</td>" in body.replace(" class=num", "")  # one attempt
    assert "? / ?" in body  # no prompt / completion counts in such a line


def test_the_command_line_a_result_records_leaves_out_what_looks_like_a_secret() -> None:
    argv = [
        "/usr/bin/agent",
        "batch",
        "--api-key",
        "hunter2",
        "--token=abc",
        "OPENAI_API_KEY=xyz",
        "https://user:pa55@example.com/v1",
        f"--note={API_KEY}",
        "ghp_0123456789abcdefABCDEF",
        "tasks.jsonl",
        "--out",
        "results/run-2026-12-04.jsonl",
    ]

    kept = scrub_command_line(argv)

    assert kept == (
        "/usr/bin/agent",
        "batch",
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        f"OPENAI_API_KEY={REDACTED}",
        f"https://user:{REDACTED}@example.com/v1",
        f"--note={REDACTED}",
        REDACTED,
        "tasks.jsonl",
        "--out",
        "results/run-2026-12-04.jsonl",
    )
    assert len(scrub_command_line(["x"] * 1000)) == 65


HOSTILE_DIFF = (
    "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-</script><script>alert(1)</script>\n"
    '+<img src=x onerror="alert(2)">\u2028\u202eevil\u202c<!-- -->\r\n+10%\r50%\r\n'
)


def test_report_shows_hostile_text_as_text_and_bounds_what_a_task_shows(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    huge = "x" * 3_000_000 + " THE-END-OF-THE-OUTPUT"
    attempt = {"number": 1, "verdict": "failed", "diff": HOSTILE_DIFF, "test_output": huge}
    results = tmp_path / "results.jsonl"
    results.write_text(
        a_result(
            '"><script>alert(3)</script>',
            model="m\u202e</option>",
            seed="<b>seed</b>",
            prompt="</script>\u2029<style>*{display:none}</style>",
            result=a_run(diff=HOSTILE_DIFF, test_output=huge, attempts=[attempt]),
            env={"agent_version": "</dd>", "python": "3", "host": "<h1>", "command_line": []},
        )
        + "\n",
        "utf-8",
    )

    page = report(run_agent, tmp_path, results)

    parsed = Page(page)
    assert [t for t, _ in parsed.tags].count("script") == 1
    assert [t for t, _ in parsed.tags].count("style") == 1
    assert [t for t, _ in parsed.tags].count("h1") == 1
    assert "img" not in {t for t, _ in parsed.tags}
    assert "&lt;b&gt;seed&lt;/b&gt;" in page
    shown = '<span class="ctl">&lt;U+{}&gt;</span>'.format
    assert f"m{shown('202E')}&lt;/option&gt;" in page
    (script,) = parsed.scripts
    assert parsed.policy()["script-src"] == sha256_source(script)
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in page
    # What would reorder or break lines is shown as its code point, never as itself.
    for hidden in ("\u2028", "\u2029", "\u202e", "\u202c"):
        assert hidden not in page
    assert f"{shown('202E')}evil{shown('202C')}" in page
    assert shown("2028") in page
    assert "\r" not in page
    # Three million characters of output: the end is shown, and how much was left out.
    assert len(page) < 200_000
    assert "THE-END-OF-THE-OUTPUT" in page
    assert re.search(r"\[\.\.\. [\d,]+ characters left out here \.\.\.\]", page)
    assert "characters of results text were left out of this page" in page


def test_report_bounds_the_names_and_attempts_a_hand_made_line_may_hold(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    attempts = [{"number": n, "verdict": "failed"} for n in range(1, 5_001)]
    attempts[0]["changed_files"] = ["f.py"] * 50_000
    results = tmp_path / "results.jsonl"
    results.write_text(
        a_result(
            "i" * 100_000, seed="s" * 100_000, model="m" * 100_000, result=a_run(attempts=attempts)
        )
        + "\n",
        "utf-8",
    )

    page = report(run_agent, tmp_path, results)

    assert len(page) < 2_000_000
    assert "i" * 299 + "\u2026" in page
    assert "i" * 301 not in page
    assert page.count('<details class="attempt" open>') == 200
    assert "4,800 more attempts are left out of this page." in page


def test_report_of_ten_thousand_tasks_stays_a_page_a_browser_opens(tmp_path: Path) -> None:
    from sandboxed_coding_agent.core.batches.batch import parse_results
    from sandboxed_coding_agent.core.report import PAGE_TEXT_CHARS, ResultsSource, render_report

    output = "FAIL: test_adds\n" + "Traceback line\n" * 300
    lines = [
        a_result(
            f"t{n}",
            line=n,
            model=f"m{n % 3}",
            seed=f"s{n % 7}",
            prompt="make it add " * 50,
            result=a_run(diff=HOSTILE_DIFF * 20, test_output=output),
        )
        for n in range(1, 10_001)
    ]
    results, damaged, _ = parse_results(("\n".join(lines) + "\n").encode())
    assert not damaged

    page = render_report([ResultsSource("results.jsonl", results)], "results.jsonl")

    assert len(order_of(page)) == 10_000
    # Each task's texts bounded: some 2,500 bytes a task with its markup, not 20,000.
    assert len(page.encode()) < 3_000 * 10_000
    assert len(page.encode()) < 5 * PAGE_TEXT_CHARS
    assert page.count("characters left out here") >= 10_000

"""`agent batch` and `agent report` given hostile or mistaken input: one message, exit 2,
and the user's files left as they were; the API key never written."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import AGENT, API_KEY, AgentRun, FakeProvider

RunAgent = Callable[..., AgentRun]


def broken_seed(tmp_path: Path) -> dict[str, str]:
    """A task that ends in a usage error, asking no provider: its seed folder is there (so the
    file is not refused before it starts), but its ``seed.toml`` is not a seed."""
    folder = tmp_path / "broken-seed"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "seed.toml").write_text('name = "broken"\n', "utf-8")
    return {"seed": str(folder)}


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), "utf-8"
    )
    return path


def a_result(task_id: str, **changes: Any) -> str:
    """A results line as `agent batch` writes it."""
    fields = {"id": task_id, "line": 1, "seed": "calculator", "status": "failed", "seconds": 1.5}
    return json.dumps({**fields, **changes})


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def refused(run: AgentRun, words: str) -> None:
    assert run.returncode == 2, run.stderr
    assert words in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


# --- the results file ---------------------------------------------------------------


def test_out_without_resume_refuses_a_file_without_a_trailing_newline(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [broken_seed(tmp_path)])
    precious = tmp_path / "notes.txt"
    precious.write_bytes(b"precious data, no trailing newline")

    refused(run_agent("batch", str(tasks), "--out", str(precious)), "is not empty")
    assert precious.read_bytes() == b"precious data, no trailing newline"


def test_resume_cuts_a_torn_result_line_but_refuses_a_tail_that_is_not_one(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [broken_seed(tmp_path)])
    other = tmp_path / "other.jsonl"
    data = (a_result("done") + "\nnot a result, no newline").encode()
    other.write_bytes(data)

    refused(
        run_agent("batch", str(tasks), "--out", str(other), "--resume"),
        "ends in a line that is not a result",
    )
    assert other.read_bytes() == data

    torn = tmp_path / "torn.jsonl"
    torn.write_text(a_result("done") + "\n" + a_result("line-1")[:30], "utf-8")
    assert run_agent("batch", str(tasks), "--out", str(torn), "--resume").returncode == 1
    ids = [json.loads(line)["id"] for line in torn.read_text("utf-8").splitlines()]
    assert ids == ["done", "line-1"]


def test_out_refuses_a_symbolic_link_and_leaves_what_it_names(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [broken_seed(tmp_path)])
    config = tmp_path / "config"
    config.write_text("TOKEN=abc\n", "utf-8")
    (tmp_path / "link.jsonl").symlink_to(config)
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere")

    refused(run_agent("batch", str(tasks), "--out", str(tmp_path / "link.jsonl")), "symbolic link")
    refused(
        run_agent("batch", str(tasks), "--out", str(tmp_path / "dangling.jsonl")), "symbolic link"
    )
    assert config.read_text("utf-8") == "TOKEN=abc\n"
    assert not (tmp_path / "nowhere").exists()


def test_out_refuses_a_fifo_and_a_device_without_hanging(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [broken_seed(tmp_path)])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    refused(run_agent("batch", str(tasks), "--out", str(fifo), timeout=30), "not a regular file")
    refused(run_agent("batch", str(tasks), "--out", "/dev/null"), "not a regular file")


def test_out_refuses_the_tasks_file_itself(run_agent: RunAgent, tmp_path: Path) -> None:
    tasks = tmp_path / "self.jsonl"
    line = json.dumps({**broken_seed(tmp_path), "id": "only"}).encode()
    tasks.write_bytes(line)
    (tmp_path / "hard.jsonl").hardlink_to(tasks)

    for out in (tasks, tmp_path / "hard.jsonl"):
        refused(run_agent("batch", str(tasks), "--out", str(out), "--resume"), "is the tasks file")
    assert tasks.read_bytes() == line


def test_results_file_is_created_owner_only(run_agent: RunAgent, tmp_path: Path) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [broken_seed(tmp_path)])
    out = tmp_path / "results.jsonl"

    with umask(0o022):
        assert run_agent("batch", str(tasks), "--out", str(out)).returncode == 1
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_second_batch_on_a_results_file_being_written_fails_at_once(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [broken_seed(tmp_path)])
    out = tmp_path / "results.jsonl"
    out.write_text(a_result("done") + "\n", "utf-8")

    # Another batch holds the results file: the lock `agent batch` takes for its whole run.
    with out.open("a") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        started = time.monotonic()
        run = run_agent("batch", str(tasks), "--out", str(out), "--resume", timeout=30)
        assert time.monotonic() - started < 20

    refused(run, "another agent batch is writing")
    assert out.read_text("utf-8") == a_result("done") + "\n"


# --- the tasks file ---------------------------------------------------------------


def test_task_line_values_out_of_bounds_name_the_field_and_its_bounds(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "many-attempts", "attempts": 11},
            {"seed": "calculator", "id": "many-candidates", "candidates": 17},
            {"seed": "calculator", "id": "no-attempts", "attempts": 0},
            {"seed": "calculator", "id": "true-attempts", "attempts": True},
            {"seed": "calculator", "id": "two\nlines"},
        ],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1, run.stderr
    assert "line 1: 'attempts' must be a whole number from 1 to 10, not 11" in run.stderr
    assert "line 2: 'candidates' must be a whole number from 1 to 16, not 17" in run.stderr
    assert "line 3: 'attempts' must be a whole number from 1 to 10, not 0" in run.stderr
    assert "line 4: " in run.stderr
    assert "line 5: 'id' must be 1 to 128 letters" in run.stderr
    assert out.read_text("utf-8") == ""  # no task ran, so no planner was asked


def test_tasks_file_that_is_a_fifo_or_a_device_is_refused_without_hanging(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    fifo = tmp_path / "tasks.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "results.jsonl"

    refused(run_agent("batch", str(fifo), "--out", str(out), timeout=30), "not a regular file")
    refused(run_agent("batch", "/dev/zero", "--out", str(out), timeout=30), "not a regular file")
    assert not out.exists()


def test_task_line_with_a_repeated_key_is_refused(run_agent: RunAgent, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"seed": "no-such-seed", "id": "x", "id": "y"}\n', "utf-8")
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1, run.stderr
    assert "line 1: repeated key 'id'" in run.stderr
    assert out.read_text("utf-8") == ""


def test_task_line_holding_a_lone_surrogate_is_a_bad_line_and_the_batch_goes_on(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "\n".join(
            [
                '{"seed": "./no-such-folder\\udcff"}',
                '{"seed": "calculator", "prompt": "fix \\udcff"}',
                '{"seed": "calculator", "planner": "x\\ud800"}',
                '{"seed": "calculator", "x\\udcff": 1}',
                json.dumps(broken_seed(tmp_path)),
            ]
        )
        + "\n",
        "utf-8",
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert "internal error" not in run.stderr
    for line, field in [(1, "'seed'"), (2, "'prompt'"), (3, "'planner'"), (4, "'x\\udcff'")]:
        assert f"line {line}: {field} holds a lone surrogate" in run.stderr, run.stderr
    assert [json.loads(x)["id"] for x in out.read_text("utf-8").splitlines()] == ["line-5"]


def test_a_result_holding_a_lone_surrogate_is_written_as_utf8_with_json_escapes(
    tmp_path: Path,
) -> None:
    from sandboxed_coding_agent.core.batches.batch import ResultsFile, TaskError, TaskResult

    out = tmp_path / "results.jsonl"
    result = TaskResult(
        id="t",
        line=1,
        seed="calculator",
        status="internal-error",
        seconds=0.5,
        error=TaskError(kind="internal", message="a plugin said \udcff"),
    )
    results = ResultsFile(out, resume=False)
    try:
        results.append(result)
    finally:
        results.close()

    written = out.read_bytes().decode("utf-8")
    assert "\\udcff" in written
    assert json.loads(written)["error"]["message"] == "a plugin said \udcff"


def test_a_byte_order_mark_at_the_start_of_the_tasks_file_is_ignored(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(b"\xef\xbb\xbf" + json.dumps(broken_seed(tmp_path)).encode() + b"\n")
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert "not JSON" not in run.stderr
    assert [json.loads(x)["id"] for x in out.read_text("utf-8").splitlines()] == ["line-1"]


# --- the API key ---------------------------------------------------------------------


def test_the_api_key_is_blanked_in_results_lines_and_messages(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "p", "prompt": f"please use {API_KEY}"},
            {"seed": "calculator", "id": API_KEY},
            f'{{"seed": "calculator", "colour": "{API_KEY}"}}',
        ],
    )
    names = write_lines(
        tmp_path / "names.jsonl",
        [
            {"seed": API_KEY},
            {"seed": "calculator", "id": "r", "runner": API_KEY},
            {"seed": "calculator", "id": "q", "planner": API_KEY},
        ],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))
    named = run_agent("batch", str(names), "--out", str(tmp_path / "other.jsonl"))

    assert run.returncode == 1, run.stderr
    written = out.read_text("utf-8")
    assert len(written.splitlines()) == 2
    assert "[redacted]" in written
    assert API_KEY not in written
    assert named.returncode == 2, named.stderr
    assert named.stderr.count("[redacted]") == 3
    for said in (run.stderr, run.stdout, named.stderr, named.stdout):
        assert API_KEY not in said


# --- names checked before the first task ---------------------------------------------


def test_a_tasks_file_naming_an_unknown_seed_is_refused_before_any_task_starts(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(
        tmp_path / "tasks.jsonl",
        [
            {"seed": "calculator", "id": "fine"},
            {"seed": "calculater", "id": "typo"},
            {"seed": "calculator", "runner": "lcoal"},
            {"seed": str(tmp_path / "no-such-folder")},
        ],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    refused(run, f"agent: usage error: {tasks}: line 2 (task typo): unknown seed 'calculater'; ")
    assert "line 3 (task line-3): unknown runner 'lcoal'" in run.stderr
    assert f"line 4 (task line-4): no seed folder at '{tmp_path / 'no-such-folder'}'" in run.stderr
    assert "known seeds: calculator (`agent seeds list`)" in run.stderr
    assert "known runners: lazycloud, local (`agent runners list`)" in run.stderr
    assert run.stderr.rstrip().endswith("nothing was run")
    assert "line 1" not in run.stderr
    # Nothing ran and nothing was written: no planner call, no sandbox, no results file.
    assert provider.requests == []
    assert run.sandboxes == []
    assert not out.exists()


def test_the_progress_line_says_why_a_task_ended_in_an_error(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    # A folder name so long that the message naming it does not fit a line.
    task = broken_seed(tmp_path / ("x" * 200))
    tasks = write_lines(tmp_path / "tasks.jsonl", [task])
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1, run.stderr
    message = json.loads(out.read_text("utf-8"))["error"]["message"]
    assert len(message) > 200
    [line] = [x for x in run.stderr.splitlines() if x.startswith("agent: [1/1] task line-1")]
    said = re.sub(r".*: usage-error in [0-9.]+ s: ", "", line, count=1)
    assert said == message[:157] + "..."


def test_on_a_terminal_a_task_that_ended_in_an_error_is_said_above_the_bar(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [broken_seed(tmp_path)])
    main, terminal = pty.openpty()
    command = [str(AGENT), "batch", str(tasks), "--out", str(tmp_path / "results.jsonl")]
    with subprocess.Popen(
        command, env=agent_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal
    ) as agent:
        os.close(terminal)
        shown = b""
        while select.select([main], [], [], 60)[0]:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the agent has closed its end
                break
            if not chunk:
                break
            shown += chunk
        assert agent.wait(timeout=60) == 1
    os.close(main)

    text = shown.decode("utf-8")
    assert "passed 0  failed 0  rejected 0  errors 1" in text  # the bar: a terminal it was
    assert "task line-1 (line 1): usage-error: " in text
    assert "broken-seed" in text.partition("usage-error: ")[2]


def test_a_misspelt_key_of_a_task_line_is_named_with_the_key_it_means(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", ['{"sed": "calculator"}'])

    run = run_agent("batch", str(tasks), "--out", str(tmp_path / "results.jsonl"))

    assert run.returncode == 1, run.stderr
    assert (
        f'{tasks} line 1: unknown key "sed" (did you mean "seed"?) @ task; '
        "required field missing @ task.seed; the line was skipped"
    ) in run.stderr

"""`agent batch` and `agent report` given hostile or mistaken input: one message, exit 2,
and the user's files left as they were; the API key never written."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import API_KEY, AgentRun

RunAgent = Callable[..., AgentRun]
MISSING_SEED = {"seed": "no-such-seed"}  # a task that ends in a usage error, asking no provider


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
    tasks = write_lines(tmp_path / "tasks.jsonl", [MISSING_SEED])
    precious = tmp_path / "notes.txt"
    precious.write_bytes(b"precious data, no trailing newline")

    refused(run_agent("batch", str(tasks), "--out", str(precious)), "is not empty")
    assert precious.read_bytes() == b"precious data, no trailing newline"


def test_resume_cuts_a_torn_result_line_but_refuses_a_tail_that_is_not_one(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [MISSING_SEED])
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
    tasks = write_lines(tmp_path / "tasks.jsonl", [MISSING_SEED])
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
    tasks = write_lines(tmp_path / "tasks.jsonl", [MISSING_SEED])
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    refused(run_agent("batch", str(tasks), "--out", str(fifo), timeout=30), "not a regular file")
    refused(run_agent("batch", str(tasks), "--out", "/dev/null"), "not a regular file")


def test_out_refuses_the_tasks_file_itself(run_agent: RunAgent, tmp_path: Path) -> None:
    tasks = tmp_path / "self.jsonl"
    tasks.write_bytes(b'{"seed": "no-such-seed", "id": "only"}')
    (tmp_path / "hard.jsonl").hardlink_to(tasks)

    for out in (tasks, tmp_path / "hard.jsonl"):
        refused(run_agent("batch", str(tasks), "--out", str(out), "--resume"), "is the tasks file")
    assert tasks.read_bytes() == b'{"seed": "no-such-seed", "id": "only"}'


def test_results_file_is_created_owner_only(run_agent: RunAgent, tmp_path: Path) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [MISSING_SEED])
    out = tmp_path / "results.jsonl"

    with umask(0o022):
        assert run_agent("batch", str(tasks), "--out", str(out)).returncode == 1
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_second_batch_on_a_results_file_being_written_fails_at_once(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    tasks = write_lines(tmp_path / "tasks.jsonl", [MISSING_SEED])
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
                json.dumps(MISSING_SEED),
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
    tasks.write_bytes(b"\xef\xbb\xbf" + json.dumps(MISSING_SEED).encode() + b"\n")
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
            {"seed": API_KEY},
            {"seed": "calculator", "id": "r", "runner": API_KEY},
            {"seed": "calculator", "id": "q", "planner": API_KEY},
            f'{{"seed": "calculator", "colour": "{API_KEY}"}}',
        ],
    )
    out = tmp_path / "results.jsonl"

    run = run_agent("batch", str(tasks), "--out", str(out))

    assert run.returncode == 1, run.stderr
    written = out.read_text("utf-8")
    assert len(written.splitlines()) == 5
    assert "[redacted]" in written
    assert API_KEY not in written
    assert API_KEY not in run.stderr
    assert API_KEY not in run.stdout

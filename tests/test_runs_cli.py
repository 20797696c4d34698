"""Records kept in check: `agent runs list`, `agent runs prune`, the automatic prune, and
`agent logs RUN_ID`; every record file read as untrusted."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXED_CALCULATOR, AgentRun, FakeProvider

RunAgent = Callable[..., AgentRun]
DAY = 24 * 3600
OFF = {"SANDBOXED_CODING_AGENT_KEEP_RECORDS_DAYS": "off"}


def state(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sandboxed-coding-agent"


def run_records(tmp_path: Path) -> Path:
    return state(tmp_path) / "run-records"


def planner_records(tmp_path: Path) -> Path:
    return state(tmp_path) / "runs"


def age(path: Path, days: float) -> None:
    """Make ``path`` (not what it may link to) as old as a file written ``days`` ago."""
    then = time.time() - days * DAY
    os.utime(path, (then, then), follow_symlinks=False)


@pytest.fixture
def planned_run(run_agent: RunAgent, write_plan: Callable[..., Path]) -> Callable[..., str]:
    """Run a plan file (no provider); the run's ID. Automatic pruning is off unless asked."""

    def run(content: str = FIXED_CALCULATOR, env: dict[str, str] | None = None) -> str:
        plan = write_plan({"files": [{"path": "calculator.py", "content": content}]})
        done = run_agent("run", "--plan", str(plan), "--json", env=OFF if env is None else env)
        assert done.returncode in (0, 1), done.stderr
        return str(done.json()["run_id"])

    return run


def copy_record(tmp_path: Path, run_id: str, new_id: str, days_old: float) -> Path:
    """A record of run ``new_id``, as the agent would have written it ``days_old`` days ago."""
    record = json.loads((run_records(tmp_path) / f"{run_id}.json").read_text(encoding="utf-8"))
    record["run_id"] = new_id
    path = run_records(tmp_path) / f"{new_id}.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    age(path, days_old)
    return path


def listed(run_agent: RunAgent, *args: str) -> dict[str, Any]:
    done = run_agent("runs", "list", "--json", *args, env=OFF)
    assert done.returncode == 0, done.stderr
    return done.json()  # type: ignore[no-any-return]


# --- agent runs list ----------------------------------------------------------------------------


def test_list_shows_runs_newest_first_with_verdict_seed_time_and_model(
    provider: FakeProvider, run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    passed = planned_run()
    failed = planned_run("def add(left, right):\n    return 0\n")
    provider.reply(401, {"error": {"message": "bad key"}})
    refused = run_agent("run", "--model", "other-model", "--json", env=OFF)
    assert refused.returncode == 3
    provider_error = refused.json()["error"]
    [errored] = {p.stem for p in run_records(tmp_path).iterdir()} - {passed, failed}
    for days, run_id in enumerate([errored, failed, passed]):  # the order they ended in
        age(run_records(tmp_path) / f"{run_id}.json", days / 10)

    listing = listed(run_agent)

    assert listing["records"] == 3
    assert [r["run_id"] for r in listing["runs"]] == [errored, failed, passed]
    assert [r["verdict"] for r in listing["runs"]] == ["provider", "failed", "passed"]
    assert provider_error["kind"] == "provider"
    first = listing["runs"][0]
    assert first["seed"] == "calculator"
    assert first["model"] == "other-model"
    assert first["planner"] == "openai"
    assert first["started_at"].endswith("+00:00")
    assert first["duration_seconds"] >= 0
    assert first["size_bytes"] == (run_records(tmp_path) / f"{errored}.json").stat().st_size
    assert listing["runs"][2]["model"] is None
    assert listing["skipped"] == []

    text = run_agent("runs", "list", env={**OFF, "TZ": "UTC"})
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["RUN", "ID", "STARTED", "TOOK", "VERDICT", "SEED", "MODEL"]
    assert [line.split()[0] for line in lines[1:]] == [errored, failed, passed]
    assert lines[1].split()[5:] == ["provider", "calculator", "other-model"]
    assert first["started_at"][:19].replace("T", " ") in lines[1]


def test_list_limit_reads_only_the_newest_records(
    run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    newest = planned_run()
    # Older records that a listing of the newest must not even open: each is damaged.
    for number in range(300):
        damaged = run_records(tmp_path) / f"run-{number:016x}.json"
        damaged.write_text("not json", encoding="utf-8")
        age(damaged, 1 + number / 1000)

    limited = run_agent("runs", "list", "--limit", "1", env=OFF)
    every = listed(run_agent, "--limit", "0")

    assert limited.returncode == 0, limited.stderr
    assert [line.split()[0] for line in limited.stdout.splitlines()[1:]] == [newest]
    assert "skipped" not in limited.stderr
    assert "the 1 most recent of 301 runs" in limited.stderr
    assert len(every["skipped"]) == 300
    assert [r["run_id"] for r in every["runs"]] == [newest]


def test_list_with_nothing_recorded_says_so(run_agent: RunAgent, tmp_path: Path) -> None:
    done = run_agent("runs", "list", env=OFF)

    assert done.returncode == 0, done.stderr
    assert f"no run recorded yet in {run_records(tmp_path)}" in done.stdout


# --- hostile and damaged record files -------------------------------------------------------------


def plant(kind: str, path: Path, tmp_path: Path, valid: Path) -> None:
    """Put something named like a record at ``path`` that is not one the agent wrote."""
    if kind == "not-json":
        path.write_bytes(b"\xff{ not json")
    elif kind == "a-list":
        path.write_text("[1, 2, 3]", encoding="utf-8")
    elif kind == "other-format":
        path.write_text(json.dumps({"format": 99, "run_id": path.stem}), encoding="utf-8")
    elif kind == "other-run":
        record = json.loads(valid.read_text(encoding="utf-8"))  # holds another run's ID
        path.write_text(json.dumps(record), encoding="utf-8")
    elif kind == "wrong-types":
        record = json.loads(valid.read_text(encoding="utf-8"))
        record.update(run_id=path.stem, seed=["calculator"], started_at=5)
        path.write_text(json.dumps(record), encoding="utf-8")
    elif kind == "nested-lists":
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    elif kind == "sparse-1gb":
        with path.open("wb") as stream:
            stream.truncate(1 << 30)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "link-to-etc":
        path.symlink_to("/etc/passwd")
    elif kind == "link-to-a-record":
        elsewhere = tmp_path / "elsewhere.json"
        record = json.loads(valid.read_text(encoding="utf-8"))
        record["run_id"] = path.stem
        elsewhere.write_text(json.dumps(record, indent=2), encoding="utf-8")
        path.symlink_to(elsewhere)
    else:
        raise AssertionError(kind)


HOSTILE = [
    ("not-json", "not JSON"),
    ("a-list", "not a run record (a JSON list)"),
    ("other-format", "not a run record of format 1"),
    ("other-run", "damaged: its run_id is not the run its name says"),
    ("wrong-types", "damaged: it names no seed"),
    ("nested-lists", "not JSON"),
    ("sparse-1gb", "larger than 67,108,864 bytes"),
    ("fifo", "not a regular file"),
    ("directory", "not a regular file"),
    ("link-to-etc", "a symbolic link, not followed"),
    ("link-to-a-record", "a symbolic link, not followed"),
]


@pytest.mark.parametrize(("kind", "problem"), HOSTILE, ids=[kind for kind, _ in HOSTILE])
def test_list_sets_aside_a_file_that_is_not_a_record_in_one_line(
    kind: str,
    problem: str,
    run_agent: RunAgent,
    planned_run: Callable[..., str],
    tmp_path: Path,
) -> None:
    good = planned_run()
    hostile = run_records(tmp_path) / "run-00000000000000aa.json"
    plant(kind, hostile, tmp_path, run_records(tmp_path) / f"{good}.json")

    text = run_agent("runs", "list", env=OFF, timeout=20)
    listing = listed(run_agent)

    assert text.returncode == 0, text.stderr
    assert good in text.stdout
    assert "Traceback" not in text.stderr
    assert f"agent: {hostile.name} skipped: {problem}" in text.stderr
    assert len(text.stderr.splitlines()) == 1, text.stderr
    assert [r["run_id"] for r in listing["runs"]] == [good]
    [skipped] = listing["skipped"]
    assert skipped["name"] == hostile.name
    assert problem in skipped["problem"]


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("fifo", "not a regular file"),
        ("link-to-a-record", "a symbolic link, not followed"),
        ("directory", "not a regular file"),
        ("sparse-1gb", "larger than 67,108,864 bytes"),
    ],
)
@pytest.mark.parametrize("command", ["logs", "replay", "diff"])
def test_a_record_planted_in_the_folder_is_refused_by_run_id_not_followed_or_waited_on(
    kind: str,
    problem: str,
    command: str,
    run_agent: RunAgent,
    planned_run: Callable[..., str],
    tmp_path: Path,
) -> None:
    good = planned_run()
    hostile = run_records(tmp_path) / "run-00000000000000aa.json"
    plant(kind, hostile, tmp_path, run_records(tmp_path) / f"{good}.json")

    done = run_agent(command, hostile.stem, env=OFF, timeout=20)

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"the run record {str(hostile)!r} is {problem}" in done.stderr


# --- agent runs prune ---------------------------------------------------------------------------


def test_prune_deletes_records_older_than_the_days_and_says_how_many_bytes(
    provider: FakeProvider, run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    provider.reply(401, {"error": {"message": "bad key"}})
    assert run_agent("run", env=OFF).returncode == 3
    [call] = planner_records(tmp_path).iterdir()
    old = [planned_run(), planned_run()]
    recent = planned_run()
    for run_id in old:
        age(run_records(tmp_path) / f"{run_id}.json", 40)
    age(call, 40)
    old_bytes = sum((run_records(tmp_path) / f"{r}.json").stat().st_size for r in old)
    kept_before = {p.name for p in run_records(tmp_path).iterdir()} - {f"{r}.json" for r in old}

    dry = run_agent("runs", "prune", "--older-than", "30", "--dry-run", env=OFF)

    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip() == (
        f"would delete 2 run records ({old_bytes:,} bytes), 1 planner-call records "
        f"({call.stat().st_size:,} bytes) and 0 trajectory files (0 bytes); 2 run records kept"
    )
    assert all((run_records(tmp_path) / f"{r}.json").exists() for r in old)
    assert call.exists()

    done = run_agent("runs", "prune", "--older-than", "30", "--json", env=OFF)

    assert done.returncode == 0, done.stderr
    pruned = done.json()
    assert (pruned["run_records"], pruned["run_bytes"]) == (2, old_bytes)
    assert (pruned["planner_records"], pruned["kept"], pruned["dry_run"]) == (1, 2, False)
    assert {p.name for p in run_records(tmp_path).iterdir()} == kept_before
    assert f"{recent}.json" in kept_before
    assert not call.exists()
    runs = listed(run_agent)["runs"]
    assert len(runs) == 2
    assert runs[0]["run_id"] == recent


def test_prune_keeps_the_newest_n_whatever_their_age(
    run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    runs = [planned_run() for _ in range(4)]
    for days, run_id in enumerate(reversed(runs)):
        age(run_records(tmp_path) / f"{run_id}.json", 50 + days)

    only_keep = run_agent("runs", "prune", "--keep", "3", "--older-than", "60", env=OFF)
    assert only_keep.returncode == 0, only_keep.stderr
    assert "deleted 0 run records" in only_keep.stdout  # none is older than 60 days

    done = run_agent("runs", "prune", "--keep", "2", env=OFF)

    assert done.returncode == 0, done.stderr
    assert "deleted 2 run records" in done.stdout
    assert sorted(p.stem for p in run_records(tmp_path).iterdir()) == sorted(runs[2:])


def test_prune_leaves_alone_links_foreign_files_and_what_is_not_a_record(
    run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    good = planned_run()
    folder = run_records(tmp_path)
    template = folder / f"{good}.json"
    # A record the agent could have written, outside the folder, reached through a link.
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "run-00000000000000a1.json"
    record = json.loads(template.read_text(encoding="utf-8"))
    record["run_id"] = target.stem
    target.write_text(json.dumps(record, indent=2), encoding="utf-8")
    (folder / target.name).symlink_to(target)
    (folder / "run-00000000000000a2.json").symlink_to("/etc/passwd")
    foreign = folder / "run-00000000000000a3.json"
    foreign.write_text('{"mine": "not the agent\'s"}', encoding="utf-8")
    notes = folder / "notes.txt"
    notes.write_text("keep me", encoding="utf-8")
    (folder / "run-00000000000000a4.json").mkdir()
    os.mkfifo(folder / "run-00000000000000a5.json")
    planner_foreign = planner_records(tmp_path) / "plan-foreign.json"
    planner_foreign.parent.mkdir(mode=0o700)
    planner_foreign.write_text("{}", encoding="utf-8")
    before = sorted(p.name for p in folder.iterdir())
    for path in [*folder.iterdir(), target, planner_foreign]:
        age(path, 100)
    age(template, 0)

    done = run_agent("runs", "prune", "--older-than", "1", env=OFF, timeout=20)

    assert done.returncode == 0, done.stderr
    assert "deleted 0 run records (0 bytes), 0 planner-call records" in done.stdout
    assert sorted(p.name for p in folder.iterdir()) == before
    assert target.is_file()
    assert Path("/etc/passwd").is_file()
    assert planner_foreign.is_file()
    assert f"left alone: {foreign}: not a run record of this agent" in done.stderr
    assert f"left alone: {planner_foreign}: not a planner record of this agent" in done.stderr


def test_prune_refuses_a_records_folder_that_is_a_link(
    run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    good = planned_run()
    moved = tmp_path / "moved-records"
    run_records(tmp_path).rename(moved)
    run_records(tmp_path).symlink_to(moved)
    age(moved / f"{good}.json", 100)

    done = run_agent("runs", "prune", "--older-than", "1", env=OFF)

    assert done.returncode == 2
    assert "is a symbolic link: the agent deletes nothing it reaches through one" in done.stderr
    assert (moved / f"{good}.json").is_file()


def test_prune_without_a_bound_is_a_usage_error(run_agent: RunAgent) -> None:
    done = run_agent("runs", "prune", env=OFF)

    assert done.returncode == 2
    assert "--older-than DAYS, --keep N or both" in done.stderr


@pytest.mark.parametrize("days", ["nan", "inf", "-1"])
def test_prune_refuses_days_that_are_not_a_number_of_days(
    days: str, run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    good = planned_run()
    age(run_records(tmp_path) / f"{good}.json", 100)

    done = run_agent("runs", "prune", "--older-than", days, env=OFF)

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert (run_records(tmp_path) / f"{good}.json").is_file()


# --- automatic retention ------------------------------------------------------------------------


def test_a_run_prunes_records_older_than_30_days_once_a_day(
    planned_run: Callable[..., str], tmp_path: Path
) -> None:
    first = planned_run()
    stamp = state(tmp_path) / "records-pruned"
    stamp.unlink(missing_ok=True)
    old = copy_record(tmp_path, first, "run-00000000000000b1", 31)
    young = copy_record(tmp_path, first, "run-00000000000000b2", 29)

    second = planned_run(env={})

    assert not old.exists()
    assert young.exists()
    assert (run_records(tmp_path) / f"{first}.json").exists()
    assert (run_records(tmp_path) / f"{second}.json").exists()
    assert stamp.is_file()

    again = copy_record(tmp_path, first, "run-00000000000000b3", 31)
    planned_run(env={})
    assert again.exists()  # pruned today already

    age(stamp, 1.01)
    planned_run(env={})
    assert not again.exists()


@pytest.mark.parametrize(
    ("setting", "kept"), [("off", True), ("60", True), ("20", False), ("OFF", True)]
)
def test_the_days_kept_are_set_or_switched_off_by_a_variable(
    setting: str, kept: bool, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    first = planned_run()
    (state(tmp_path) / "records-pruned").unlink(missing_ok=True)
    old = copy_record(tmp_path, first, "run-00000000000000c1", 40)

    planned_run(env={"SANDBOXED_CODING_AGENT_KEEP_RECORDS_DAYS": setting})

    assert old.exists() is kept


@pytest.mark.parametrize("problem", ["bad-setting", "stamp-is-a-folder", "folder-is-a-link"])
def test_an_automatic_prune_that_fails_is_one_warning_and_the_run_stands(
    problem: str,
    run_agent: RunAgent,
    write_plan: Callable[..., Path],
    planned_run: Callable[..., str],
    tmp_path: Path,
) -> None:
    first = planned_run()
    stamp = state(tmp_path) / "records-pruned"
    stamp.unlink(missing_ok=True)
    old = copy_record(tmp_path, first, "run-00000000000000d1", 40)
    env = {}
    if problem == "bad-setting":
        env = {"SANDBOXED_CODING_AGENT_KEEP_RECORDS_DAYS": "30d"}
    elif problem == "stamp-is-a-folder":
        stamp.mkdir()
        age(stamp, 2)
    else:
        moved = tmp_path / "moved-records"
        run_records(tmp_path).rename(moved)
        run_records(tmp_path).symlink_to(moved)
        old = moved / old.name
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    done = run_agent("run", "--plan", str(plan), env=env)

    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith("agent: warning: old records were not pruned (")
    assert "agent runs prune" in warnings[0]
    assert old.exists()


# --- agent logs RUN_ID --------------------------------------------------------------------------


def test_logs_shows_a_run_by_its_run_id_with_each_plan_test_and_planner_call(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR.replace("+", "-")))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    run = run_agent("run", "--attempts", "2", "--json", env=OFF)
    assert run.returncode == 0, run.stderr
    result = run.json()
    run_id, task_ids = result["run_id"], [a["planner_task_id"] for a in result["attempts"]]
    assert len(task_ids) == 2
    assert all(task_ids)

    done = run_agent("logs", run_id, env={**OFF, "TZ": "UTC"})

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"run {run_id} of seed calculator, started ")
    assert "verdict:     tests passed" in lines
    assert "instruction: Fix calculator.add so the test passes. Change only calculator.py." in lines
    assert "planner:     openai, model test-model" in lines
    assert f"plan 1:      replaces calculator.py (planner task {task_ids[0]})" in lines
    assert f"plan 2:      replaces calculator.py (planner task {task_ids[1]})" in lines
    assert any(line.startswith("test 1:      plan 1: failed (exit 1) in ") for line in lines)
    tested = [line for line in lines if line.startswith("test 2:      plan 2: passed (exit 0) in ")]
    assert len(tested) == 1
    assert tested[0].endswith(", the run's verdict")
    assert "attempts:    1 failed, 2 passed" in lines
    assert "planner calls (each one's record: agent logs PLANNER_TASK_ID):" in lines
    assert [f"  agent logs {task_id}" for task_id in task_ids] == [
        line for line in lines if line.startswith("  agent logs ")
    ]
    as_json = run_agent("logs", run_id, "--json", env=OFF)
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.json()["run_id"] == run_id
    assert as_json.json()["plans"][1]["planner_task_id"] == task_ids[1]
    call = run_agent("logs", task_ids[0], env=OFF)  # a planner task ID works as before
    assert call.returncode == 0, call.stderr
    assert call.stdout.startswith(f"planner task {task_ids[0]} (openai)")


def test_logs_of_a_run_that_ended_in_an_error_shows_the_error_and_its_call(
    provider: FakeProvider, run_agent: RunAgent, tmp_path: Path
) -> None:
    provider.reply(401, {"error": {"message": "bad key"}})
    run = run_agent("run", "--json", env=OFF)
    assert run.returncode == 3
    task_id = run.json()["error"]["planner_task_id"]
    [record] = run_records(tmp_path).iterdir()

    done = run_agent("logs", record.stem, env=OFF)

    assert done.returncode == 0, done.stderr
    assert "verdict:     provider error" in done.stdout
    assert "error:       the provider refused the API key" in done.stdout
    assert f"  agent logs {task_id}" in done.stdout


def test_logs_of_an_unknown_run_id_is_one_message_and_exit_2(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    done = run_agent("logs", "run-0123456789abcdef", env=OFF)

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "agent: usage error: there is no record of run 'run-0123456789abcdef' in "
        f"{run_records(tmp_path)} (records are kept on the machine that ran it, 30 days by "
        "default; see `agent runs list`)"
    ]


def test_logs_shows_a_planner_call_a_planner_named_like_a_run(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    folder = planner_records(tmp_path)
    folder.mkdir(parents=True, mode=0o700)
    call = {
        "planner_task_id": "run-00000000000000e1",
        "planner": "scripted",
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "outcome": "ok",
        "duration_seconds": 0.5,
    }
    (folder / "run-00000000000000e1.json").write_text(json.dumps(call), encoding="utf-8")

    done = run_agent("logs", "run-00000000000000e1", env=OFF)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("planner task run-00000000000000e1 (scripted)")


PLANTED = {
    "fifo": "not a regular file",
    "link-to-etc": "a symbolic link, not followed",
    "directory": "not a regular file",
    "sparse-1gb": "larger than 67,108,864 bytes",
}


@pytest.mark.parametrize("kind", list(PLANTED))
@pytest.mark.parametrize("task_id", ["plan-planted", "run-00000000000000e2"])
def test_a_planner_record_planted_in_its_folder_is_refused_not_followed_or_waited_on(
    kind: str, task_id: str, run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    good = planned_run()
    folder = planner_records(tmp_path)
    folder.mkdir(parents=True, mode=0o700)
    planted = folder / f"{task_id}.json"
    plant(kind, planted, tmp_path, run_records(tmp_path) / f"{good}.json")

    done = run_agent("logs", task_id, env=OFF, timeout=20)

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"the record {str(planted)!r} is {PLANTED[kind]}" in done.stderr


def test_list_shows_what_a_record_says_with_control_characters_escaped(
    run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    good = planned_run()
    path = run_records(tmp_path) / f"{good}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["seed"]["name"] = "calc\x1b[2J\rulator\nrun-ffffffffffffffff"
    record["model"] = "m\x07odel"
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")

    done = run_agent("runs", "list", env=OFF)

    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    assert "\x07" not in done.stdout
    assert len(done.stdout.splitlines()) == 2
    assert "calc\\x1b[2J\\rulator\\nrun-ffffffffffffffff  m\\x07odel" in done.stdout


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("duration_seconds", float("inf"), "skipped: damaged: its duration_seconds is not"),
        ("duration_seconds", float("nan"), "skipped: damaged: its duration_seconds is not"),
        ("started_at", "9999-12-31T23:59:59.000+00:00", "9999-12-31T23:59:59.000+00:00"),
    ],
    ids=["infinite-duration", "nan-duration", "last-second-of-9999"],
)
def test_list_and_logs_survive_times_no_clock_can_show(
    field: str,
    value: object,
    shown: str,
    run_agent: RunAgent,
    planned_run: Callable[..., str],
    tmp_path: Path,
) -> None:
    good = planned_run()
    path = run_records(tmp_path) / f"{good}.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record[field] = value
    path.write_text(json.dumps(record, indent=2), encoding="utf-8")
    east = {**OFF, "TZ": "Asia/Tokyo"}

    listing = run_agent("runs", "list", env=east)
    logs = run_agent("logs", good, env=east)

    assert listing.returncode == 0, listing.stderr
    assert shown in listing.stdout + listing.stderr
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.startswith(f"run {good} of seed calculator, started ")


def test_a_batch_prunes_old_records_too(
    provider: FakeProvider, run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    first = planned_run()
    (state(tmp_path) / "records-pruned").unlink(missing_ok=True)
    old = copy_record(tmp_path, first, "run-00000000000000f1", 31)
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"seed": "calculator"}\n{"seed": "calculator"}\n', encoding="utf-8")

    done = run_agent("batch", str(tasks), "--out", str(tmp_path / "results.jsonl"))

    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    assert not old.exists()
    assert len(list(run_records(tmp_path).iterdir())) == 3


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_prune_leaves_another_users_record_alone(
    run_agent: RunAgent, planned_run: Callable[..., str], tmp_path: Path
) -> None:
    good = planned_run()
    theirs = copy_record(tmp_path, good, "run-00000000000000a9", 100)
    os.chown(theirs, 65534, 65534)
    age(theirs, 100)

    done = run_agent("runs", "prune", "--older-than", "1", env=OFF)

    assert done.returncode == 0, done.stderr
    assert "deleted 0 run records" in done.stdout
    assert theirs.is_file()

"""Past runs, from their records: listed newest first (``agent runs list``) and one described
for a person (``agent logs RUN_ID``).

A listing reads each record as untrusted, one at a time, and keeps only what a row
shows: a file that is not a record the agent wrote (a link, a FIFO, a folder, a file
too large, not JSON, of another shape) is set aside with a few words on why, and
never stops the listing.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from . import trajectories
from .planner_calls import UnreadableRecord, read_kept_file
from .run_record_files import MAX_RECORD_BYTES, records_directory
from .run_record_layout import RUN_RECORD_FORMAT, RunRecord

#: The file name of a run record: its run ID and ``.json``.
RECORD_NAME = re.compile(r"(run-[0-9a-f]{16})\.json")


@attrs.frozen
class RunSummary:
    """One row of ``agent runs list``: what a record says of its run, in brief.

    :ivar run_id: the run's ID.
    :ivar seed: the seed's name.
    :ivar verdict: ``passed``, ``failed``, the kind of the error the run ended in
        (``provider``, ``policy``, ``budget``, ``sandbox``, ``interrupted``, ...) or
        ``unknown`` when the record holds neither a result nor an error.
    :ivar started_at: when the run began, ISO 8601 in UTC.
    :ivar duration_seconds: its wall time.
    :ivar planner: the planner asked, if any.
    :ivar model: the model asked for, or else the one that answered, if any.
    :ivar size_bytes: the record's size on disk.
    """

    run_id: str
    seed: str
    verdict: str
    started_at: str
    duration_seconds: float
    planner: str | None
    model: str | None
    size_bytes: int


@attrs.frozen
class SkippedFile:
    """A file in the records folder named like a record that was not listed, and why.

    :ivar name: the file's name.
    :ivar problem: why, in a few words.
    """

    name: str
    problem: str


@attrs.frozen
class RunListing:
    """The runs ``agent runs list`` shows.

    :ivar folder: the records folder.
    :ivar records: how many record files it holds in all.
    :ivar runs: the runs shown, most recently recorded first.
    :ivar skipped: the record files among those that could not be listed.
    :ivar unfinished: runs that explore and have no record yet (running, or killed before
        they wrote one), each as ``(run ID, when it last noted a planner call, ISO 8601
        in UTC)``, most recent first; ``agent logs RUN_ID`` shows their steps.
    """

    folder: str
    records: int
    runs: tuple[RunSummary, ...]
    skipped: tuple[SkippedFile, ...]
    unfinished: tuple[tuple[str, str], ...] = ()


def list_runs(limit: int | None = None, environ: Mapping[str, str] = os.environ) -> RunListing:
    """The most recently recorded runs first (by when each record was written, that is
    when its run ended); at most ``limit`` record files are read (all for ``None``).

    Only the names and times of the folder's entries are held at once, and a row per
    run: each record is read, summed up and dropped before the next.
    """
    folder = records_directory(environ)
    unfinished = _unfinished(folder, limit, environ)
    with _open_folder(folder) as handle:
        if handle is None:
            return RunListing(str(folder), 0, (), (), unfinished)
        found = list(_record_entries(handle))  # names and times only
        newest = sorted(found, reverse=True) if limit is None else heapq.nlargest(limit, found)
        runs: list[RunSummary] = []
        skipped: list[SkippedFile] = []
        for _, name, problem in newest:
            summary = _summary(name, handle) if problem is None else problem
            if isinstance(summary, RunSummary):
                runs.append(summary)
            else:
                skipped.append(SkippedFile(name, summary))
    return RunListing(str(folder), len(found), tuple(runs), tuple(skipped), unfinished)


def _unfinished(
    records: Path, limit: int | None, environ: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The runs whose note of their planner calls is there and whose record is not."""
    found: list[tuple[float, str]] = []
    note = re.compile(rf"(run-[0-9a-f]{{16}}){re.escape(trajectories.RUN_INDEX_SUFFIX)}")
    with _open_folder(trajectories.trajectories_directory(environ)) as handle:
        if handle is None:
            return ()
        with os.scandir(handle) as entries:
            for entry in entries:
                named = note.fullmatch(entry.name)
                if named is None or os.path.lexists(records / f"{named[1]}.json"):
                    continue
                try:
                    status = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # removed meanwhile
                if stat.S_ISREG(status.st_mode):
                    found.append((status.st_mtime, named[1]))
    newest = sorted(found, reverse=True) if limit is None else heapq.nlargest(limit, found)
    return tuple((run_id, _iso(mtime)) for mtime, run_id in newest)


def _iso(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, UTC).isoformat(timespec="seconds")


@contextmanager
def _open_folder(folder: Path) -> Iterator[int | None]:
    """A descriptor of ``folder``; ``None`` when there is none (nothing recorded yet)."""
    try:
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        yield None
        return
    try:
        yield handle
    finally:
        os.close(handle)


def _record_entries(handle: int) -> Iterator[tuple[float, str, str | None]]:
    """``(mtime, name, problem)`` of every entry named like a record; ``problem`` is why
    one that is not a regular file is not read (a link is not followed)."""
    with os.scandir(handle) as entries:
        for entry in entries:
            if not RECORD_NAME.fullmatch(entry.name):
                continue
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # removed meanwhile
            problem = None
            if stat.S_ISLNK(status.st_mode):
                problem = "a symbolic link, not followed"
            elif not stat.S_ISREG(status.st_mode):
                problem = "not a regular file"
            yield status.st_mtime, entry.name, problem


def _summary(name: str, handle: int) -> RunSummary | str:
    """The row of the record ``name``, or why it cannot be one."""
    try:
        data = read_kept_file(name, folder=handle, limit=MAX_RECORD_BYTES)
        parsed = json.loads(data)
    except UnreadableRecord as problem:
        return str(problem)
    except (ValueError, RecursionError) as error:
        return f"not JSON ({str(error)[:80]})"
    try:
        return _summed_up(parsed, name.removesuffix(".json"), len(data))
    except _NotARecord as problem:
        return str(problem)


class _NotARecord(ValueError):
    pass


def _summed_up(parsed: Any, run_id: str, size: int) -> RunSummary:
    """The row of a decoded record; only the fields a row shows are looked at.

    :raises _NotARecord: one of them is missing or of the wrong type.
    """
    if not isinstance(parsed, dict):
        raise _NotARecord(f"not a run record (a JSON {type(parsed).__name__})")
    if parsed.get("format") != RUN_RECORD_FORMAT:
        raise _NotARecord(f"not a run record of format {RUN_RECORD_FORMAT}")
    if parsed.get("run_id") != run_id:
        raise _NotARecord("damaged: its run_id is not the run its name says")
    seed, result, error = parsed.get("seed"), parsed.get("result"), parsed.get("error")
    started = parsed.get("started_at")
    duration = parsed.get("duration_seconds")
    if not isinstance(seed, dict) or not isinstance(seed.get("name"), str):
        raise _NotARecord("damaged: it names no seed")
    if not isinstance(started, str) or _parsed_time(started) is None:
        raise _NotARecord("damaged: its started_at is not a time")
    if (
        not isinstance(duration, (int, float))
        or isinstance(duration, bool)
        or not 0 <= duration < math.inf  # JSON as Python reads it allows NaN and Infinity
    ):
        raise _NotARecord("damaged: its duration_seconds is not a number of seconds")
    verdict = "unknown"
    if isinstance(result, dict) and isinstance(result.get("tests_passed"), bool):
        verdict = "passed" if result["tests_passed"] else "failed"
    elif isinstance(error, dict) and isinstance(error.get("kind"), str):
        verdict = error["kind"]
    model = parsed.get("model")
    if model is None and isinstance(result, dict):
        model = result.get("model")
    planner = parsed.get("planner")
    return RunSummary(
        run_id=run_id,
        seed=seed["name"],
        verdict=verdict,
        started_at=started,
        duration_seconds=float(duration),
        planner=planner if isinstance(planner, str) else None,
        model=model if isinstance(model, str) else None,
        size_bytes=size,
    )


def _parsed_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def local_time(iso: str) -> str:
    """An ISO 8601 time as this machine's local time, to the second (as given when it
    is not one)."""
    when = _parsed_time(iso)
    if when is None or when.tzinfo is None:
        return iso
    try:
        return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):  # the year 9999, east of UTC
        return iso


def duration(seconds: float) -> str:
    """``0.8 s``, ``42 s``, ``3 min 5 s``, ``2 h 4 min``; ``?`` for what is no duration."""
    if not 0 <= seconds < math.inf:
        return "?"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def render_run(record: RunRecord) -> str:
    """A run record as a person reads it in a terminal (``agent logs RUN_ID``)."""
    verdict = "unknown (the record holds neither a result nor an error)"
    if record.result is not None:
        verdict = "tests passed" if record.result.tests_passed else "tests FAILED"
    elif record.error is not None:
        verdict = f"{record.error.kind} error"
    model = record.model or (record.result.model if record.result is not None else None)
    lines = [
        f"run {record.run_id} of seed {record.seed.name}, started "
        f"{local_time(record.started_at)}, took {duration(record.duration_seconds)}",
        f"verdict:     {verdict}",
        f"instruction: {_first_line(record.instruction)}",
        f"planner:     {record.planner or 'none (plan file)'}"
        + (f", model {model}" if model else ""),
        f"runner:      {record.runner}",
    ]
    if record.error is not None:
        lines.append(f"error:       {_first_line(record.error.message)}")
    for number, recorded in enumerate(record.plans, 1):
        source = "a plan file"
        if recorded.planner_task_id is not None:
            source = f"planner task {recorded.planner_task_id}"
        lines.append(f"plan {number}:      replaces {', '.join(recorded.plan.paths)} ({source})")
    for number, test in enumerate(record.tests, 1):
        outcome = test.outcome
        tested = f"plan {test.plan_index + 1}" if test.plan_index is not None else "files"
        said = "passed" if outcome.tests_passed else "failed"
        if outcome.timed_out:
            said += " (timed out)"
        elif outcome.limit_hit is not None:
            said += f" ({outcome.limit_hit} limit)"
        else:
            code = "none" if outcome.exit_code is None else outcome.exit_code
            said += f" (exit {code})"
        if outcome.grade is not None:
            said += f", graded {outcome.grade.resolution}"
        chosen = ", the run's verdict" if record.chosen_test == number - 1 else ""
        lines.append(
            f"test {number}:      {tested}: {said} in {outcome.duration_seconds:.2f} s, "
            f"sandbox {outcome.sandbox_id}{chosen}"
        )
    if record.result is not None and len(record.result.attempts) > 1:
        lines.append(
            "attempts:    " + ", ".join(f"{a.number} {a.verdict}" for a in record.result.attempts)
        )
    task_ids = planner_task_ids(record)
    if task_ids:
        lines.append("planner calls (each one's record: agent logs PLANNER_TASK_ID):")
        lines.extend(f"  agent logs {task_id}" for task_id in task_ids)
    lines.append(f"re-test: agent replay {record.run_id}; its patch: agent diff {record.run_id}")
    return "\n".join(lines)


def _first_line(text: str) -> str:
    first, _, rest = text.strip().partition("\n")
    return first + (" [...]" if rest else "")


def planner_task_ids(record: RunRecord) -> list[str]:
    """Every planner call the record names, in order, each once."""
    found = [p.planner_task_id for p in record.plans]
    if record.result is not None:
        found += [a.planner_task_id for a in record.result.attempts]
        found += [a.planner_task_id for c in record.result.candidates for a in c.attempts]
        found.append(record.result.planner_task_id)
    if record.error is not None:
        found.append(record.error.planner_task_id)
    return list(dict.fromkeys(task_id for task_id in found if task_id))

"""How long records are kept: ``agent runs prune``, and the automatic prune that keeps them
in check.

Run records (``run-records/``, about 18 KB a run) and planner-call records (``runs/``,
a few KB a call) are kept :data:`DEFAULT_KEEP_DAYS` days. The trajectories of a run
that explored (``trajectories/``) go with its record: when the record is deleted, by
age or by ``--keep``, so are the steps of every planner call its note names and the
note; those of a run that never wrote a record (it was killed), and those no run
noted, go by their age. Once a day at most, the
first recorded run of an ``agent run`` or ``agent batch`` deletes those older than
that, after one ``stat`` of a stamp file tells it a day has passed. Age, not size,
decides: a record a user may still replay or diff never disappears because a large
batch ran meanwhile, and a batch of 10,000 tasks a day keeps a few GB at most. The
variable :data:`RETENTION_ENV` changes the days or, set to ``off``, switches it off.
A prune that fails is a warning: a run never fails for it.

Only what the agent wrote is deleted: a regular file (never a link, and nothing a
link points to), owned by this user, named like a record of that folder and
beginning as the agent begins every record (its ID, under its name). Anything else
in the folders is left alone.
"""

from __future__ import annotations

import math
import os
import re
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from ..errors import AgentWarning, UsageError
from . import trajectories
from .planner_calls import UnreadableRecord, open_kept_file, runs_directory, state_directory
from .run_record_files import records_directory

#: How many days records are kept when :data:`RETENTION_ENV` is unset.
DEFAULT_KEEP_DAYS = 30
#: Days to keep records (a whole number, at least 1), or ``off`` to keep them for ever.
RETENTION_ENV = "SANDBOXED_CODING_AGENT_KEEP_RECORDS_DAYS"
#: The file in the state directory whose time says when records were last pruned by themselves.
STAMP_NAME = "records-pruned"
#: How often, at most, a run prunes by itself.
PRUNE_INTERVAL_SECONDS = 24 * 3600

_DAY = 24 * 3600
#: How much of a file is read to see that the agent wrote it.
_HEAD_BYTES = 512


@attrs.frozen
class _RecordKind:
    """One kind of record: how its files are named, and how the agent begins each.

    :ivar head: what a file of this kind begins with, given its ID (its name without
        the suffix).
    """

    what: str
    name: re.Pattern[str]
    head: Callable[[str], str]


def _indented(key: str) -> Callable[[str], str]:
    """The head of a record written indented: ``{``, a line break and its ID under ``key``."""
    return lambda record_id: f'{{\n  "{key}": "{record_id}"'


_TASK_ID = r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}"
_RUN_RECORDS = _RecordKind(
    "run record", re.compile(r"(run-[0-9a-f]{16})\.json"), _indented("run_id")
)
_PLANNER_RECORDS = _RecordKind(
    "planner record", re.compile(rf"({_TASK_ID})\.json"), _indented("planner_task_id")
)
_TRAJECTORIES = _RecordKind(
    "trajectory", re.compile(rf"({_TASK_ID})\.jsonl"), lambda _: '{"number": '
)
_RUN_NOTES = _RecordKind(
    "run's note of its trajectories",
    re.compile(rf"(run-[0-9a-f]{{16}}){re.escape(trajectories.RUN_INDEX_SUFFIX)}"),
    lambda run_id: f'{{"run_id": "{run_id}"',
)


@attrs.frozen
class LeftAlone:
    """A file a prune would have deleted by its age and name, but did not, and why.

    :ivar path: the file.
    :ivar reason: why, in a few words.
    """

    path: str
    reason: str


@attrs.frozen
class Pruned:
    """What a prune deleted (or, for a dry run, would delete).

    :ivar run_records: run records deleted.
    :ivar run_bytes: their size.
    :ivar planner_records: planner-call records deleted.
    :ivar planner_bytes: their size.
    :ivar trajectories: trajectory files deleted (a planner call's steps, a run's note of
        them).
    :ivar trajectory_bytes: their size.
    :ivar kept: run records kept.
    :ivar left_alone: files named like old records that are not the agent's.
    :ivar dry_run: nothing was deleted.
    """

    run_records: int = 0
    run_bytes: int = 0
    planner_records: int = 0
    planner_bytes: int = 0
    trajectories: int = 0
    trajectory_bytes: int = 0
    kept: int = 0
    left_alone: tuple[LeftAlone, ...] = ()
    dry_run: bool = False


def prune(
    older_than_days: float | None = None,
    keep: int | None = None,
    *,
    dry_run: bool = False,
    environ: Mapping[str, str] = os.environ,
    now: float | None = None,
) -> Pruned:
    """Delete run records older than ``older_than_days`` and not among the ``keep`` newest
    (with their trajectories), and planner-call records and trajectories no kept run
    names older than ``older_than_days``. A record's age is its file's: when it was
    written.

    :raises UsageError: neither bound given, or a records folder is a symbolic link
        (pruned by hand, if at all: the agent deletes nothing it reaches through a link).
    """
    if older_than_days is None and keep is None:
        raise UsageError("say which records to delete: --older-than DAYS, --keep N or both")
    if older_than_days is not None and not 0 <= older_than_days < math.inf:
        raise UsageError(f"--older-than {older_than_days}: give a number of days, 0 or more")
    if keep is not None and keep < 0:
        raise UsageError(f"--keep {keep}: give a number of records, 0 or more")
    now = time.time() if now is None else now
    cutoff = None if older_than_days is None else now - older_than_days * _DAY
    runs = _prune_folder(records_directory(environ), _RUN_RECORDS, cutoff, keep, dry_run)
    planner = _Folder()
    if cutoff is not None:  # a planner call is not a run: only its age counts
        planner = _prune_folder(runs_directory(environ), _PLANNER_RECORDS, cutoff, None, dry_run)
    steps = _prune_trajectories(runs.deleted, cutoff, dry_run, environ)
    return Pruned(
        run_records=len(runs.deleted),
        run_bytes=runs.size,
        planner_records=len(planner.deleted),
        planner_bytes=planner.size,
        trajectories=len(steps.deleted),
        trajectory_bytes=steps.size,
        kept=runs.kept,
        left_alone=(*runs.left_alone, *planner.left_alone, *steps.left_alone),
        dry_run=dry_run,
    )


@attrs.define
class _Folder:
    """What a prune did in one folder: the IDs it deleted, their bytes, what it kept."""

    deleted: list[str] = attrs.Factory(list)
    size: int = 0
    kept: int = 0
    left_alone: list[LeftAlone] = attrs.Factory(list)


def _prune_trajectories(
    runs_deleted: list[str],
    cutoff: float | None,
    dry_run: bool,
    environ: Mapping[str, str],
) -> _Folder:
    """Delete the trajectories of the runs deleted, with their notes; and, past ``cutoff``,
    the notes of runs that have no record and the trajectories no remaining note names."""
    folder = trajectories.trajectories_directory(environ)
    notes = {run_id: trajectories.noted_calls(run_id, environ) for run_id in runs_deleted}
    done = _Folder()
    if notes:
        names = {f"{run_id}{trajectories.RUN_INDEX_SUFFIX}" for run_id in notes}
        _prune_folder(folder, _RUN_NOTES, None, None, dry_run, names, into=done)
        named = {f"{task_id}.jsonl" for calls in notes.values() for task_id in calls}
        _prune_folder(folder, _TRAJECTORIES, None, None, dry_run, named, into=done)
    if cutoff is None:
        return done
    records = records_directory(environ)
    orphaned = {  # a run killed before it wrote its record; pruned by its note's age
        f"{run_id}{trajectories.RUN_INDEX_SUFFIX}"
        for run_id in _ids_in(folder, _RUN_NOTES)
        if run_id not in notes and not os.path.lexists(records / f"{run_id}.json")
    }
    gone = set(done.deleted)
    _prune_folder(folder, _RUN_NOTES, cutoff, None, dry_run, orphaned, into=done)
    gone |= set(done.deleted)
    kept_runs = [r for r in _ids_in(folder, _RUN_NOTES) if r not in gone and r not in notes]
    named_by_kept = {t for r in kept_runs for t in trajectories.noted_calls(r, environ)}
    unnamed = {
        f"{task_id}.jsonl"
        for task_id in _ids_in(folder, _TRAJECTORIES)
        if task_id not in named_by_kept and task_id not in gone
    }
    _prune_folder(folder, _TRAJECTORIES, cutoff, None, dry_run, unnamed, into=done)
    return done


def _ids_in(folder: Path, kind: _RecordKind) -> list[str]:
    """The IDs of the files of ``kind`` in ``folder`` (none when there is no folder)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [found.group(1) for name in names if (found := kind.name.fullmatch(name))]


def _prune_folder(
    folder: Path,
    kind: _RecordKind,
    cutoff: float | None,
    keep: int | None,
    dry_run: bool,
    only: set[str] | None = None,
    *,
    into: _Folder | None = None,
) -> _Folder:
    """Prune one folder (of its files named in ``only``, when given); what was done is
    added to ``into``, and returned."""
    done = _Folder() if into is None else into
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(folder, flags)
    except FileNotFoundError:
        return done
    except OSError as error:
        if os.path.islink(folder):
            raise UsageError(
                f"{folder} is a symbolic link: the agent deletes nothing it reaches through "
                "one (prune the folder it points to by hand, or make it a folder)"
            ) from None
        raise UsageError(f"cannot open {folder}: {error.strerror}") from None
    try:
        records = sorted(_own_records(handle, kind), reverse=True)  # newest first
        if only is not None:
            records = [r for r in records if r[1] in only]
        deleted = 0
        for rank, (mtime, name, length) in enumerate(records):
            # Said positively, so that no comparison that fails (a NaN) can delete.
            old_enough = cutoff is None or mtime < cutoff
            beyond_kept = keep is None or rank >= keep
            if not (old_enough and beyond_kept):
                continue
            reason = _not_the_agents(handle, name, kind)
            if reason is None and not dry_run:
                try:
                    os.unlink(name, dir_fd=handle)  # a name, never what a link points to
                except FileNotFoundError:
                    continue  # pruned meanwhile by another agent
                except OSError as error:
                    reason = f"cannot be deleted: {error.strerror}"
            if reason is not None:
                done.left_alone.append(LeftAlone(str(folder / name), reason))
                continue
            match = kind.name.fullmatch(name)
            assert match is not None  # _own_records lists only names of the kind
            done.deleted.append(match.group(1))
            done.size += length
            deleted += 1
        done.kept += len(records) - deleted
        return done
    finally:
        os.close(handle)


def _own_records(handle: int, kind: _RecordKind) -> Iterator[tuple[float, str, int]]:
    """``(mtime, name, size)`` of each regular file of this user named like a record."""
    user = os.geteuid()
    with os.scandir(handle) as entries:
        for entry in entries:
            if not kind.name.fullmatch(entry.name):
                continue
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(status.st_mode) and status.st_uid == user:
                yield status.st_mtime, entry.name, status.st_size


def _not_the_agents(handle: int, name: str, kind: _RecordKind) -> str | None:
    """Why the file ``name`` is not a record the agent wrote, or ``None`` when it is one.

    Every record the agent writes begins as its kind says (:attr:`_RecordKind.head`),
    its ID being the file's name.
    """
    try:
        with open_kept_file(name, folder=handle) as stream:
            head = stream.read(_HEAD_BYTES)
    except UnreadableRecord as problem:
        return str(problem)
    except OSError as error:
        return f"unreadable: {error.strerror}"
    match = kind.name.fullmatch(name)
    expected = kind.head(match.group(1) if match else name).encode()
    if not head.startswith(expected):
        return f"not a {kind.what} of this agent (it does not begin as one)"
    return None


_automatic = threading.Lock()
_checked = False


def prune_when_due(environ: Mapping[str, str] = os.environ, now: float | None = None) -> None:
    """The automatic prune: once a process, and once a day at most, records older than the
    days kept are deleted. Never raises: a problem is one warning.
    """
    global _checked
    with _automatic:
        if _checked:
            return
        _checked = True
    try:
        days = _days_kept(environ)
        if days is None:
            return
        now = time.time() if now is None else now
        stamp = state_directory(environ) / STAMP_NAME
        if not _due(stamp, now):
            return
        _stamp(stamp, now)
        prune(days, environ=environ, now=now)
    except Exception as problem:  # whatever went wrong, the run goes on
        reason = getattr(problem, "strerror", None) or str(problem)
        warnings.warn(
            f"old records were not pruned ({reason}); `agent runs prune` does it by hand",
            AgentWarning,
            stacklevel=2,
        )


def _days_kept(environ: Mapping[str, str]) -> int | None:
    """The days :data:`RETENTION_ENV` asks for; ``None`` for ``off``.

    :raises UsageError: a value that is neither (nothing is pruned on a guess).
    """
    value = environ.get(RETENTION_ENV, "").strip()
    if not value:
        return DEFAULT_KEEP_DAYS
    if value.lower() == "off":
        return None
    if value.isascii() and value.isdigit() and 1 <= int(value) <= 100_000:
        return int(value)
    raise UsageError(f"{RETENTION_ENV}={value!r} is neither a number of days (1 or more) nor 'off'")


def _due(stamp: Path, now: float) -> bool:
    """Whether a day has passed since the last automatic prune (or it never ran); ``False``
    when there is no state directory yet, so nothing to prune."""
    try:
        return now - os.lstat(stamp).st_mtime >= PRUNE_INTERVAL_SECONDS
    except OSError:  # no stamp yet; or no state folder (a file in its place, say)
        return stamp.parent.is_dir()


def _stamp(stamp: Path, now: float) -> None:
    """Mark this prune first, so that agents starting meanwhile do not prune as well."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    os.close(os.open(stamp, flags, 0o600))
    os.utime(stamp, (now, now), follow_symlinks=False)

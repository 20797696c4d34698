"""Run records: everything needed to re-test a run later without asking a provider again.

Every ``agent run`` (and every task of ``agent batch``) writes one JSON file,
``<run-id>.json``, under ``$XDG_STATE_HOME/sandboxed-coding-agent/run-records``
(beside the planner-call records of :mod:`~sandboxed_coding_agent.core.records.planner_calls`,
with the same owner-only modes and whole-file writes). A record holds the seed's
name and a hash of its files, the instruction, every plan a planner proposed or
the user gave, every test a sandbox ran (the replacement it tested and the
outcome), the policies, limits and plugin versions that applied, and the run's
result or error. ``agent replay`` re-tests its plans; ``agent diff`` prints the
chosen one as a patch.

It never holds the API key: the planner refuses to send or use text holding it,
and the key is blanked from the record's text before it is written all the same.

The parts are modules of their own, and their names are importable from here:
:mod:`.run_record_layout` (what a record holds), :mod:`.run_record_files` (where
records are kept, writing and reading them); ``git_diff`` is in
:mod:`~sandboxed_coding_agent.core.plans.diffs`. A run is recorded as it goes by
:mod:`sandboxed_coding_agent.core.runs.recording`.
"""

from __future__ import annotations

from ..plans.diffs import git_diff
from .planner_calls import UnreadableRecord, open_kept_file, read_kept_file
from .run_record_files import (
    MAX_RECORD_BYTES,
    chosen_plan,
    is_run_id,
    new_run_id,
    read_run_record,
    record_path,
    records_directory,
    write_run_record,
)
from .run_record_layout import (
    RUN_RECORD_FORMAT,
    AppliedPolicy,
    PluginVersion,
    RecordedError,
    RecordedPlan,
    RecordedTest,
    RunRecord,
    SeedIdentity,
    seed_hash,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "RUN_RECORD_FORMAT",
    "AppliedPolicy",
    "PluginVersion",
    "RecordedError",
    "RecordedPlan",
    "RecordedTest",
    "RunRecord",
    "SeedIdentity",
    "UnreadableRecord",
    "chosen_plan",
    "git_diff",
    "is_run_id",
    "new_run_id",
    "open_kept_file",
    "read_kept_file",
    "read_run_record",
    "record_path",
    "records_directory",
    "seed_hash",
    "write_run_record",
]

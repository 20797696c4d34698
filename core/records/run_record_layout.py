"""What a run record holds: the classes its JSON is written from and read into.

A record is read back with the agent's one strict converter
(:mod:`~sandboxed_coding_agent.core.serialization`), so these classes are its
whole layout; :data:`RUN_RECORD_FORMAT` is that layout's version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import attrs

from ..model import Candidate, PatchPlan, RunResult, SandboxOutcome, SeedLimits, TokenUsage
from ..plans.budget import Spend
from ..seeds.git_source import SourceTree

#: Version of the record's layout; a record of another version is refused, never guessed at.
RUN_RECORD_FORMAT = 1


@attrs.frozen
class SeedIdentity:
    """Which seed a run used, and exactly which content.

    :ivar name: the seed's name.
    :ivar root: the folder its files were read from.
    :ivar sha256: a hash of every file's path and bytes (see :func:`seed_hash`);
        ``None`` when the files could not be read.
    :ivar files: the seed's files (of a git seed: its own and editable ones, the rest
        being the tree's at ``source.commit``).
    :ivar source: a git seed's repository and commit; ``None`` for a folder seed.
    """

    name: str
    root: str
    sha256: str | None
    files: tuple[str, ...]
    source: SourceTree | None = None


@attrs.frozen
class RecordedPlan:
    """A plan the run considered: proposed by a planner, or given as a file.

    :ivar plan: the plan.
    :ivar planner: the planner that proposed it; ``None`` for a plan file.
    :ivar planner_task_id: the planner call (``agent logs ID``).
    :ivar model: the model that answered.
    :ivar usage: tokens of the call.
    :ivar duration_seconds: wall time of the call.
    """

    plan: PatchPlan
    planner: str | None = None
    planner_task_id: str | None = None
    model: str | None = None
    usage: TokenUsage | None = None
    duration_seconds: float | None = None


@attrs.frozen
class RecordedTest:
    """One test a sandbox ran: the replacement it tested and what happened.

    :ivar plan: the replacement files the sandbox received.
    :ivar plan_index: which of the record's ``plans`` it is, when it is one of them.
    :ivar test_command: the command the sandbox ran.
    :ivar limits: the limits of that sandbox.
    :ivar outcome: the sandbox's outcome, with the verified report and, for a graded
        seed, the grade the run gave it.
    """

    plan: PatchPlan
    plan_index: int | None
    test_command: tuple[str, ...]
    limits: SeedLimits
    outcome: SandboxOutcome


@attrs.frozen
class AppliedPolicy:
    """A policy that checked the run's plans.

    :ivar name: the policy's name.
    :ivar parameters: its parameters (the fields of an attrs policy), as JSON values.
    """

    name: str
    parameters: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen
class PluginVersion:
    """A plugin that was loaded for the run, and which version.

    :ivar name: the plugin's name.
    :ivar distribution: the package it came from.
    :ivar version: that package's version.
    :ivar status: ``loaded``, ``disabled`` or ``broken``.
    """

    name: str
    distribution: str
    version: str
    status: str = "loaded"


@attrs.frozen
class RecordedError:
    """The error a run ended in, as its user was told.

    :ivar kind: the error's kind (``provider``, ``policy``, ``sandbox``, ...).
    :ivar message: its message.
    :ivar planner_task_id: the planner call it concerns.
    :ivar sandbox_id: the sandbox it concerns.
    :ivar spend: what the run's planner calls spent before it, when counted.
    """

    kind: str
    message: str
    planner_task_id: str | None = None
    sandbox_id: str | None = None
    spend: Spend | None = None


@attrs.frozen
class RunRecord:
    """Everything kept about one run.

    :ivar run_id: ``run-`` and 16 hexadecimal digits; the result carries it.
    :ivar started_at: when the run began, ISO 8601 in UTC.
    :ivar finished_at: when it ended.
    :ivar duration_seconds: its wall time.
    :ivar seed: the seed and a hash of its content.
    :ivar instruction: the instruction the planner was given (the seed's default when
        none was).
    :ivar planner: the planner asked, if any.
    :ivar runner: the runner that tested.
    :ivar plans: every plan considered, in the order it came.
    :ivar tests: every test a sandbox ran, in the order each ended.
    :ivar chosen_test: the test the result's verdict rests on (by sandbox ID).
    :ivar originals: the seed's text of every file a plan replaces, for ``agent diff``.
    :ivar policies: the policies that checked the plans.
    :ivar limits: the limits of the run.
    :ivar plugins: the plugins loaded, with their versions.
    :ivar result: the run's result, when it ended in one.
    :ivar error: the error it ended in, when it did.
    :ivar model: the model the planner was asked for (``agent run --model``, a batch
        task's ``model``); ``None`` for the planner's default.
    :ivar candidates: every attempt the run made, candidate by candidate (one candidate
        without ``--candidates``), whatever the run ended in: each with its planner task
        ID, verdict, rejections, tokens and cost, and for one refused before any sandbox
        the answer it was refused for (``agent logs PLANNER_TASK_ID`` has the call's
        record). Empty in a record written before it was kept.
    :ivar format: version of this layout.
    """

    run_id: str
    started_at: str
    finished_at: str
    duration_seconds: float
    seed: SeedIdentity
    instruction: str
    planner: str | None
    runner: str
    plans: tuple[RecordedPlan, ...]
    tests: tuple[RecordedTest, ...]
    chosen_test: int | None
    originals: dict[str, str]
    policies: tuple[AppliedPolicy, ...]
    limits: SeedLimits
    plugins: tuple[PluginVersion, ...]
    result: RunResult | None = None
    error: RecordedError | None = None
    model: str | None = None
    candidates: tuple[Candidate, ...] = ()
    format: int = RUN_RECORD_FORMAT


def seed_hash(files: Mapping[str, bytes]) -> str:
    """A SHA-256 over every file's path and bytes, in path order, each length-prefixed
    (so no two different sets of files can give the same input)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        name = path.encode("utf-8", errors="surrogateescape")
        digest.update(len(name).to_bytes(8, "big") + name)
        digest.update(len(files[path]).to_bytes(8, "big") + files[path])
    return digest.hexdigest()

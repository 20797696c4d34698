"""One run: plan (or take a given plan), check it with every policy, test it in a sandbox.

The seed's files are read once into memory and never written: the runner gets
a copy with the replacement applied.
"""

from __future__ import annotations

import difflib
import inspect
import traceback
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from .errors import PlanRejected, Rejection
from .model import (
    PatchPlan,
    PlannerOptions,
    PlannerResult,
    PlanRequest,
    RunResult,
    SandboxJob,
    SeedLimits,
    SeedProject,
)
from .protocols import PatchPolicy, Planner, PreparingRunner, Runner

Progress = Callable[[str], None]


def _silent(_: str) -> None:
    pass


def check_plan(
    plan: PatchPlan, seed: SeedProject, policies: Sequence[PatchPolicy]
) -> list[Rejection]:
    """Ask every policy about ``plan``; all their reasons, in policy order."""
    rejections: list[Rejection] = []
    for policy in policies:
        # A policy that cannot decide, or answers with something other than
        # rejections, must not let the plan through.
        try:
            found, problem = _rejections_in(policy.check(plan, seed))
        except Exception as error:
            found, problem = [], f"{type(error).__name__}: {error}{_raised_at(error, policy)}"
        if problem is not None:
            found = [
                Rejection(
                    policy=policy.name,
                    rule="policy-failed",
                    message=f"the policy failed: {problem}",
                )
            ]
        rejections.extend(found)
    return rejections


def _rejections_in(answer: object) -> tuple[list[Rejection], str | None]:
    """The rejections a policy's ``check`` gave, or why its answer is not rejections."""
    if answer is None:
        return [], "check() returned None; return an empty list (or yield nothing) to accept"
    if isinstance(answer, Rejection):
        return [], "check() returned one Rejection; return a list of them (or yield each)"
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        return [], (
            f"check() returned {type(answer).__name__} {_short(answer)}, "
            "not a list (or generator) of Rejection objects"
        )
    found = list(answer)
    for item in found:
        if not isinstance(item, Rejection):
            return [], f"check() gave {type(item).__name__} {_short(item)}, not a Rejection"
    return found, None


def _raised_at(error: Exception, policy: object) -> str:
    """`` (at FILE line N)``: where in the policy's own module ``error`` came from.

    The rejection is all its author gets (no traceback reaches the terminal), so
    it names the line, in the policy's file rather than in a library it called.
    """
    frames = traceback.extract_tb(error.__traceback__)
    try:
        own = inspect.getsourcefile(type(policy))
    except TypeError:  # a class defined without a file (built in C, or in a REPL)
        own = None
    mine = [frame for frame in frames if own and frame.filename == own] or frames[-1:]
    if not mine:
        return ""
    return f" (at {Path(mine[-1].filename).name} line {mine[-1].lineno})"


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def unified_diff(before: dict[str, bytes], plan: PatchPlan) -> tuple[tuple[str, ...], str]:
    """The paths the plan really changes, and a unified diff of those changes."""
    changed: list[str] = []
    chunks: list[str] = []
    for entry in plan.files:
        old_text = before.get(entry.path, b"").decode("utf-8", errors="replace")
        if old_text == entry.content:
            continue
        changed.append(entry.path)
        chunks.extend(
            difflib.unified_diff(
                old_text.splitlines(keepends=True),
                entry.content.splitlines(keepends=True),
                fromfile=f"a/{entry.path}",
                tofile=f"b/{entry.path}",
            )
        )
    diff = "".join(line if line.endswith("\n") else line + "\n" for line in chunks)
    return tuple(changed), diff


def plan_request(
    seed: SeedProject,
    instruction: str,
    files: dict[str, bytes],
    options: PlannerOptions | None = None,
) -> PlanRequest:
    return PlanRequest(
        seed=seed.name,
        instruction=instruction,
        files={path: data.decode("utf-8", errors="replace") for path, data in files.items()},
        editable_paths=seed.editable_files,
        limits=seed.limits,
        options=options or PlannerOptions(),
    )


def run(
    seed: SeedProject,
    *,
    runner: Runner,
    policies: Sequence[PatchPolicy],
    planner: Planner | None = None,
    plan: PatchPlan | None = None,
    instruction: str | None = None,
    planner_options: PlannerOptions | None = None,
    progress: Progress = _silent,
    limits: SeedLimits | None = None,
) -> RunResult:
    """Plan with ``planner`` (or use ``plan``), check it, and test it in a fresh sandbox.

    ``limits`` replaces the seed's limits for this run (for example
    ``attrs.evolve(seed.limits, memory_mb=1024)``).

    :raises ProviderError: the planner failed; no sandbox was created.
    :raises PlanRejected: a policy refused the plan; no sandbox was created.
    :raises SandboxError: the sandbox failed for a reason other than the test.
    """
    if (planner is None) == (plan is None):
        raise ValueError("give exactly one of planner and plan")
    if limits is not None:
        seed = attrs.evolve(seed, limits=limits)
    instruction = instruction or seed.default_prompt
    files = seed.read_files()
    planned: PlannerResult | None = None
    if planner is not None:
        progress(f"asking planner {planner.name!r} for a patch to seed {seed.name!r}")
        planned = planner.plan(plan_request(seed, instruction, files, planner_options))
        plan = planned.plan
        progress(f"planner task {planned.planner_task_id} proposed {', '.join(plan.paths)}")
    assert plan is not None
    task_id = planned.planner_task_id if planned else None
    rejections = check_plan(plan, seed, policies)
    if rejections:
        raise PlanRejected(rejections, planner_task_id=task_id)
    changed, diff = unified_diff(files, plan)
    patched = dict(files)
    patched.update({entry.path: entry.content.encode("utf-8") for entry in plan.files})
    job = SandboxJob(
        seed=seed.name,
        files=patched,
        test_command=seed.test_command,
        limits=seed.limits,
        runtime=seed.runtime,
    )
    if isinstance(runner, PreparingRunner):
        runner.prepare(job, progress)
    progress(f"testing in runner {runner.name!r}: {' '.join(seed.test_command)}")
    outcome = runner.run_test(job)
    progress(f"sandbox {outcome.sandbox_id} terminated")
    return RunResult(
        seed=seed.name,
        instruction=instruction,
        planner=planned.planner if planned else None,
        planner_task_id=task_id,
        runner=outcome.runner,
        sandbox_id=outcome.sandbox_id,
        changed_files=changed,
        diff=diff,
        tests_passed=outcome.tests_passed,
        test_exit_code=outcome.exit_code,
        test_output=outcome.output,
        test_output_truncated=outcome.output_truncated,
        test_timed_out=outcome.timed_out,
        limit_hit=outcome.limit_hit,
        model=planned.model if planned else None,
        usage=planned.usage if planned else None,
        planner_seconds=planned.duration_seconds if planned else None,
        response_id=planned.response_id if planned else None,
        sandbox_seconds=outcome.duration_seconds,
    )

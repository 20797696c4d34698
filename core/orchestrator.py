"""One run: plan (or take a given plan), check it with every policy, test it in a sandbox.

The seed's files are read once into memory and never written: the runner gets
a copy with the replacement applied. A run may make several attempts (each
after the first told what became of the one before) and several independent
candidates at once (each in a thread, its sandbox among at most ``jobs``).
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import os
import queue
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from . import records
from .context import MAX_LEFT_OUT_LISTED, PlannerContext, planner_context
from .errors import AgentError, PlanRejected, Rejection, UsageError
from .grading import graded
from .model import (
    FEEDBACK_OUTPUT_CHARS,
    Attempt,
    Candidate,
    Feedback,
    PatchPlan,
    PlannerOptions,
    PlannerResult,
    PlanRequest,
    RunResult,
    SandboxJob,
    SeedLimits,
    SeedProject,
)
from .protocols import PatchPolicy, Planner, PreparingRunner, Runner, StoppableRunner
from .verdict import harness_for, verified

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
    # A line without its newline (a file's last) is marked so, as git marks it: a diff that
    # left the mark out would be applied by `git apply` to another file, or refused.
    diff = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in chunks
    )
    return tuple(changed), diff


def plan_request(
    seed: SeedProject,
    instruction: str,
    files: Mapping[str, bytes],
    options: PlannerOptions | None = None,
    feedback: Feedback | None = None,
    context: PlannerContext | None = None,
) -> PlanRequest:
    """What the planner gets: what ``context`` shows of the seed (chosen from ``files`` by
    :func:`~.context.planner_context` when not given), never a hidden test, and any feedback.
    """
    if context is None:
        context = planner_context(seed, files)
    hidden = set(seed.hidden_files)
    return PlanRequest(
        seed=seed.name,
        instruction=instruction,
        files={path: text for path, text in context.files.items() if path not in hidden},
        editable_paths=seed.editable_files,
        limits=seed.limits,
        options=options or PlannerOptions(),
        feedback=feedback,
        repository_map=context.repository_map,
        left_out=context.left_out[:MAX_LEFT_OUT_LISTED],
        left_out_count=len(context.left_out),
    )


def prompt_summary(request: PlanRequest, details: Mapping[str, object]) -> str | None:
    """``prompt: 48,213 bytes; 12 context files left out``: the prompt's size as the planner
    reported it in its details (:class:`~.records.ProviderRequestInfo`), and what was left
    out; ``None`` when there is neither to say."""
    info = records.reported_request(details)
    said = []
    if info is not None and info.prompt_bytes is not None:
        said.append(f"prompt: {info.prompt_bytes:,} bytes")
    if request.left_out_count:
        plural = "" if request.left_out_count == 1 else "s"
        said.append(f"{request.left_out_count:,} context file{plural} left out")
    return "; ".join(said) or None


#: What a repair attempt is told about a failed test of a seed with hidden tests, instead of
#: its output: the output may quote a hidden test, which no planner may ever see.
HIDDEN_TEST_FAILED = "a hidden test failed"
OUTPUT_WITHHELD = (
    "the test failed; its output is withheld because this seed has hidden tests, "
    "which the output could quote"
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
    attempts: int = 1,
    candidates: int = 1,
    jobs: int | None = None,
    first_pass: bool = False,
    environ: Mapping[str, str] = os.environ,
) -> RunResult:
    """Plan with ``planner`` (or use ``plan``), check it, and test it in a fresh sandbox.

    ``limits`` replaces the seed's limits for this run (for example
    ``attrs.evolve(seed.limits, memory_mb=1024)``).

    Every planner call is recorded for ``agent logs`` (see
    :func:`~sandboxed_coding_agent.core.records.call_planner`) in the state
    directory ``environ`` names (``XDG_STATE_HOME``, ``HOME``), with the key it
    holds blanked.

    With ``attempts`` above 1, a plan whose test fails or that a policy refuses is
    followed by another planner call whose request carries :class:`Feedback` on it,
    until one passes or ``attempts`` were made. With ``candidates`` above 1, that
    many such tries run at once, in threads, with at most ``jobs`` sandboxes at a
    time (default: the CPU count; planner calls, which wait on the network, are not
    bounded); ``first_pass`` stops the others (their sandboxes are terminated, their
    planner calls abandoned) as soon as one passes.

    :raises ProviderError: a planner call failed; no further sandbox is created, and
        the error's ``attempts`` (and ``candidates``) hold what was made before it.
    :raises PlanRejected: no plan of the chosen candidate reached a sandbox: the last
        one was refused.
    :raises SandboxError: a sandbox failed for a reason other than the test.
    """
    if (planner is None) == (plan is None):
        raise ValueError("give exactly one of planner and plan")
    if attempts < 1 or candidates < 1:
        raise ValueError("attempts and candidates are at least 1")
    if plan is not None and (attempts > 1 or candidates > 1):
        raise UsageError(
            "--attempts and --candidates need a planner: a plan file is the same plan every time"
        )
    if limits is not None:
        seed = attrs.evolve(seed, limits=limits)
    files = seed.read_files()
    context = None
    if planner is not None:  # chosen once: every attempt and candidate is shown the same
        context = planner_context(seed, files, environ=environ, progress=progress)
        if context.repository_map is not None:
            progress(context.describe())
    search = _Search(
        seed=seed,
        runner=runner,
        policies=tuple(policies),
        planner=planner,
        plan=plan,
        instruction=instruction or seed.default_prompt,
        files=files,
        context=context,
        options=planner_options or PlannerOptions(),
        progress=progress,
        attempts=attempts,
        parallel=candidates > 1,
        first_pass=first_pass,
        sandboxes=_Sandboxes(jobs or os.cpu_count() or 1),
        environ=environ,
    )
    # One candidate runs in this thread, so that Ctrl-C reaches its sandbox as it always has.
    found = search.in_parallel(candidates) if candidates > 1 else [search.candidate(1)]
    return search.result(found)


def choose(candidates: Sequence[Candidate]) -> Candidate | None:
    """The candidate a run's result describes.

    The one that passed in the fewest attempts, then with the smallest diff (changed
    lines, then characters), then the lowest number; when none passed, the
    lowest-numbered one that was tested; ``None`` when no plan was tested.
    """
    passing = [c for c in candidates if c.passed]
    if passing:

        def rank(candidate: Candidate) -> tuple[int, int, int, int]:
            attempt = _deciding_attempt(candidate)
            assert attempt is not None
            return (
                attempt.number,
                _changed_lines(attempt.diff),
                len(attempt.diff),
                candidate.number,
            )

        return min(passing, key=rank)
    tested = [c for c in candidates if _deciding_attempt(c) is not None]
    return min(tested, key=lambda c: c.number) if tested else None


def _deciding_attempt(candidate: Candidate) -> Attempt | None:
    """The attempt that passed, or else the last one tested."""
    for attempt in candidate.attempts:
        if attempt.passed:
            return attempt
    tested = [attempt for attempt in candidate.attempts if attempt.tested]
    return tested[-1] if tested else None


def _changed_lines(diff: str) -> int:
    return sum(
        1
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    )


def feedback_on(attempt: Attempt, plan: PatchPlan | None, seed: SeedProject) -> Feedback:
    """What the next attempt is told about ``attempt``; never a hidden test or its output.

    For a seed with hidden tests the output is withheld whatever failed, since it
    could quote a hidden test; the note says ``"a hidden test failed"`` when the
    output names a hidden test file (by path, file name or module name).
    """
    files = plan.files if plan is not None else ()
    if not attempt.tested:
        return Feedback(attempt=attempt.number, files=files, rejections=attempt.rejections)
    output: str | None = attempt.test_output[-FEEDBACK_OUTPUT_CHARS:]
    note = None
    exit_code = attempt.test_exit_code
    if seed.hidden_files:
        # Nor the exit code: code that reads a hidden test could send 8 bits of it back in
        # the status. The next attempt learns failed, timed out or which limit, no more.
        output, exit_code = None, None
        named = _names_a_file(attempt.test_output, seed.hidden_files)
        note = HIDDEN_TEST_FAILED if named else OUTPUT_WITHHELD
    return Feedback(
        attempt=attempt.number,
        files=files,
        test_exit_code=exit_code,
        test_timed_out=attempt.test_timed_out,
        limit_hit=attempt.limit_hit,
        test_output=output,
        note=note,
    )


def _names_a_file(text: str, paths: Iterable[str]) -> bool:
    for path in paths:
        stem = path.rsplit(".", 1)[0] if path.endswith(".py") else path
        names = {path, path.rsplit("/", 1)[-1], stem.replace("/", "."), stem.rsplit("/", 1)[-1]}
        if any(name and name in text for name in names):
            return True
    return False


class _Stopped(Exception):
    """The run stopped (a candidate passed under ``--first-pass``, an error, Ctrl-C)."""


class _Sandboxes:
    """At most ``jobs`` sandboxes at once, and a way to stop them all and wait until gone."""

    def __init__(self, jobs: int) -> None:
        self.slots = threading.BoundedSemaphore(max(1, jobs))
        self.stop = threading.Event()
        self._running = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one sandbox slot; raises :class:`_Stopped` once :meth:`stop_all` was called."""
        with self.slots:
            with self._changed:
                if self.stop.is_set():
                    raise _Stopped
                self._running += 1
            try:
                yield
            finally:
                with self._changed:
                    self._running -= 1
                    self._changed.notify_all()

    def stop_all(self) -> None:
        """Start no more sandboxes, stop the running ones, and wait until every one is gone.

        A :class:`StoppableRunner` terminates its sandbox at once; any other runner's
        sandbox is waited for until its test ends (its own timeout bounds that).
        """
        self.stop.set()
        with self._changed:
            self._changed.wait_for(lambda: self._running == 0)


@attrs.define
class _Search:
    """One run's candidates and their attempts."""

    seed: SeedProject
    runner: Runner
    policies: tuple[PatchPolicy, ...]
    planner: Planner | None
    plan: PatchPlan | None
    instruction: str
    files: dict[str, bytes]
    context: PlannerContext | None
    options: PlannerOptions
    progress: Progress
    attempts: int
    parallel: bool
    first_pass: bool
    sandboxes: _Sandboxes
    environ: Mapping[str, str]
    #: Every candidate's attempts so far, kept as they are made so a stopped run reports them.
    made: dict[int, list[Attempt]] = attrs.Factory(dict)
    runner_name: str = ""
    _prepared: bool = False
    _preparing: threading.Lock = attrs.Factory(threading.Lock)

    @property
    def reports_attempts(self) -> bool:
        return self.attempts > 1 or self.parallel

    def say(self, number: int, message: str) -> None:
        self.progress(f"candidate {number}: {message}" if self.parallel else message)

    def candidate(self, number: int) -> Candidate:
        """Attempt, with feedback, until a plan passes or every attempt is made."""
        made = self.made.setdefault(number, [])
        feedback: Feedback | None = None
        try:
            for count in range(1, self.attempts + 1):
                if self.sandboxes.stop.is_set():
                    return Candidate(number, tuple(made), stopped=True)
                attempt, plan = self.attempt(number, count, feedback, made)
                if attempt.verdict in ("passed", "stopped"):
                    break
                feedback = feedback_on(attempt, plan, self.seed)
        except AgentError as error:
            if self.reports_attempts:
                error.attempts = tuple(made)
            raise
        stopped = bool(made) and made[-1].verdict == "stopped"
        return Candidate(number, tuple(made), stopped=stopped)

    def attempt(
        self, number: int, count: int, feedback: Feedback | None, made: list[Attempt]
    ) -> tuple[Attempt, PatchPlan | None]:
        """One planner call (or the given plan), its policies and its test; noted in ``made``."""
        plan = self.plan
        planned: PlannerResult | None = None
        if self.planner is not None:
            of = f" (attempt {count} of {self.attempts})" if self.attempts > 1 else ""
            self.say(
                number,
                f"asking planner {self.planner.name!r} for a patch to seed {self.seed.name!r}{of}",
            )
            request = plan_request(
                self.seed, self.instruction, self.files, self.options, feedback, self.context
            )
            try:
                planned = records.call_planner(self.planner, request, environ=self.environ)
            except PlanRejected as error:  # the planner's own check of the contract
                if not self.reports_attempts:
                    raise
                refused = Attempt(
                    count,
                    "rejected",
                    planner_task_id=error.planner_task_id,
                    rejections=error.rejections,
                )
                made.append(refused)
                self.say(number, f"planner task {error.planner_task_id}: the answer was rejected")
                return refused, None
            plan = planned.plan
            summary = prompt_summary(request, planned.details)
            if summary is not None:
                self.say(number, summary)
            self.say(
                number, f"planner task {planned.planner_task_id} proposed {', '.join(plan.paths)}"
            )
        assert plan is not None
        called = Attempt(
            count,
            "rejected",
            planner_task_id=planned.planner_task_id if planned else None,
            model=planned.model if planned else None,
            response_id=planned.response_id if planned else None,
            usage=planned.usage if planned else None,
            planner_seconds=planned.duration_seconds if planned else None,
        )
        rejections = check_plan(plan, self.seed, self.policies)
        if rejections:
            if not self.reports_attempts:
                raise PlanRejected(rejections, planner_task_id=called.planner_task_id)
            refused = attrs.evolve(called, rejections=tuple(rejections))
            made.append(refused)
            self.say(number, f"the plan was rejected ({len(rejections)} reasons)")
            return refused, plan
        changed, diff = unified_diff(self.files, plan)
        patched = dict(self.files)
        patched.update({entry.path: entry.content.encode("utf-8") for entry in plan.files})
        job = SandboxJob(
            seed=self.seed.name,
            files=patched,
            test_command=self.seed.test_command,
            limits=self.seed.limits,
            runtime=self.seed.runtime,
            harness=harness_for(self.seed, patched),
            tree=self.seed.source,
        )
        with self.sandboxes.slot():
            self.prepare(job)
            self.say(
                number, f"testing in runner {self.runner.name!r}: {' '.join(job.test_command)}"
            )
            if self.parallel and isinstance(self.runner, StoppableRunner):
                outcome = self.runner.run_test_until(job, self.sandboxes.stop)
            else:
                outcome = self.runner.run_test(job)
            outcome = graded(verified(job, outcome), self.seed)
            self.say(number, f"sandbox {outcome.sandbox_id} terminated")
            if outcome.tests_passed:
                verdict = "passed"
            elif self.sandboxes.stop.is_set():
                verdict = "stopped"
            else:
                verdict = "failed"
            tested = attrs.evolve(
                called,
                verdict=verdict,
                changed_files=changed,
                diff=diff,
                sandbox_id=outcome.sandbox_id,
                test_exit_code=outcome.exit_code,
                test_output=outcome.output,
                test_output_truncated=outcome.output_truncated,
                test_timed_out=outcome.timed_out,
                limit_hit=outcome.limit_hit,
                sandbox_seconds=outcome.duration_seconds,
                test_report=outcome.test_report,
                grade=outcome.grade,
            )
            # Noted before the slot is given back: stop_all() returns only once it is.
            made.append(tested)
        self.runner_name = outcome.runner
        return tested, plan

    def prepare(self, job: SandboxJob) -> None:
        if not isinstance(self.runner, PreparingRunner):
            return
        with self._preparing:  # once per run, whichever candidate gets there first
            if not self._prepared:
                self.runner.prepare(job, self.progress)
                self._prepared = True

    def in_parallel(self, count: int) -> list[Candidate]:
        """Run ``count`` candidates at once, each in a thread of its own."""
        finished: queue.Queue[tuple[int, Candidate | BaseException]] = queue.Queue()

        def work(number: int) -> None:
            try:
                finished.put((number, self.candidate(number)))
            except _Stopped:
                finished.put((number, Candidate(number, tuple(self.made[number]), stopped=True)))
            except BaseException as error:  # handed to the main thread, which raises it
                finished.put((number, error))

        done: dict[int, Candidate] = {}
        threads = [
            # Daemon threads: a planner call still waiting on the network when the run ends
            # is abandoned; sandboxes are only ever started under the slots, which stop_all
            # closes and waits for.
            threading.Thread(target=work, args=(number,), name=f"candidate-{number}", daemon=True)
            for number in range(1, count + 1)
        ]
        try:
            for thread in threads:
                thread.start()
            while len(done) < count:
                try:
                    number, got = finished.get(timeout=0.1)
                except queue.Empty:
                    continue
                if isinstance(got, BaseException):
                    self.sandboxes.stop_all()
                    if isinstance(got, AgentError):
                        got.candidates = tuple(self._snapshot(done, count))
                    raise got
                done[number] = got
                if self.first_pass and got.passed:
                    self.progress(f"candidate {number} passed; stopping the others")
                    self.sandboxes.stop_all()
                    break
        except KeyboardInterrupt:
            self.sandboxes.stop_all()
            raise
        while not finished.empty():  # those that finished while the others were stopped
            number, got = finished.get_nowait()
            if isinstance(got, Candidate):
                done[number] = got
        return self._snapshot(done, count)

    def _snapshot(self, done: Mapping[int, Candidate], count: int) -> list[Candidate]:
        return [
            done.get(number) or Candidate(number, tuple(self.made.get(number, ())), stopped=True)
            for number in range(1, count + 1)
        ]

    def result(self, candidates: Sequence[Candidate]) -> RunResult:
        chosen = choose(candidates)
        deciding = _deciding_attempt(chosen) if chosen is not None else None
        if chosen is None or deciding is None:
            tried = [c for c in candidates if c.attempts]
            if not tried:
                raise AgentError("the run stopped before any plan was made")
            last = tried[0].attempts[-1]
            error = PlanRejected(last.rejections, planner_task_id=last.planner_task_id)
            if self.reports_attempts:
                error.attempts = tried[0].attempts
                error.candidates = tuple(candidates) if self.parallel else ()
            raise error
        return RunResult(
            seed=self.seed.name,
            instruction=self.instruction,
            planner=self.planner.name if self.planner else None,
            planner_task_id=deciding.planner_task_id,
            runner=self.runner_name or self.runner.name,
            sandbox_id=deciding.sandbox_id or "",
            changed_files=deciding.changed_files,
            diff=deciding.diff,
            tests_passed=deciding.passed,
            test_exit_code=deciding.test_exit_code,
            test_output=deciding.test_output,
            test_output_truncated=deciding.test_output_truncated,
            test_timed_out=deciding.test_timed_out,
            limit_hit=deciding.limit_hit,
            model=deciding.model,
            usage=deciding.usage,
            planner_seconds=deciding.planner_seconds,
            response_id=deciding.response_id,
            sandbox_seconds=deciding.sandbox_seconds or 0.0,
            attempts=chosen.attempts,
            passed_attempt=deciding.number if deciding.passed else None,
            candidates=tuple(candidates) if self.parallel else (),
            chosen_candidate=chosen.number,
            test_report=deciding.test_report,
            grade=deciding.grade,
        )

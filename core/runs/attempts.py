"""The search of one run: its candidates, each a series of attempts, and the one chosen.

An attempt is one planner call (or the given plan), its policies and its test in
a fresh sandbox; each attempt after the first is told what became of the one
before. Several candidates run at once, each in a thread, their sandboxes among
at most ``jobs``; the run's result describes the one :func:`choose` picks.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs

from ..errors import AgentError, Interrupted, PlanRejected, Rejection
from ..model import (
    MAX_ANSWER_CHARS,
    Attempt,
    Candidate,
    Feedback,
    PatchPlan,
    PlannerOptions,
    PlannerResult,
    PlanRequest,
    RunResult,
    SandboxJob,
    SeedProject,
)
from ..plans.budget import BudgetReached, Ledger
from ..plans.context import PlannerContext
from ..plans.diffs import changed_lines, unified_diff
from ..plans.plan_requests import feedback_on, plan_request, prompt_summary
from ..plans.policy_checks import check_plan
from ..protocols import (
    PatchPolicy,
    Planner,
    PreparingRunner,
    Runner,
    SessionPlanner,
    StoppableRunner,
)
from ..provider import MODEL_ENV
from ..records import planner_calls
from ..verdicts.evidence import TestList, evidence_tier
from ..verdicts.grading import is_graded
from ..verdicts.output_tests import NO_TEST_COMMAND
from ..verdicts.trusted_tests import checked, list_tests, needs_known, needs_list
from ..verdicts.verdict import graded, harness_for, judged, verified
from .events import Emit, no_events
from .exploration import Journal, open_session
from .sessions import Session
from .task_pool import StopRequest

Progress = Callable[[str], None]


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
                changed_lines(attempt.diff),
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


def _kept(answer: str | None) -> str | None:
    """What an attempt keeps of a refused answer: its start, saying how much was left out."""
    if answer is None or len(answer) <= MAX_ANSWER_CHARS:
        return answer
    left_out = len(answer) - MAX_ANSWER_CHARS
    return f"{answer[:MAX_ANSWER_CHARS]}\n[... {left_out:,} characters left out ...]"


class _Stopped(Exception):
    """The run stopped (a candidate passed under ``--first-pass``, an error, Ctrl-C)."""


class Sandboxes:
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
class Search:
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
    sandboxes: Sandboxes
    environ: Mapping[str, str]
    #: What the run's planner calls spend, and the budget they are held to.
    ledger: Ledger = attrs.Factory(Ledger)
    #: The budget that stopped a candidate before its next planner call, if one did.
    budget_stop: BudgetReached | None = None
    #: Where the run's events go (``agent batch --events``); see :mod:`~.events`.
    emit: Emit = no_events
    #: The batch's (or the caller's) stop request: once made, the run's ``sandboxes.stop``
    #: is set, and the run ends in :class:`~.errors.Interrupted` unless it passed.
    interrupt: StopRequest | None = None
    #: Every candidate's attempts so far, kept as they are made so a stopped run reports them.
    made: dict[int, list[Attempt]] = attrs.Factory(dict)
    runner_name: str = ""
    #: The recorded run this is, whose planner calls that explore it notes.
    run_id: str | None = None
    _prepared: bool = False
    _preparing: threading.Lock = attrs.Factory(threading.Lock)
    #: The trusted list (see :mod:`~.trusted_tests`), made before the first patch is tested.
    test_list: TestList | None = None
    _listing: threading.Lock = attrs.Factory(threading.Lock)
    _listed: bool = False

    @property
    def reports_attempts(self) -> bool:
        return self.attempts > 1 or self.parallel

    def say(self, number: int, message: str) -> None:
        self.progress(f"candidate {number}: {message}" if self.parallel else message)

    def candidate(self, number: int) -> Candidate:
        """Attempt, with feedback, until a plan passes or every attempt is made."""
        made = self.made.setdefault(number, [])
        feedback: Feedback | None = None
        session = self.session()
        try:
            for count in range(1, self.attempts + 1):
                if self.sandboxes.stop.is_set():
                    return Candidate(number, tuple(made), stopped=True)
                attempt, plan, answer = self.attempt(number, count, feedback, made, session)
                usage = attempt.usage
                self.emit(
                    "attempt-done",
                    {
                        "candidate": number,
                        "attempt": count,
                        "verdict": attempt.verdict,
                        "prompt_tokens": usage.prompt_tokens if usage else None,
                        "completion_tokens": usage.completion_tokens if usage else None,
                    },
                )
                if attempt.verdict in ("passed", "stopped"):
                    break
                feedback = feedback_on(attempt, plan, self.seed, answer)
        except _Stopped:  # the run was stopped before this attempt's sandbox started
            return Candidate(number, tuple(made), stopped=True)
        except BudgetReached as reached:
            # No further planner call; the other candidates' sandboxes finish their tests.
            self.budget_stop = self.budget_stop or reached
            if self.parallel:  # else the run ends in it, and says so once
                self.say(number, reached.message)
            return Candidate(number, tuple(made), stopped=True)
        except AgentError as error:
            if self.reports_attempts:
                error.attempts = tuple(made)
            raise
        stopped = bool(made) and made[-1].verdict == "stopped"
        return Candidate(number, tuple(made), stopped=stopped)

    def session(self) -> Session | None:
        """A session on the seed for a planner that explores (one per candidate, which
        each of its attempts continues); ``None`` for any other planner.

        Its commands run in the run's runner, each holding a sandbox slot while it runs.
        """
        if not isinstance(self.planner, SessionPlanner):
            return None
        runner = getattr(self.runner, "unrecorded", self.runner)
        return open_session(runner, self.seed, self.sandboxes.slot)

    def attempt(
        self,
        number: int,
        count: int,
        feedback: Feedback | None,
        made: list[Attempt],
        session: Session | None = None,
    ) -> tuple[Attempt, PatchPlan | None, str | None]:
        """One planner call (or the given plan), its policies and its test; noted in ``made``.

        :returns: the attempt, its plan (``None`` when the planner's answer was refused
            before it was one) and the answer as the planner's backend wrote it, if kept.
        """
        plan = self.plan
        planned: PlannerResult | None = None
        cost: float | None = None
        if self.planner is not None:
            self.ledger.begin_call()  # before anything is said: a budget reached ends it here
            of = f" (attempt {count} of {self.attempts})" if self.attempts > 1 else ""
            self.say(
                number,
                f"asking planner {self.planner.name!r} for a patch to seed {self.seed.name!r}{of}",
            )
            request = plan_request(
                self.seed, self.instruction, self.files, self.options, feedback, self.context
            )
            clock = time.monotonic()
            ask: Callable[[PlanRequest], PlannerResult] | None = None
            if session is not None and isinstance(self.planner, SessionPlanner):
                journal = Journal(self.ledger, self._models(None), self.environ, self.run_id)
                ask = functools.partial(
                    self.planner.plan_in_session, session=session, journal=journal
                )
            try:
                planned = planner_calls.call_planner(
                    self.planner, request, environ=self.environ, ask=ask
                )
            except PlanRejected as error:  # the planner's own check of the contract
                cost = self.ledger.add_usage(error.usage, self._models(None))
                refused = Attempt(
                    count,
                    "rejected",
                    planner_task_id=error.planner_task_id,
                    rejections=error.rejections,
                    usage=error.usage,
                    planner_seconds=round(time.monotonic() - clock, 3),
                    cost=cost,
                    answer=_kept(error.answer),
                )
                made.append(refused)  # kept even when the run ends in it, for its record
                if not self.reports_attempts:
                    raise
                self._verdict(number, count, error.rejections)
                self.say(number, f"planner task {error.planner_task_id}: the answer was rejected")
                return refused, None, error.answer
            except AgentError as error:
                self.ledger.add_usage(error.usage, self._models(None))
                raise
            cost = self.ledger.add_usage(planned.usage, self._models(planned.model))
            plan = planned.plan
            self.emit(
                "plan-received",
                {
                    "candidate": number,
                    "attempt": count,
                    "planner_task_id": planned.planner_task_id,
                    "model": planned.model,
                    "files": list(plan.paths),
                },
            )
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
            cost=cost,
        )
        rejections = check_plan(plan, self.seed, self.policies)
        self._verdict(number, count, rejections)
        if rejections:
            answer = planned.answer if planned else None
            refused = attrs.evolve(called, rejections=tuple(rejections), answer=_kept(answer))
            made.append(refused)  # kept even when the run ends in it, for its record
            if not self.reports_attempts:
                raise PlanRejected(rejections, planner_task_id=called.planner_task_id)
            self.say(number, f"the plan was rejected ({len(rejections)} reasons)")
            return refused, plan, planned.answer if planned else None
        changed, diff = unified_diff(self.files, plan)
        patched = dict(self.files)
        patched.update({entry.path: entry.content.encode("utf-8") for entry in plan.files})
        job = SandboxJob(
            seed=self.seed.name,
            files=patched,
            test_command=self.seed.test_command or NO_TEST_COMMAND,
            limits=self.seed.limits,
            runtime=self.seed.runtime,
            harness=harness_for(self.seed, patched),
            tree=self.seed.source,
            output_probes=self.seed.output_probes,
        )
        with self.sandboxes.slot():
            self.prepare(job)
            listed = self.needed_tests()
            self.say(
                number, f"testing in runner {self.runner.name!r}: {' '.join(job.test_command)}"
            )
            where = {"candidate": number, "attempt": count}
            self.emit("sandbox-started", {**where, "runner": self.runner.name})
            # Stoppable when something else may stop it: another candidate, or a stop request.
            stoppable = self.parallel or self.interrupt is not None
            if stoppable and isinstance(self.runner, StoppableRunner):
                outcome = self.runner.run_test_until(job, self.sandboxes.stop)
            else:
                outcome = self.runner.run_test(job)
            known = listed.ids if listed is not None else None
            outcome = graded(verified(job, judged(self.seed, job, outcome)), self.seed, known)
            # A graded seed's verdict is its grade: its list only says what a cut name names.
            needed = None if is_graded(self.seed) else listed
            outcome = attrs.evolve(outcome, test_report=checked(outcome.test_report, needed))
            self.emit(
                "sandbox-ended",
                {
                    **where,
                    "sandbox_id": outcome.sandbox_id,
                    "exit_code": outcome.exit_code,
                    "timed_out": outcome.timed_out,
                    "limit_hit": outcome.limit_hit,
                    "seconds": outcome.duration_seconds,
                },
            )
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
                output_tests=outcome.output_tests,
            )
            # Noted before the slot is given back: stop_all() returns only once it is.
            made.append(tested)
        self.runner_name = outcome.runner
        return tested, plan, planned.answer if planned else None

    def _verdict(self, number: int, count: int, rejections: Sequence[Rejection]) -> None:
        rules = [f"{rejection.policy}:{rejection.rule}" for rejection in rejections]
        self.emit(
            "policy-verdict",
            {"candidate": number, "attempt": count, "accepted": not rules, "rules": rules},
        )

    def _models(self, answered: str | None) -> tuple[str | None, ...]:
        """The names a call is priced by: the model asked for (this run's, else the
        planner's default that ``CODING_AGENT_MODEL`` names), then the one that answered."""
        return (self.options.model or self.environ.get(MODEL_ENV), answered)

    def prepare(self, job: SandboxJob) -> None:
        if not isinstance(self.runner, PreparingRunner):
            return
        with self._preparing:  # once per run, whichever candidate gets there first
            if not self._prepared:
                self.runner.prepare(job, self.progress)
                self._prepared = True

    def needed_tests(self) -> TestList | None:
        """The trusted list, made once per run whichever candidate gets there first (in
        that candidate's sandbox slot); ``None`` for a seed whose verdict needs none."""
        with self._listing:
            if not self._listed:
                if needs_list(self.seed, self.files) or needs_known(self.seed, self.files):
                    self.test_list = list_tests(
                        self.seed,
                        self.files,
                        getattr(self.runner, "unrecorded", self.runner),
                        environ=self.environ,
                        progress=self.progress,
                    )
                    if self.test_list.partial is not None:
                        self.progress(
                            f"the list of needed tests is partial: {self.test_list.partial}"
                        )
                self._listed = True
        return self.test_list

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
        passed = deciding is not None and deciding.passed
        if self.interrupt is not None and self.interrupt.is_set() and not passed:
            stopped = Interrupted(
                "interrupted: the run started no further planner call or sandbox, "
                "and its running sandboxes were stopped"
            )
            stopped.attempts = tuple(a for c in candidates for a in c.attempts)
            stopped.candidates = tuple(candidates) if self.parallel else ()
            raise stopped
        if self.budget_stop is not None and not (deciding is not None and deciding.passed):
            # Nothing passed, and the budget stopped what might have: that is the outcome.
            reached = self.budget_stop
            tried = [c for c in candidates if c.attempts]
            if self.reports_attempts and tried:
                reached.attempts = (chosen or tried[0]).attempts
                reached.candidates = tuple(candidates) if self.parallel else ()
            raise reached
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
            spend=self.ledger.spent,
            test_list=self.test_list,
            output_tests=deciding.output_tests,
            evidence=evidence_tier(
                deciding.test_report,
                test_command=bool(self.seed.test_command),
                output_tests=bool(self.seed.output_tests),
            ),
        )

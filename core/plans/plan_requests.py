"""What a planner is sent: the request for a plan, and feedback on the attempt before.

A request never holds a hidden test, and feedback never holds a hidden test's
output (nor the exit code, which code that read one could choose), nor what a
hidden output test gave or had to give.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ..model import (
    FEEDBACK_OUTPUT_CHARS,
    Attempt,
    Feedback,
    PatchPlan,
    PlannerOptions,
    PlanRequest,
    SeedProject,
)
from ..records import planner_calls
from .context import MAX_LEFT_OUT_LISTED, PlannerContext, planner_context


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
    info = planner_calls.reported_request(details)
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


def feedback_on(
    attempt: Attempt, plan: PatchPlan | None, seed: SeedProject, answer: str | None = None
) -> Feedback:
    """What the next attempt is told about ``attempt``; never a hidden test or its output.

    ``answer`` is the attempt's answer as the planner's backend wrote it, when the
    planner kept it (the model's own words, which the conversation shows it again).

    For a seed with hidden tests the output is withheld whatever failed, since it
    could quote a hidden test; the note says ``"a hidden test failed"`` when the
    output names a hidden test file (by path, file name or module name).
    """
    files = plan.files if plan is not None else ()
    if not attempt.tested:
        return Feedback(
            attempt=attempt.number, files=files, rejections=attempt.rejections, answer=answer
        )
    output: str | None = attempt.test_output[-FEEDBACK_OUTPUT_CHARS:]
    note = None
    exit_code = attempt.test_exit_code
    if seed.hidden_files:
        # Nor the exit code: code that reads a hidden test could send 8 bits of it back in
        # the status. The next attempt learns failed, timed out or which limit, no more.
        output, exit_code = None, None
        named = _names_a_file(attempt.test_output, seed.hidden_files)
        note = HIDDEN_TEST_FAILED if named else OUTPUT_WITHHELD
    said = output_tests_note(attempt)
    if said:
        note = f"{note}; {said}" if note else said
    return Feedback(
        attempt=attempt.number,
        files=files,
        test_exit_code=exit_code,
        test_timed_out=attempt.test_timed_out,
        limit_hit=attempt.limit_hit,
        test_output=output,
        note=note,
        answer=answer,
    )


def output_tests_note(attempt: Attempt) -> str | None:
    """What the next attempt is told of the output tests that failed: a visible one's
    values; of a hidden one, only that it failed (never what it gave nor must give, nor
    how it failed, which could tell a value apart)."""
    said = []
    for test in attempt.output_tests:
        if test.passed:
            continue
        if test.hidden:
            said.append(f"hidden output test {test.name!r} failed")
        else:
            said.append(f"output test {test.name!r} failed: {test.why}")
    return "; ".join(said) or None


def _names_a_file(text: str, paths: Iterable[str]) -> bool:
    for path in paths:
        stem = path.rsplit(".", 1)[0] if path.endswith(".py") else path
        names = {path, path.rsplit("/", 1)[-1], stem.replace("/", "."), stem.rsplit("/", 1)[-1]}
        if any(name and name in text for name in names):
            return True
    return False


class ShownFiles(Mapping[str, str]):
    """A seed's files as a planner may see them, by path, each read when first looked up:
    what an edit in a plan file (``agent run --plan``) applies to. Never a hidden test,
    which is looked up as a file that does not exist."""

    def __init__(self, seed: SeedProject) -> None:
        hidden = set(seed.hidden_files)
        self._seed = seed
        self._paths = [path for path in seed.files if path not in hidden]
        self._known = set(self._paths)
        self._read: dict[str, str] = {}

    def __getitem__(self, path: str) -> str:
        if path not in self._known:
            raise KeyError(path)
        if path not in self._read:
            data = self._seed.read_tree_files([path]).get(path, b"")
            self._read[path] = data.decode("utf-8", errors="replace")  # as the planner is shown
        return self._read[path]

    def __contains__(self, path: object) -> bool:
        return path in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

"""Plans and planner calls: what a planner is asked (:class:`PlanRequest`), with which
options (:class:`PlannerOptions`) and feedback (:class:`Feedback`), and what it gives back
(:class:`PlannerResult`, holding a :class:`PatchPlan` of whole-file replacements).

Part of the data model: every name here is importable from
:mod:`sandboxed_coding_agent.core.model` too, and round-trips through the cattrs
converter, so a planner may run in another process or on another machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from attrs import validators as v

from ..errors import Rejection
from ..seeds.project import LimitError, SeedLimits, _as_tuple

#: The longest model name accepted (``CODING_AGENT_MODEL``, ``--model``, a task's ``model``).
MAX_MODEL_CHARS = 160
#: C0 and C1 control characters: kept out of the model name and out of quoted provider text.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: The shapes a planner may answer in (``--edit-format``); :mod:`.edits` reads each.
EDIT_FORMATS = ("whole", "search-replace", "udiff")
DEFAULT_EDIT_FORMAT = "whole"


@attrs.frozen
class PatchFile:
    """One complete replacement of a file of the seed project.

    :ivar path: the file's path relative to the project root, ``/``-separated.
    :ivar content: the file's whole new text.
    """

    path: str = attrs.field(validator=v.instance_of(str))
    content: str = attrs.field(validator=v.instance_of(str))


def _as_files(files: Iterable[PatchFile]) -> tuple[PatchFile, ...]:
    # A typed converter, so that mypy --strict accepts PatchPlan([PatchFile(...)]).
    return tuple(files)


@attrs.frozen
class PatchPlan:
    """What a planner proposes: whole-file replacements, never a partial edit.

    :ivar files: the replacements, in the plan's order (a list is turned into a tuple).
    """

    files: tuple[PatchFile, ...] = attrs.field(
        converter=_as_files,
        validator=v.deep_iterable(v.instance_of(PatchFile)),
    )

    @property
    def paths(self) -> tuple[str, ...]:
        """The path of each file, in order."""
        return tuple(f.path for f in self.files)


def check_model_name(name: str, what: str) -> str:
    """Return ``name`` if it can name a model, as ``CODING_AGENT_MODEL`` is checked: not
    blank, UTF-8 text of at most ``MAX_MODEL_CHARS`` characters, no control characters.

    :param what: how messages name the value (``--model``, ``'model'``).
    :raises LimitError: it cannot.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise LimitError(f"{what} is not valid UTF-8 text") from None
    if not name.strip() or len(name) > MAX_MODEL_CHARS or CONTROL.search(name):
        raise LimitError(
            f"{what} must be a model name of 1 to {MAX_MODEL_CHARS} characters with no "
            f"control characters, not {name[:MAX_MODEL_CHARS]!r}"
        )
    return name


def model_name(_: object, attribute: Any, value: str | None) -> None:
    """A validator: ``None``, or a name :func:`check_model_name` accepts."""
    if value is not None:
        check_model_name(value, repr(attribute.name))


def check_edit_format(value: object, what: str) -> str:
    """Return ``value`` if it is one of :data:`EDIT_FORMATS`.

    :param what: how messages name the value (``--edit-format``, ``'edit_format'``).
    :raises LimitError: it is not.
    """
    if not isinstance(value, str) or value not in EDIT_FORMATS:
        raise LimitError(f"{what} must be one of {', '.join(EDIT_FORMATS)}, not {value!r}")
    return value


def edit_format_name(_: object, attribute: Any, value: str) -> None:
    """A validator: a name :func:`check_edit_format` accepts."""
    check_edit_format(value, repr(attribute.name))


#: The most steps an exploring planner may be allowed per attempt (``--max-steps``).
MAX_STEPS = 500


@attrs.frozen
class PlannerOptions:
    """Per-run choices about how the planner talks to its provider, set from the command line.

    Plain data, so a planner running in another process or on another machine gets them too.

    :ivar timeout_seconds: how long to wait to connect, and for each part of the answer.
    :ivar max_retries: further attempts after a rate limit, a server error or a lost
        connection (never after a timeout or a 4xx answer).
    :ivar structured_output: send the plan's JSON Schema as
        ``response_format: {"type": "json_schema", ...}`` instead of asking for any JSON object.
    :ivar temperature: the sampling temperature to ask for, 0 to 2. 0 (the default) asks
        for the most likely answer; ``agent run --candidates K`` with K above 1 asks for
        :data:`CANDIDATE_TEMPERATURE` unless ``--temperature`` says otherwise, so that the
        candidates differ.
    :ivar model: the model to ask for (``agent run --model``, a batch task's ``model``)
        instead of the planner's own default (``CODING_AGENT_MODEL`` for the built-in
        planner); ``None`` for that default. A planner that has no choice of model
        ignores it.
    :ivar edit_format: how to ask the model to write its plan (``agent run
        --edit-format``, a batch task's ``edit_format``): one of ``EDIT_FORMATS`` in
        ``sandboxed_coding_agent.core.plans.edits``, ``"whole"`` files (the default),
        ``"search-replace"`` edits or a ``"udiff"``, which that module applies. The plan
        is whole files whatever the answer's format. A planner that cannot ask for a
        format ignores it.
    :ivar max_steps: for a planner that explores (``agent run --planner explore
        --max-steps N``), the most turns the model may take in one attempt before it
        submits; a planner that does not explore ignores it.
    """

    timeout_seconds: float = attrs.field(default=90.0, converter=float, validator=v.gt(0))
    max_retries: int = attrs.field(default=3, validator=[v.ge(0), v.le(10)])
    structured_output: bool = False
    temperature: float = attrs.field(default=0.0, validator=[v.ge(0.0), v.le(2.0)])
    model: str | None = attrs.field(default=None, validator=model_name)
    edit_format: str = attrs.field(default="whole", validator=edit_format_name)
    max_steps: int = attrs.field(default=30, validator=[v.ge(1), v.le(MAX_STEPS)])


#: The temperature parallel candidates ask for unless told otherwise: above 0, so that
#: K calls with the same prompt can give K different plans.
CANDIDATE_TEMPERATURE = 0.7

#: Bounds of a run's attempts, candidates and sandboxes at once (``agent run --attempts``,
#: ``--candidates``, ``--jobs``, a batch task's fields): each planner call costs money,
#: each sandbox memory.
MAX_ATTEMPTS = 10
MAX_CANDIDATES = 16
MAX_JOBS = 64

#: How much of a failed test's output a repair attempt's feedback carries: its last characters.
FEEDBACK_OUTPUT_CHARS = 6000


@attrs.frozen
class Feedback:
    """What became of the previous attempt of a run, for the planner's next try.

    Sent in :attr:`PlanRequest.feedback` by ``agent run --attempts N`` after an
    attempt that did not pass. It never holds a hidden test file, nor output
    that could quote one: for a seed with hidden tests, the test's output is
    withheld and :attr:`note` says what failed.

    :ivar attempt: the number (from 1) of the attempt it describes.
    :ivar files: the replacements that attempt's plan proposed; empty when the
        planner's answer was refused before it was a plan.
    :ivar rejections: why a policy refused that plan; empty when it was tested.
    :ivar test_exit_code: the test's exit code; ``None`` when killed or not tested.
    :ivar test_timed_out: whether the test hit its wall-clock limit.
    :ivar limit_hit: the sandbox limit that stopped the test, if any.
    :ivar test_output: the end of the test's output (at most
        :data:`FEEDBACK_OUTPUT_CHARS` characters); ``None`` when not tested or withheld.
    :ivar note: what the agent says about the test instead of (or besides) its output,
        such as ``"a hidden test failed"``.
    :ivar answer: that attempt's answer as the planner's backend wrote it (the model's
        text, in whatever edit format it was asked for), when the planner kept it
        (:attr:`PlannerResult.answer`); the built-in planner sends it back as the
        assistant's turn of the conversation, and ``files`` when it is ``None``.
    """

    attempt: int
    files: tuple[PatchFile, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    test_exit_code: int | None = None
    test_timed_out: bool = False
    limit_hit: str | None = None
    test_output: str | None = None
    note: str | None = None
    answer: str | None = None


@attrs.frozen
class PlanRequest:
    """What a planner receives: everything it may show the model, and the bounds of the answer.

    :ivar seed: name of the seed project.
    :ivar instruction: what the user asked for.
    :ivar files: the seed files' text by path, tests included (read-only): every file
        of a small folder seed; of a repository (a git seed, or a seed with ``context``
        patterns), the editable files, then the context files that fit the seed's
        budget (:mod:`~sandboxed_coding_agent.core.plans.context`).
    :ivar editable_paths: the paths the plan may replace.
    :ivar limits: bounds the plan must respect.
    :ivar options: how to talk to the provider for this run.
    :ivar feedback: for a repair attempt, what became of the previous one (its plan and
        the test's output, or why it was refused); ``None`` on a first attempt.
    :ivar repository_map: when ``files`` is only part of the seed, a map of all of it:
        one line per file, a Python file's top-level classes and functions after its
        path, ending with what was left out for room, if anything; ``None`` when
        ``files`` is the whole seed.
    :ivar left_out: context files not in ``files`` for want of room, in order (the
        first :data:`~sandboxed_coding_agent.core.plans.context.MAX_LEFT_OUT_LISTED`).
    :ivar left_out_count: how many context files were left out in all.

    Neither ``files``, the map nor ``left_out`` ever names a hidden test file
    (:attr:`SeedProject.hidden_files`).
    """

    seed: str
    instruction: str
    files: Mapping[str, str]
    editable_paths: tuple[str, ...]
    limits: SeedLimits
    options: PlannerOptions = attrs.field(factory=PlannerOptions)
    feedback: Feedback | None = None
    repository_map: str | None = None
    left_out: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)
    left_out_count: int = attrs.field(
        default=attrs.Factory(lambda request: len(request.left_out), takes_self=True),
        validator=v.instance_of(int),
    )

    @left_out_count.validator
    def _counts_every_listed(self, _: attrs.Attribute[object], value: int) -> None:
        if value < len(self.left_out):
            raise ValueError("left_out_count is less than the paths left_out lists")


@attrs.frozen
class TokenUsage:
    """Tokens the provider reports for one call.

    :ivar prompt_tokens: tokens of the request, when reported.
    :ivar completion_tokens: tokens of the answer, when reported.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@attrs.frozen
class PlannerResult:
    """A validated plan and how it was made.

    :ivar planner: name of the planner that made it.
    :ivar planner_task_id: identifies this planner call in logs, errors and results.
    :ivar plan: the plan, already checked against the patch contract.
    :ivar model: the model that answered, when known.
    :ivar response_id: the provider's own ID of its answer, when given.
    :ivar usage: tokens used, when reported.
    :ivar duration_seconds: wall time of the planner call.
    :ivar details: what the planner adds to the record of its call, which ``agent logs
        TASK_ID`` shows: a JSON object (text, numbers, booleans, ``None``, lists and
        objects of them) such as the endpoint, each attempt's status and timing, or
        the start of the answer. Never the key, the prompt or the seed's files.
    :ivar answer: the plan as the backend wrote it (the model's text), which a repair
        attempt sends back as the assistant's turn (:attr:`Feedback.answer`); ``None``
        when the planner does not keep it. It is not recorded: the plan is.
    """

    planner: str
    planner_task_id: str
    plan: PatchPlan
    model: str | None = None
    response_id: str | None = None
    usage: TokenUsage | None = None
    duration_seconds: float | None = None
    details: dict[str, Any] = attrs.field(factory=dict)
    answer: str | None = attrs.field(default=None, repr=False)

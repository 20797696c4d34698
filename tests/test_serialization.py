"""What crosses a process or machine boundary round-trips through JSON with the one converter.

A planner or a runner may run elsewhere (a remote function, a remote sandbox),
and run results are kept as records: each of these types must survive
``to_json`` and ``structure`` unchanged, and structuring must stay strict.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import cattrs
import pytest

from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.model import (
    Attempt,
    Candidate,
    Feedback,
    PatchFile,
    PatchPlan,
    PlannerOptions,
    PlannerResult,
    PlanRequest,
    RunResult,
    SandboxJob,
    SandboxOutcome,
    SeedLimits,
    SeedRuntime,
    TokenUsage,
)
from sandboxed_coding_agent.core.serialization import describe_structure_error, structure, to_json
from sandboxed_coding_agent.core.verdicts.grading import Grade, GradedTests

PLAN = PatchPlan((PatchFile("calculator.py", "def add(a, b):\n    return a + b\n"),))
LIMITS = SeedLimits(max_files=2, test_timeout_seconds=5.5, memory_mb=256)

WIRE_VALUES = [
    PLAN,
    PlanRequest(
        seed="calculator",
        instruction="Fix add",
        files={"calculator.py": "x = 1\n", "check_calculator.py": "y = 2\n"},
        editable_paths=("calculator.py",),
        limits=LIMITS,
        options=PlannerOptions(timeout_seconds=3, max_retries=0, structured_output=True),
    ),
    # A repair attempt's request: its feedback travels to a remote planner as data too.
    PlanRequest(
        seed="calculator",
        instruction="Fix add",
        files={"calculator.py": "x = 1\n"},
        editable_paths=("calculator.py",),
        limits=LIMITS,
        options=PlannerOptions(temperature=0.7),
        feedback=Feedback(
            attempt=1,
            files=PLAN.files,
            rejections=(Rejection("patch-contract", "path-not-editable", "no", "t.py"),),
            test_exit_code=1,
            limit_hit="memory",
            test_output="FAIL\n",
            note="a hidden test failed",
        ),
    ),
    # A repository's request: some of its files, a map of all of them, what did not fit.
    PlanRequest(
        seed="big",
        instruction="Fix it",
        files={"pkg/mod_0.py": "x = 1\n", "pkg/util_0.py": "y = 2\n"},
        editable_paths=("pkg/mod_0.py",),
        limits=LIMITS,
        repository_map="3 files; ...\npkg/mod_0.py: def f\npkg/util_0.py\npkg/util_1.py\n",
        left_out=("pkg/util_1.py",),
        left_out_count=12,
    ),
    PlannerResult(
        planner="openai",
        planner_task_id="plan-0123456789abcdef",
        plan=PLAN,
        model="m",
        response_id="chatcmpl-1",
        usage=TokenUsage(10, None),
        duration_seconds=0.25,
    ),
    SandboxJob(
        seed="calculator",
        # Seed files are bytes: binary content must survive the trip too.
        files={"calculator.py": b"x = 1\n", "data.bin": bytes(range(256))},
        test_command=("python", "-m", "unittest"),
        limits=LIMITS,
        runtime=SeedRuntime(python="3.12", requirements=("pytest>=8",)),
    ),
    SandboxOutcome(
        runner="local",
        sandbox_id="sbx-1",
        exit_code=None,
        output="killed\n",
        output_truncated=True,
        timed_out=True,
        duration_seconds=1.5,
        limit_hit="timeout",
    ),
    RunResult(
        seed="calculator",
        instruction="Fix add",
        planner="openai",
        planner_task_id="plan-1",
        runner="local",
        sandbox_id="sbx-1",
        changed_files=("calculator.py",),
        diff="--- a/calculator.py\n+++ b/calculator.py\n",
        tests_passed=True,
        test_exit_code=0,
        test_output="OK\n",
        test_output_truncated=False,
        test_timed_out=False,
        usage=TokenUsage(1, 2),
        attempts=(
            Attempt(1, "rejected", rejections=(Rejection("p", "r", "m"),)),
            Attempt(2, "passed", sandbox_id="sbx-1", usage=TokenUsage(1, 2), sandbox_seconds=0.5),
        ),
        passed_attempt=2,
        candidates=(Candidate(1, (Attempt(1, "stopped"),), stopped=True),),
        chosen_candidate=2,
        grade=Grade(GradedTests(passed=("t.A.one",), missing=("t.A.two",)), GradedTests()),
    ),
    Grade(GradedTests(failed=("t.py::test_x[1]",)), GradedTests(), report_problem="tampered"),
]


@pytest.mark.parametrize("value", WIRE_VALUES, ids=lambda value: type(value).__name__)
def test_writing_json_gives_exactly_what_the_converter_gives(value: object) -> None:
    from sandboxed_coding_agent.core.serialization import converter, to_jsonable

    written, expected = to_jsonable(value), converter().unstructure(value)
    # Equal, and of the same types all the way down (a tuple where cattrs gives a list
    # would compare unequal in tests and in code that checks what it read back).
    assert json.dumps(written) == json.dumps(expected)
    assert repr(written) == repr(expected)


def test_records_and_listings_are_written_as_the_converter_writes_them(tmp_path: Path) -> None:
    from sandboxed_coding_agent.core.plugins import PluginHost
    from sandboxed_coding_agent.core.records import run_records
    from sandboxed_coding_agent.core.records.planner_calls import PlannerRecord, RequestContext
    from sandboxed_coding_agent.core.runs import recording
    from sandboxed_coding_agent.core.serialization import converter, to_jsonable

    host = PluginHost(entry_points=False)
    seed = host.seed("calculator")
    recording.run_recorded(
        seed,
        plugins=host.plugin_infos(),
        runner=host.runner("local"),
        policies=host.policies_for(seed),
        plan=PLAN,
        environ={"XDG_STATE_HOME": str(tmp_path)},
    )
    (path,) = run_records.records_directory({"XDG_STATE_HOME": str(tmp_path)}).iterdir()
    values: list[object] = [
        run_records.read_run_record(str(path)),
        seed,
        *host.plugin_infos(),
        PlannerRecord(
            planner_task_id="plan-1",
            planner="openai",
            started_at="2026-12-03T00:00:00.000+00:00",
            outcome="plan-rejected",
            duration_seconds=0.5,
            plan=PLAN,
            rejections=(Rejection("p", "r", "m", "f.py"),),
            usage=TokenUsage(3, 4),
            details={"attempts": [{"status": 200, "seconds": 0.1}], "note": None},
            context=RequestContext(files=2, map_bytes=64, left_out=("a.py",), left_out_count=3),
        ),
    ]
    for value in values:
        assert repr(to_jsonable(value)) == repr(converter().unstructure(value)), type(value)


@pytest.mark.parametrize("value", WIRE_VALUES, ids=lambda value: type(value).__name__)
def test_wire_types_round_trip_through_json(value: object) -> None:
    text = to_json(value)

    assert structure(json.loads(text), type(value)) == value


@pytest.mark.parametrize("value", WIRE_VALUES, ids=lambda value: type(value).__name__)
def test_structuring_refuses_unknown_keys(value: object) -> None:
    data = json.loads(to_json(value))
    data["unexpected"] = 1

    with pytest.raises(cattrs.BaseValidationError) as raised:
        structure(data, type(value))

    [said] = describe_structure_error(raised.value)
    known = ", ".join(sorted(f.alias for f in attrs.fields(type(value)) if f.init))
    assert said == f'unknown key "unexpected" (known: {known}) @ $'


@pytest.mark.parametrize(
    ("data", "cls"),
    [
        ({"prompt_tokens": True, "completion_tokens": 1}, TokenUsage),
        ({"prompt_tokens": "10", "completion_tokens": 1}, TokenUsage),
        ({"files": [{"path": 1, "content": "x"}]}, PatchPlan),
        ({"files": "calculator.py"}, PatchPlan),
    ],
    ids=["bool-as-int", "string-as-int", "number-as-string", "string-as-list"],
)
def test_structuring_does_not_coerce_types(data: object, cls: type) -> None:
    with pytest.raises(cattrs.BaseValidationError):
        structure(data, cls)


@pytest.mark.parametrize(
    "data",
    [
        {"files": [{"path": "a.py", "content": "x = 1\n"}]},
        {"files": []},
        {"files": [{"path": "a.py", "content": "x"}, {"path": "b.py", "content": ""}]},
        {"files": [{"path": "a.py", "content": "x", "mode": "755"}]},
        {"files": [{"path": "a.py"}]},
        {"files": [{"path": 1, "content": "x"}]},
        {"files": [{"path": "a.py", "content": None}]},
        {"files": [["a.py", "x"]]},
        {"files": ({"path": "a.py", "content": "x"},)},
        {"files": "a.py"},
        {"files": [], "note": "extra"},
        {},
        ["files"],
    ],
)
def test_a_plan_is_read_exactly_as_the_strict_converter_reads_it(data: object) -> None:
    from sandboxed_coding_agent.core.errors import PlanRejected
    from sandboxed_coding_agent.core.plans.contract import plan_from_data

    try:
        expected: object = structure(data, PatchPlan)
    except Exception:
        with pytest.raises(PlanRejected):
            plan_from_data(data)
    else:
        assert plan_from_data(data) == expected


def test_a_field_outside_init_is_left_out_as_the_converter_leaves_it_out() -> None:
    import attrs

    from sandboxed_coding_agent.core.serialization import converter, to_jsonable

    @attrs.frozen
    class Derived:
        given: tuple[str, ...]
        count: int = attrs.field(init=False, default=0)

    value = Derived(("a", "b"))

    assert to_jsonable(value) == converter().unstructure(value) == {"given": ["a", "b"]}


def test_a_misspelt_key_is_named_with_the_key_it_most_likely_means() -> None:
    from sandboxed_coding_agent.core.batches.tasks import BatchTask

    with pytest.raises(cattrs.BaseValidationError) as raised:
        structure({"sed": "calculator", "promt": "Fix add."}, BatchTask)

    # The misspelling first: it is why the required field is missing.
    assert describe_structure_error(raised.value, root="task") == [
        'unknown key "promt" (did you mean "prompt"?); '
        'unknown key "sed" (did you mean "seed"?) @ task',
        "required field missing @ task.seed",
    ]


def test_unknown_keys_are_shown_cut_and_escaped_and_counted() -> None:
    from sandboxed_coding_agent.core.serialization import unknown_keys

    assert unknown_keys(["k" * 100], ["seed"]) == (f'unknown key "{"k" * 80}"... (known: seed)')
    assert unknown_keys(["x\udcff"], ["seed"]) == 'unknown key "x\\udcff" (known: seed)'
    assert unknown_keys([f"x{n}" for n in range(8)] + ["sed"], ["seed"]) == (
        'unknown key "sed" (did you mean "seed"?); '
        'unknown keys "x0", "x1", "x2", "x3" (known: seed); and 4 more unknown keys'
    )

"""`agent run` as a user runs it: the real CLI, a real loopback provider, a real sandbox."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import API_KEY, FIXED_CALCULATOR, MODEL, AgentRun, FakeProvider, plan_json

from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed

RunAgent = Callable[..., AgentRun]


def seed_digest() -> dict[str, str]:
    seed = calculator_seed()
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(seed.root.iterdir())
        if path.is_file()
    }


@pytest.fixture(autouse=True)
def seed_is_never_changed() -> object:
    before = seed_digest()
    yield
    assert seed_digest() == before


def assert_one_sandbox_that_left_nothing(run: AgentRun) -> None:
    assert len(run.tested_sandboxes) == 1, run.processes
    # The workspace lives in memory and in the sandbox's tmpfs: nothing lands in TMPDIR.
    assert list(run.tmpdir.iterdir()) == []


def assert_no_sandbox_made(run: AgentRun) -> None:
    assert run.sandboxes == [], "a sandbox was started"


def test_model_that_fixes_add_makes_the_test_pass(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    run = run_agent("run", "--seed", "calculator", "--json")

    assert run.returncode == 0, run.stderr
    result = run.json()
    assert result["tests_passed"] is True
    assert result["test_exit_code"] == 0
    assert result["seed"] == "calculator"
    assert result["changed_files"] == ["calculator.py"]
    assert "-    return left - right\n+    return left + right\n" in result["diff"]
    assert result["planner_task_id"].startswith("plan-")
    assert result["sandbox_id"].startswith("sbx-")
    assert "Ran 1 test" in result["test_output"]
    assert result["usage"] == {"prompt_tokens": 321, "completion_tokens": 45}
    assert_one_sandbox_that_left_nothing(run)


def test_model_that_does_not_fix_add_exits_1(provider: FakeProvider, run_agent: RunAgent) -> None:
    provider.reply_plan(("calculator.py", "def add(left, right):\n    return left * right\n"))

    run = run_agent("run", "--json")

    assert run.returncode == 1, run.stderr
    result = run.json()
    assert result["tests_passed"] is False
    assert result["test_exit_code"] == 1
    assert "AssertionError: 6 != 5" in result["test_output"]
    assert_one_sandbox_that_left_nothing(run)


def test_request_carries_prompt_and_seed_files_and_key_only_in_header(
    provider: FakeProvider, run_agent: RunAgent, agent_env: dict[str, str]
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    run = run_agent("run", "Please repair add()", "--json")

    assert run.returncode == 0, run.stderr
    [request] = provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    body = request.json()
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert system["role"] == "system"
    assert '"files"' in system["content"]
    assert user["role"] == "user"
    project = json.loads(user["content"].split("\n", 1)[1])
    assert project["instruction"] == "Please repair add()"
    assert project["editable_paths"] == ["calculator.py"]
    seed_files = {f["path"]: f for f in project["files"]}
    assert set(seed_files) == {"calculator.py", "check_calculator.py"}
    assert seed_files["check_calculator.py"]["editable"] is False
    assert "assertEqual(add(2, 3), 5)" in seed_files["check_calculator.py"]["content"]
    assert API_KEY not in request.body.decode()
    assert API_KEY not in request.path
    # Nothing of the host: no path, no other variable, no extra header.
    sent = request.body.decode()
    host = [str(calculator_seed().root), str(Path.home()), str(Path.cwd())]
    host += [agent_env["TMPDIR"], agent_env["XDG_STATE_HOME"]]
    assert [text for text in host if text in sent] == []
    assert {name.lower() for name in request.headers} == {
        "host",
        "accept",
        "accept-encoding",
        "connection",
        "user-agent",
        "content-type",
        "content-length",
        "authorization",
    }


def test_default_prompt_is_the_seeds(provider: FakeProvider, run_agent: RunAgent) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    run_agent("run", "--json")

    project = json.loads(provider.requests[0].json()["messages"][1]["content"].split("\n", 1)[1])
    assert project["instruction"] == calculator_seed().default_prompt


def test_human_summary_shows_verdict_diff_ids_and_output(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    run = run_agent("run")

    assert run.returncode == 0, run.stderr
    assert "tests passed (test exit code: 0)" in run.stdout
    assert "changed files:   calculator.py" in run.stdout
    assert "+    return left + right" in run.stdout
    assert "planner task ID: plan-" in run.stdout
    assert "sandbox ID:      sbx-" in run.stdout
    assert "OK" in run.stdout.split("test output:")[1]
    assert "asking planner" in run.stderr  # progress goes to stderr, not stdout
    assert "asking planner" not in run.stdout


SNOOP = """\
import glob, os
def add(left, right):
    return left + right
seen = dict(os.environ)
for path in glob.glob('/proc/*/environ'):
    try:
        seen[path] = open(path, 'rb').read().decode('utf-8', 'replace')
    except OSError as error:
        seen[path] = repr(error)
print('SNOOP-BEGIN', repr(seen), 'SNOOP-END')
"""


def test_provider_variables_and_key_are_invisible_inside_the_sandbox(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply_plan(("calculator.py", SNOOP))

    run = run_agent("run", "--json", env={"SOME_CALLER_SECRET": "caller-secret-value"})

    assert run.returncode == 0, run.stderr
    output = run.json()["test_output"]
    assert "SNOOP-BEGIN" in output
    assert "SNOOP-END" in output
    assert "/proc/1/environ" in output  # and read bwrap's own init
    for secret in (API_KEY, "CODING_AGENT", provider.base_url, "caller-secret-value"):
        assert secret not in output
    for stream in (run.stdout, run.stderr):
        assert API_KEY not in stream


def test_plan_file_is_tested_without_any_provider(
    provider: FakeProvider, run_agent: RunAgent, write_plan: Callable[..., Path]
) -> None:
    plan = write_plan(plan_json(("calculator.py", FIXED_CALCULATOR)))

    run = run_agent("run", "--plan", str(plan), "--json", env={"CODING_AGENT_API_KEY": ""})

    assert run.returncode == 0, run.stderr
    result = run.json()
    assert result["tests_passed"] is True
    assert result["planner_task_id"] is None
    assert provider.requests == []


def test_the_quick_starts_shipped_plan_passes_with_no_provider_settings(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    shipped = Path(__file__).parent.parent / "examples" / "plans" / "calculator-fix.json"
    names = ("CODING_AGENT_BASE_URL", "CODING_AGENT_MODEL", "CODING_AGENT_API_KEY")
    no_provider = dict.fromkeys(names, "")

    run = run_agent("run", "--seed", "calculator", "--plan", str(shipped), env=no_provider)

    assert run.returncode == 0, run.stderr
    assert "tests passed" in run.stdout
    assert "+    return left + right" in run.stdout
    assert provider.requests == []


def test_plan_file_still_goes_through_every_policy(
    run_agent: RunAgent, write_plan: Callable[..., Path]
) -> None:
    plan = write_plan(plan_json(("check_calculator.py", "print('tests rewritten')\n")))

    run = run_agent("run", "--plan", str(plan), "--json")

    assert run.returncode == 4
    error = run.json()["error"]
    assert error["kind"] == "policy"
    assert error["sandbox_id"] is None
    assert [r["rule"] for r in error["rejections"]] == ["path-not-editable"]
    assert_no_sandbox_made(run)


@pytest.mark.parametrize(
    ("plan", "rule"),
    [
        (plan_json(("check_calculator.py", "x = 1\n")), "path-not-editable"),
        (plan_json(("/etc/passwd", "x = 1\n")), "path-segment"),
        (plan_json(("../calculator.py", "x = 1\n")), "path-segment"),
        (plan_json(("calculator.py", "x = 1\n"), ("calculator.py", "y = 2\n")), "path-duplicate"),
        (plan_json(("calculator.py", "x = 1\x00\n")), "content-nul"),
        (plan_json(("calculator.py", "x" * 12_001)), "total-size"),
        (json.dumps({"files": [], "note": "extra"}), "plan-shape"),
    ],
    ids=["test-file", "absolute", "traversal", "duplicate", "nul", "too-big", "extra-key"],
)
def test_contract_violation_from_the_model_exits_4_naming_the_rule(
    provider: FakeProvider, run_agent: RunAgent, plan: str, rule: str
) -> None:
    provider.reply_content(plan)

    run = run_agent("run", "--json")

    assert run.returncode == 4, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "policy"
    assert rule in {r["rule"] for r in error["rejections"]}
    assert error["planner_task_id"].startswith("plan-")
    assert error["sandbox_id"] is None
    assert rule in run.stderr
    assert "Traceback" not in run.stderr
    assert_no_sandbox_made(run)


def test_provider_down_is_a_provider_error_and_creates_no_sandbox(
    run_agent: RunAgent, unused_port: int
) -> None:
    run = run_agent(
        "run",
        "--json",
        "--provider-retries",
        "0",
        env={"CODING_AGENT_BASE_URL": f"http://127.0.0.1:{unused_port}/v1"},
    )

    assert run.returncode == 3, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "provider"
    assert error["planner_task_id"].startswith("plan-")
    assert error["sandbox_id"] is None
    assert error["planner_task_id"] in run.stderr
    assert "Traceback" not in run.stderr
    assert "testing in runner" not in run.stderr
    assert_no_sandbox_made(run)


def test_refused_key_is_reported_without_showing_it(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    provider.reply(401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}})

    run = run_agent("run", "--json")

    assert run.returncode == 3
    message = run.json()["error"]["message"]
    assert "refused the API key" in message
    assert "Incorrect API key provided" in message
    assert API_KEY not in run.stdout + run.stderr


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CODING_AGENT_MODEL": ""}, "CODING_AGENT_MODEL"),
        ({"CODING_AGENT_API_KEY": "   "}, "CODING_AGENT_API_KEY"),
        ({"CODING_AGENT_BASE_URL": "http://example.com/v1"}, "plain http"),
        ({"CODING_AGENT_BASE_URL": "https://user:hunter2@example.com/v1"}, "credentials"),
        ({"CODING_AGENT_BASE_URL": "https://example.com/v1?key=x"}, "query"),
        ({"CODING_AGENT_API_VERSION": "2024-06-01?x"}, "CODING_AGENT_API_VERSION"),
        ({"CODING_AGENT_MODEL": "m" * 161}, "160"),
        # A str with a lone surrogate reaches the program as the raw byte 0xff.
        ({"CODING_AGENT_BASE_URL": "https://example.com\udcff/v1"}, "not valid UTF-8"),
        ({"CODING_AGENT_MODEL": "model-\udcff"}, "CODING_AGENT_MODEL is not valid UTF-8"),
        ({"CODING_AGENT_BASE_URL": "https://exa\tmple.com/v1"}, "control characters"),
        ({"CODING_AGENT_BASE_URL": "https://example .com/v1"}, "spaces"),
        ({"CODING_AGENT_BASE_URL": "https://xn--/v1"}, "cannot be used"),
        ({"CODING_AGENT_BASE_URL": "https://a..b/v1"}, "cannot be looked up"),
        ({"CODING_AGENT_API_KEY": "key\nwith-a-newline"}, "cannot be sent in an HTTP header"),
        ({"CODING_AGENT_BASE_URL": f"https://example.com/{'a' * 100_000}/v1"}, "at most 2,000"),
    ],
    ids=[
        "no-model",
        "blank-key",
        "http",
        "credentials",
        "query",
        "bad-api-version",
        "long-model",
        "url-not-utf8",
        "model-not-utf8",
        "url-control",
        "url-space",
        "url-bad-idna",
        "url-empty-label",
        "key-newline",
        "url-huge",
    ],
)
def test_bad_configuration_exits_2_naming_the_problem(
    provider: FakeProvider, run_agent: RunAgent, env: dict[str, str], named: str
) -> None:
    run = run_agent("run", env=env)

    assert run.returncode == 2, run.stderr
    assert named in run.stderr
    assert "hunter2" not in run.stderr
    assert "Traceback" not in run.stderr
    assert provider.requests == []
    assert_no_sandbox_made(run)


def test_unknown_seed_and_runner_are_usage_errors(run_agent: RunAgent) -> None:
    for args, named in (
        (("--seed", "nope"), "unknown seed 'nope'"),
        (("--runner", "nope"), "unknown runner 'nope'"),
    ):
        run = run_agent("run", *args)
        assert run.returncode == 2
        assert named in run.stderr
        assert "Traceback" not in run.stderr


def test_missing_plan_file_is_a_usage_error(run_agent: RunAgent, tmp_path: Path) -> None:
    run = run_agent("run", "--plan", str(tmp_path / "absent.json"), "--json")

    assert run.returncode == 2
    assert run.json()["error"]["kind"] == "usage"


def test_debug_shows_the_traceback(run_agent: RunAgent) -> None:
    quiet = run_agent("run", "--seed", "nope")
    loud = run_agent("run", "--seed", "nope", "--debug")

    assert "Traceback" not in quiet.stderr
    assert "Traceback" in loud.stderr
    assert quiet.returncode == loud.returncode == 2


def test_short_placeholder_key_is_not_hunted_for_in_answers_or_output(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    # Local servers take any key; a placeholder such as "left" also appears in the fix.
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    run = run_agent("run", "--json", env={"CODING_AGENT_API_KEY": "left"})

    assert run.returncode == 0, run.stderr
    result = run.json()
    assert "+    return left + right\n" in result["diff"]
    assert "[redacted]" not in run.stdout + run.stderr
    assert provider.requests[0].headers["Authorization"] == "Bearer left"


def test_instruction_holding_the_key_is_never_sent(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    run = run_agent("run", f"Fix add; my key is {API_KEY}", "--json")

    assert run.returncode == 2, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "usage"
    assert "the instruction holds the value of CODING_AGENT_API_KEY" in error["message"]
    assert provider.requests == []
    assert API_KEY not in run.stdout + run.stderr


def test_seeds_and_plugins_are_listed(run_agent: RunAgent) -> None:
    seeds = run_agent("seeds", "list")
    plugins = run_agent("plugins", "list", "--json")

    assert seeds.returncode == 0
    assert "calculator" in seeds.stdout
    assert "calculator.py" in seeds.stdout
    assert plugins.returncode == 0
    kinds = {p["name"]: set(p["kinds"]) for p in json.loads(plugins.stdout)}
    assert {"seed", "planner", "policy", "runner"} <= set().union(*kinds.values())

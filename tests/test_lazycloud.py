"""The LazyCloud backend end to end: the real ``agent`` CLI and the real SDK against the stand-in.

The stand-in (``lazycloud_standin.py``) serves the control plane's protocol on loopback,
really runs the deployed handler from the uploaded source with the secrets as variables,
and really runs the test command in a folder of its own; the provider is the loopback
``FakeProvider`` of ``conftest.py``. Each test asserts on what reached the stand-in: the
function's and each sandbox's spec, what was uploaded, what was stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, API_KEY, FIXED_CALCULATOR, MODEL, AgentRun, FakeProvider
from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
    ControlPlane,
    control_plane_fixture,
    lazycloud_env_fixture,
    subprocess_environment,
)

from sandboxed_coding_agent.core import harness
from sandboxed_coding_agent.core.provider import PROVIDER_SECRET_NAMES
from sandboxed_coding_agent.core.records.planner_calls import APP_DIR
from sandboxed_coding_agent.plugins.lazycloud.names import (
    APP_SLUG,
    FUNCTION_NAME,
    SANDBOX_NAME,
    TIMEOUT_ENV,
)

RunAgent = Callable[..., AgentRun]
SEED_FILES = {"calculator.py", "check_calculator.py"}
HARNESS_FILES = harness.FILES
TEST_COMMAND = ["python", "-m", "unittest", "-v", "check_calculator"]


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An empty folder to run every command from; it must stay empty."""
    folder = tmp_path / "user-cwd"
    folder.mkdir()
    return folder


@pytest.fixture
def lazycloud_environment(
    agent_env: dict[str, str], lazycloud_env: dict[str, str]
) -> dict[str, str]:
    """The caller's environment: the provider's variables and the SDK pointed at the stand-in."""
    return subprocess_environment(lazycloud_env, base=agent_env)


@pytest.fixture
def lazycloud(lazycloud_environment: dict[str, str], cwd: Path) -> Iterator[RunAgent]:
    """``agent`` pointed at the stand-in, run from ``cwd`` with no terminal on stdin;
    ``cwd`` is checked empty afterwards."""

    def run(*args: str, extra: dict[str, str] | None = None, timeout: float = 120) -> AgentRun:
        done = subprocess.run(
            [str(AGENT), *args],
            env={**lazycloud_environment, **(extra or {})},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return AgentRun(done.returncode, done.stdout, done.stderr, cwd)

    yield run
    assert list(cwd.iterdir()) == []


@pytest.fixture
def deployed(lazycloud: RunAgent, control_plane: ControlPlane) -> ControlPlane:
    """The secrets stored and plan-patch deployed, through the real commands."""
    configured = lazycloud("lazycloud", "configure")
    assert configured.returncode == 0, configured.stderr
    # The stand-in's provider is on this machine: stored, with a word that the hosted
    # LazyCloud could never reach it.
    assert "agent: warning: CODING_AGENT_BASE_URL names this machine" in configured.stderr
    done = lazycloud("lazycloud", "deploy")
    assert done.returncode == 0, done.stderr
    return control_plane


def no_key_in(*runs: AgentRun) -> None:
    for run in runs:
        assert API_KEY not in run.stdout + run.stderr


def only_sandbox(plane: ControlPlane) -> Any:
    """The one sandbox that tested the plan: the last made. The one before it ran the
    unpatched seed to list the tests a verdict needs (each test's state folder is new, so
    its run has no list kept)."""
    sandboxes = list(plane.sandboxes.values())
    assert len(sandboxes) in (1, 2), list(plane.sandboxes)
    assert all(sandbox.stopped for sandbox in sandboxes[:-1])
    return sandboxes[-1]


def seed_files_uploaded(sandbox: Any) -> set[str]:
    return {path.rsplit("/seed/", 1)[-1] for path in sandbox.files}


def assert_sandbox_spec_is_closed(spec: dict[str, Any]) -> None:
    pod = spec["pod"]
    assert pod["kind"] == "sandbox"
    assert pod.get("block_network") is True
    assert not pod.get("allow_list")
    assert not spec.get("secrets")
    assert not spec.get("environment")
    assert not pod.get("ports")
    assert spec["resources"]["cpu_millis"] == 1000
    assert spec["resources"]["memory_mib"] == 512


# --------------------------------------------------------------------------- offline specs


def test_planner_function_spec_offline_has_the_three_secrets_the_sizing_and_one_attempt() -> None:
    from sandboxed_coding_agent.plugins.lazycloud.app import planner_app

    app = planner_app()
    manifest = app.deployment_manifest().model_dump(mode="json")
    (workload,) = manifest["workloads"]
    assert workload["name"] == FUNCTION_NAME
    assert workload["secrets"] == list(PROVIDER_SECRET_NAMES)
    assert workload["resources"]["cpu_millis"] == 500
    assert workload["resources"]["memory_mib"] == 256
    (function,) = app.resources
    spec = function.spec()
    assert spec.handler == "sandboxed_coding_agent.plugins.lazycloud.handler:plan_patch"
    assert spec.resources.timeout_seconds == 120
    assert list(spec.secrets) == list(PROVIDER_SECRET_NAMES)
    from lazycloud.abstractions.image import ImageBuildResult

    workload_spec = function.workload_spec(
        handler=function.handler_reference(),
        source_sha256="0" * 64,
        image=ImageBuildResult(success=True, image_id="img_" + "0" * 24, python_version="3.11"),
    )
    assert workload_spec.retry_policy.max_attempts == 1
    assert not workload_spec.environment


def test_sandbox_definition_offline_blocks_the_network_and_carries_nothing() -> None:
    from sandboxed_coding_agent.core.model import SeedRuntime
    from sandboxed_coding_agent.plugins.lazycloud.app import test_patch_sandbox

    sandbox = test_patch_sandbox(SeedRuntime(python="3.12", requirements=("pytest>=8",)))
    spec = sandbox.spec()
    assert spec.name == SANDBOX_NAME
    assert spec.metadata["block_network"] is True
    assert "allow_list" not in spec.metadata or not spec.metadata["allow_list"]
    assert spec.secrets == []
    assert spec.env == {}
    assert spec.ports == {}
    assert spec.resources.cpu == 1
    assert str(spec.resources.memory) == "512"
    assert spec.image.python_version == "3.12"
    assert spec.image.packages == ["pytest>=8"]
    # Sandboxes are never deployed: the app's deployment leaves them out.
    from sandboxed_coding_agent.plugins.lazycloud.app import planner_app

    names = [w.name for w in planner_app().deployment_manifest().workloads]
    assert names == [FUNCTION_NAME]


def test_deploy_stages_only_the_code_the_function_imports(tmp_path: Path) -> None:
    from sandboxed_coding_agent.plugins.lazycloud.staging import stage_source

    files = stage_source(tmp_path)
    assert files
    assert all(
        f.startswith(
            (
                "sandboxed_coding_agent/core/",
                "sandboxed_coding_agent/plugins/openai_planner/",
                "sandboxed_coding_agent/plugins/lazycloud/",
            )
        )
        or f == "sandboxed_coding_agent/plugins/__init__.py"
        for f in files
    ), files
    own = {f.rsplit("/", 1)[1] for f in files if "/lazycloud/" in f}
    assert own == {"__init__.py", "names.py", "handler.py"}
    assert not any("local_sandbox" in f or "seed_projects" in f for f in files)
    assert (tmp_path / ".lazycloudignore").is_file()


# --------------------------------------------------------------------------- the whole flow


def test_configure_deploy_run_sandboxes_cleanup_against_the_standin(
    lazycloud: RunAgent, control_plane: ControlPlane, provider: FakeProvider
) -> None:
    configured = lazycloud("lazycloud", "configure")
    assert configured.returncode == 0, configured.stderr
    assert control_plane.secrets == {
        "CODING_AGENT_BASE_URL": provider.base_url,
        "CODING_AGENT_MODEL": MODEL,
        "CODING_AGENT_API_KEY": API_KEY,
    }
    again = lazycloud("lazycloud", "configure", extra={"CODING_AGENT_MODEL": "other-model"})
    assert again.returncode == 0, again.stderr
    assert control_plane.secrets["CODING_AGENT_MODEL"] == "other-model"
    assert lazycloud("lazycloud", "configure").returncode == 0

    deployed = lazycloud("lazycloud", "deploy")
    assert deployed.returncode == 0, deployed.stderr
    spec = control_plane.spec(FUNCTION_NAME)
    assert spec["secrets"] == list(PROVIDER_SECRET_NAMES)
    assert spec["resources"]["cpu_millis"] == 500
    assert spec["resources"]["memory_mib"] == 256
    assert spec["timeout_seconds"] == 120
    assert spec["retry_policy"]["max_attempts"] == 1
    assert not spec.get("environment")
    uploaded = control_plane.source_files(spec["source"]["sha256"])
    assert "sandboxed_coding_agent/plugins/lazycloud/handler.py" in uploaded
    assert not any("local_sandbox" in f or "tests/" in f or ".git" in f for f in uploaded)
    assert ".lazycloudignore" not in os.listdir(Path(__file__).parents[1])

    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    run = lazycloud(
        "run", "--seed", "calculator", "--planner", "lazycloud", "--runner", "lazycloud", "--json"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = run.json()
    assert result["tests_passed"] is True
    assert result["test_exit_code"] == 0
    assert result["planner"] == "lazycloud"
    assert result["runner"] == "lazycloud"
    assert result["planner_task_id"] in control_plane.tasks
    sandbox = only_sandbox(control_plane)
    assert result["sandbox_id"] == sandbox.id
    assert sandbox.stopped
    assert_sandbox_spec_is_closed(sandbox.spec)
    # The seed's files, and the harness with its settings beside them (not in the seed).
    uploaded = set(sandbox.files)
    harness = {path for path in uploaded if path.startswith("/workspace/.harness/")}
    assert seed_files_uploaded(sandbox) - harness == SEED_FILES
    assert harness == {f"/workspace/.harness/{name}" for name in (*HARNESS_FILES, "setup.json")}
    assert sandbox.files["/workspace/seed/calculator.py"] == FIXED_CALCULATOR.encode()
    (process,) = sandbox.processes
    assert list(process.args)[:4] == ["python", "-I", "-B", "/workspace/.harness/main.py"]
    assert "Ran 1 test" in result["test_output"] or "OK" in result["test_output"]
    # The harness ran unittest and its signed report came back; its settings are gone.
    report = result["test_report"]
    assert (report["framework"], report["status"]) == ("unittest", "complete")
    assert [t["outcome"] for t in report["tests"]] == ["passed"]
    assert not sandbox.local_path("/workspace/.harness/setup.json").exists()
    # The provider was called by the deployed handler, with the key in the header only.
    (request,) = provider.requests
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in request.body.decode()
    task = control_plane.tasks[result["planner_task_id"]]
    assert {n: task.env[n] for n in PROVIDER_SECRET_NAMES}["CODING_AGENT_API_KEY"] == API_KEY
    assert API_KEY not in json.dumps(task.value)
    # The planner's record is in the task's output, for `lazycloud task logs`; the key is not.
    assert "planner record:" in task.stdout
    assert API_KEY not in task.stdout + task.stderr

    listed = lazycloud("lazycloud", "sandboxes", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    # The plan's sandbox, and the one before it that listed the unpatched seed's tests.
    assert {row["sandbox_id"] for row in rows} == set(control_plane.sandboxes)
    assert sandbox.id in {row["sandbox_id"] for row in rows}
    assert {row["status"] for row in rows} == {"stopped"}

    status = lazycloud("lazycloud", "status", "--json")
    assert status.returncode == 0, status.stderr
    found = json.loads(status.stdout)
    assert found["app"] == APP_SLUG
    assert found["function"] == FUNCTION_NAME
    assert found["sandbox"] == SANDBOX_NAME
    assert found["secrets"] == dict.fromkeys(PROVIDER_SECRET_NAMES, True)
    assert [d["name"] for d in found["deployed"]] == [FUNCTION_NAME]
    assert found["workspace"] == control_plane.workspace
    assert found["endpoint"].startswith(control_plane.endpoint)
    readable = lazycloud("lazycloud", "status")
    assert "CODING_AGENT_API_KEY" in readable.stdout

    cleaned = lazycloud("lazycloud", "cleanup", "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert control_plane.secrets == {}
    gone = control_plane.workloads.get(FUNCTION_NAME)
    assert gone is None or gone.state == "deleted"
    assert "plan-patch" in cleaned.stdout
    assert "CODING_AGENT_API_KEY" in cleaned.stdout
    nothing = lazycloud("lazycloud", "cleanup", "--yes")
    assert nothing.returncode == 0, nothing.stderr
    assert "nothing to delete" in nothing.stdout

    no_key_in(configured, again, deployed, run, listed, status, readable, cleaned, nothing)


def test_cleanup_without_a_terminal_or_yes_deletes_nothing(
    lazycloud: RunAgent, deployed: ControlPlane
) -> None:
    refused = lazycloud("lazycloud", "cleanup")

    assert refused.returncode == 2, refused.stderr
    assert "--yes" in refused.stderr
    assert "nothing was deleted" in refused.stderr
    assert set(deployed.secrets) == set(PROVIDER_SECRET_NAMES)
    assert deployed.workloads[FUNCTION_NAME].state != "deleted"


def test_planner_alone_with_the_local_sandbox(
    lazycloud: RunAgent, deployed: ControlPlane, provider: FakeProvider
) -> None:
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))
    run = lazycloud("run", "--planner", "lazycloud", "--runner", "local", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    result = run.json()
    assert result["tests_passed"] is True
    assert result["planner_task_id"] in deployed.tasks
    assert deployed.sandboxes == {}


def test_runner_alone_with_a_plan_file(
    lazycloud: RunAgent,
    control_plane: ControlPlane,
    write_plan: Callable[..., Path],
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    run = lazycloud("run", "--plan", str(plan), "--runner", "lazycloud", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    sandbox = only_sandbox(control_plane)
    assert run.json()["sandbox_id"] == sandbox.id
    assert sandbox.stopped
    assert control_plane.tasks == {}
    assert control_plane.secrets == {}


# --------------------------------------------------------------------------- failure paths

FAST = {TIMEOUT_ENV: "3"}


def one_clear_line(run: AgentRun) -> str:
    assert "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("agent: ")]
    assert lines, run.stderr
    return lines[-1]


def test_not_logged_in_is_a_configuration_error_saying_to_log_in(
    lazycloud: RunAgent, control_plane: ControlPlane, write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})
    for args in (
        ("run", "--planner", "lazycloud"),
        ("run", "--plan", str(plan), "--runner", "lazycloud"),
        ("lazycloud", "configure"),
        ("lazycloud", "status"),
    ):
        started = time.monotonic()
        run = lazycloud(*args, extra={"LAZYCLOUD_TOKEN": ""})
        assert run.returncode == 2, (args, run.stderr)
        line = one_clear_line(run)
        assert "configuration error" in line, line
        assert "lazycloud login" in line, line
        assert time.monotonic() - started < 15
    assert control_plane.requests == []


def test_configure_refuses_settings_its_function_cannot_receive(
    lazycloud: RunAgent, control_plane: ControlPlane
) -> None:
    for extra, named in (
        ({"CODING_AGENT_API_VERSION": "2024-06-01"}, "CODING_AGENT_API_VERSION is not supported"),
        ({"CODING_AGENT_AUTH_HEADER": "api-key"}, "CODING_AGENT_AUTH_HEADER is not supported"),
        ({"CODING_AGENT_ALLOW_HTTP": "1"}, "CODING_AGENT_ALLOW_HTTP is not supported"),
    ):
        run = lazycloud("lazycloud", "configure", extra=extra)

        assert run.returncode == 2, run.stderr
        line = one_clear_line(run)
        assert named in line, line
        assert "nothing was stored" in line, line
        assert API_KEY not in run.stdout + run.stderr
    assert control_plane.secrets == {}


def test_unreachable_control_plane_is_a_remote_error_naming_the_endpoint(
    lazycloud: RunAgent, control_plane: ControlPlane, write_plan: Callable[..., Path]
) -> None:
    control_plane.refuse_connections()
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    planner = lazycloud("run", "--planner", "lazycloud", "--json", extra=FAST)
    runner = lazycloud("run", "--plan", str(plan), "--runner", "lazycloud", "--json", extra=FAST)
    sandboxes = lazycloud("lazycloud", "sandboxes", extra=FAST)
    status = lazycloud("lazycloud", "status", "--json", extra=FAST)

    # Outside a run the control plane is no model provider: its own kind, and exit 3.
    assert status.returncode == 3, status.stderr
    assert status.json()["error"]["kind"] == "remote"
    assert "agent: remote error: reading the LazyCloud workspace" in status.stderr
    assert planner.returncode == 3, planner.stderr
    assert planner.json()["error"]["kind"] == "provider"
    assert runner.returncode == 5, runner.stderr
    assert runner.json()["error"]["kind"] == "sandbox"
    assert sandboxes.returncode == 5, sandboxes.stderr
    for run in (planner, runner, sandboxes):
        line = one_clear_line(run)
        assert "LAZYCLOUD_ENDPOINT" in line or control_plane.endpoint in line, line


def test_a_503_that_never_ends_is_bounded_by_the_agents_deadline(
    lazycloud: RunAgent, deployed: ControlPlane, provider: FakeProvider
) -> None:
    deployed.fail("GET", r"/tasks/[^/]+$", status=503)  # every wait for the planner's task
    provider.reply_plan(("calculator.py", FIXED_CALCULATOR))

    # Deadlines of 10 s: ten times what submitting the task takes on a busy machine (a
    # verdict must not rest on the load); the wait for the task, 503 forever, runs into it.
    run = lazycloud(
        "run", "--planner", "lazycloud", "--runner", "lazycloud", "--json",
        extra={TIMEOUT_ENV: "10"}, timeout=240,
    )  # fmt: skip

    assert run.returncode == 3, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "provider"
    assert error["planner_task_id"] in deployed.tasks
    assert "within 10 s" in error["message"], error["message"]  # the agent's deadline ended it
    assert deployed.sandboxes == {}


def test_a_remote_planner_exception_is_a_provider_error_naming_the_task(
    lazycloud: RunAgent, deployed: ControlPlane
) -> None:
    deployed.fail_next_task(FUNCTION_NAME, type="ValueError", message="the model went away")

    run = lazycloud("run", "--planner", "lazycloud", "--runner", "lazycloud", "--json")

    assert run.returncode == 3, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "provider"
    task_id = error["planner_task_id"]
    assert task_id in deployed.tasks
    assert "ValueError: the model went away" in error["message"]
    line = one_clear_line(run)
    assert task_id in line
    assert "Traceback" not in run.stdout
    assert deployed.sandboxes == {}


def test_a_provider_error_in_the_function_comes_back_as_a_provider_error(
    lazycloud: RunAgent, deployed: ControlPlane, provider: FakeProvider
) -> None:
    provider.reply(401, {"error": {"message": f"bad key {API_KEY}"}})

    run = lazycloud("run", "--planner", "lazycloud", "--runner", "lazycloud", "--json")

    assert run.returncode == 3, run.stderr
    error = run.json()["error"]
    assert error["planner_task_id"] in deployed.tasks
    assert "refused the API key" in error["message"]
    task = deployed.tasks[error["planner_task_id"]]
    assert "planner record:" in task.stdout
    assert API_KEY not in task.stdout + task.stderr
    assert deployed.sandboxes == {}
    no_key_in(run)


def test_a_plan_the_contract_rejects_remotely_creates_no_sandbox(
    lazycloud: RunAgent, deployed: ControlPlane, provider: FakeProvider
) -> None:
    provider.reply_plan(("check_calculator.py", "import sys\n"))

    run = lazycloud("run", "--planner", "lazycloud", "--runner", "lazycloud", "--json")

    assert run.returncode == 4, run.stderr
    error = run.json()["error"]
    assert error["kind"] == "policy"
    assert error["planner_task_id"] in deployed.tasks
    assert error["rejections"][0]["path"] == "check_calculator.py"
    assert deployed.sandboxes == {}


def test_the_returned_plan_is_checked_again_locally_with_every_policy(
    lazycloud: RunAgent, deployed: ControlPlane, provider: FakeProvider
) -> None:
    sneaky = "import socket\n\ndef add(left, right):\n    return left + right\n"
    provider.reply_plan(("calculator.py", sneaky))

    run = lazycloud(
        "run", "--planner", "lazycloud", "--runner", "lazycloud", "--policy", "python-ast", "--json"
    )

    assert run.returncode == 4, run.stderr
    error = run.json()["error"]
    assert {r["policy"] for r in error["rejections"]} == {"python-ast"}
    assert error["planner_task_id"] in deployed.tasks
    assert deployed.sandboxes == {}


SLOW_CALCULATOR = "import time\ntime.sleep(60)\n\ndef add(left, right):\n    return left + right\n"


def test_a_test_timeout_is_a_failed_run_and_the_sandbox_is_stopped(
    lazycloud: RunAgent, control_plane: ControlPlane, write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": SLOW_CALCULATOR}]})

    started = time.monotonic()
    run = lazycloud(
        "run", "--plan", str(plan), "--runner", "lazycloud", "--test-timeout", "2", "--json"
    )

    assert run.returncode == 1, run.stderr
    result = run.json()
    assert result["tests_passed"] is False
    assert result["test_timed_out"] is True
    assert result["limit_hit"] == "timeout"
    assert result["test_exit_code"] is None
    assert time.monotonic() - started < 30
    sandbox = only_sandbox(control_plane)
    assert result["sandbox_id"] == sandbox.id
    assert sandbox.stopped


def test_a_failing_test_is_exit_1_with_its_output_and_the_sandbox_is_stopped(
    lazycloud: RunAgent, control_plane: ControlPlane, write_plan: Callable[..., Path]
) -> None:
    broken = "def add(left, right):\n    return left - right\n"
    plan = write_plan({"files": [{"path": "calculator.py", "content": broken}]})

    run = lazycloud("run", "--plan", str(plan), "--runner", "lazycloud", "--json")

    assert run.returncode == 1, run.stderr
    result = run.json()
    assert result["tests_passed"] is False
    assert result["test_exit_code"] == 1
    assert "FAIL" in result["test_output"]
    assert only_sandbox(control_plane).stopped


def test_an_upload_error_is_a_sandbox_error_and_the_sandbox_is_stopped(
    lazycloud: RunAgent, control_plane: ControlPlane, write_plan: Callable[..., Path]
) -> None:
    control_plane.fail("PUT", r"/files/content", status=500)
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = lazycloud("run", "--plan", str(plan), "--runner", "lazycloud", "--json", extra=FAST)

    assert run.returncode == 5, run.stderr
    error = run.json()["error"]
    sandbox = only_sandbox(control_plane)
    assert error["kind"] == "sandbox"
    assert error["sandbox_id"] == sandbox.id
    assert sandbox.stopped
    assert sandbox.processes == []


def test_a_seed_testing_its_project_is_refused_before_any_sandbox(
    lazycloud: RunAgent,
    control_plane: ControlPlane,
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    # `project = true` puts the project's folder on the runtime's sys.path; the image
    # cannot be given that, so the run says so instead of testing without it.
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "pyproject.toml").write_text('[project]\nname = "calc"\nversion = "1.0"\n')
    (seed / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (seed / "test_calc.py").write_text(
        "import unittest\nimport calc\n\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(calc.add(1, 2), 3)\n"
    )
    (seed / "seed.toml").write_text(
        'name = "calc"\ndescription = "add() subtracts"\ntests = ["test_calc.py"]\n'
        'editable = ["calc.py"]\ntest_command = ["python", "-m", "unittest"]\n'
        'default_prompt = "Fix add()."\n\n[runtime]\nproject = true\n'
    )
    plan = write_plan(
        {"files": [{"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}]}
    )

    run = lazycloud(
        "run", "--seed", str(seed), "--plan", str(plan), "--runner", "lazycloud", "--json"
    )

    assert run.returncode == 5, run.stdout + run.stderr
    error = run.json()["error"]
    assert error["kind"] == "sandbox"
    assert "project = true" in error["message"]
    assert "--runner local" in error["message"]
    assert control_plane.sandboxes == {}


def test_a_git_seed_is_refused_before_any_sandbox(
    lazycloud: RunAgent,
    control_plane: ControlPlane,
    write_plan: Callable[..., Path],
    tmp_path: Path,
) -> None:
    # A git seed's tree is bound read-only by the local sandbox; LazyCloud would need an
    # upload of every file, so the run says so instead.
    from test_git_seeds import FIXED, make_repository, seed_folder

    repository = tmp_path / "repo"
    commit = make_repository(repository)
    seed = seed_folder(tmp_path / "seed", str(repository), commit)
    plan = write_plan({"files": [{"path": "pkg/calc.py", "content": FIXED}]})

    run = lazycloud(
        "run",
        "--seed",
        str(seed),
        "--plan",
        str(plan),
        "--runner",
        "lazycloud",
        "--json",
        extra={"XDG_CACHE_HOME": str(tmp_path / "cache")},
    )

    assert run.returncode == 5, run.stdout + run.stderr
    error = run.json()["error"]
    assert error["kind"] == "sandbox"
    assert f"cannot test a git seed (commit {commit[:12]}" in error["message"]
    assert control_plane.sandboxes == {}


def test_ctrl_c_during_the_test_stops_the_sandbox(
    lazycloud_environment: dict[str, str],
    control_plane: ControlPlane,
    write_plan: Callable[..., Path],
    cwd: Path,
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": SLOW_CALCULATOR}]})
    agent = subprocess.Popen(
        [str(AGENT), "run", "--plan", str(plan), "--runner", "lazycloud", "--json"],
        env=lazycloud_environment,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(s.processes for s in control_plane.sandboxes.values()):
            assert time.monotonic() < deadline, "the test never started"
            assert agent.poll() is None, agent.communicate()
            time.sleep(0.05)
        agent.send_signal(signal.SIGINT)
        stdout, stderr = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 130, stderr
    assert json.loads(stdout)["error"]["kind"] == "interrupted"
    sandbox = only_sandbox(control_plane)
    assert sandbox.stopped
    assert control_plane.live_sandboxes() == []
    ledger = Path(lazycloud_environment["XDG_STATE_HOME"], APP_DIR, "lazycloud", "sandboxes")
    assert list(ledger.iterdir()) == []  # noted, and forgotten once stopped

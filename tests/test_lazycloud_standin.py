"""The real LazyCloud SDK, in this process, against the loopback control-plane stand-in.

These prove the stand-in speaks the protocol ``lazycloud-client 0.1.145`` expects, so the
LazyCloud backend's own tests can rely on it: every call below is the SDK's public API,
and every assertion on the stand-in's records is what the real service would have been
asked to do.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
    ControlPlane,
    control_plane_fixture,
    lazycloud_env_fixture,
    lazycloud_sdk_fixture,
    subprocess_environment,
)

APP = "sca_standin_test"

PLANNER_SOURCE = """
import os
import subprocess

from lazycloud import App

app = App("{app}")


@app.function(name="plan-patch", secrets=["SCA_STANDIN_KEY"], env={{"SCA_MODE": "test"}},
              retries=0, timeout_seconds=30, cpu=0.25, memory=256)
def plan_patch(left, right, *, label="sum"):
    return {{
        "label": label,
        "value": left + right,
        "key": os.environ.get("SCA_STANDIN_KEY"),
        "other": os.environ.get("SCA_STANDIN_OTHER"),
        "mode": os.environ.get("SCA_MODE"),
        "pid": os.getpid(),
    }}


@app.function(name="always-fails", retries=0)
def always_fails(text):
    raise ValueError("no plan for " + text)


@app.function(name="sleeps-too-long", retries=0, timeout_seconds=1)
def sleeps_too_long():
    import time
    time.sleep(30)
"""


def _declare_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Path]:
    """Write the planner module into a fresh source root and import it from there."""
    source = tmp_path / "source"
    source.mkdir()
    module = f"standin_planner_{os.getpid()}_{time.monotonic_ns()}"
    (source / f"{module}.py").write_text(PLANNER_SOURCE.format(app=APP))
    monkeypatch.syspath_prepend(str(source))
    imported = importlib.import_module(module)
    monkeypatch.delitem(sys.modules, module)
    return imported, source


@pytest.fixture
def deployed(
    lazycloud_sdk: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, Path]:
    from lazycloud import Secret

    Secret("SCA_STANDIN_KEY").set("sk-standin-planner-key")
    Secret("SCA_STANDIN_OTHER").set("must-not-reach-the-handler")
    module, source = _declare_app(tmp_path, monkeypatch)
    module.app.deploy(source_root=source)
    return module, source


def test_secret_set_get_delete_round_trip(lazycloud_sdk: ControlPlane) -> None:
    from lazycloud import Secret
    from lazycloud.abstractions.secret import SecretOperationError
    from lazycloud.clients.api import ApiClient

    Secret("SCA_PROVIDER_KEY").set("first")
    Secret("SCA_PROVIDER_KEY").set("second")
    assert Secret("SCA_PROVIDER_KEY").get() == "second"
    assert lazycloud_sdk.secrets == {"SCA_PROVIDER_KEY": "second"}

    listed = ApiClient(endpoint=lazycloud_sdk.endpoint, token=lazycloud_sdk.token).list_secrets(
        lazycloud_sdk.workspace
    )
    assert [secret.name for secret in listed.secrets] == ["SCA_PROVIDER_KEY"]

    assert Secret("SCA_PROVIDER_KEY").delete()
    assert lazycloud_sdk.secrets == {}
    with pytest.raises(SecretOperationError, match="not found"):
        Secret("SCA_PROVIDER_KEY").get()


def test_requests_without_the_token_are_refused(lazycloud_sdk: ControlPlane) -> None:
    from lazycloud.clients.api import ApiClient, ApiError

    client = ApiClient(endpoint=lazycloud_sdk.endpoint, token="lct_wrong_token")
    with pytest.raises(ApiError) as refused:
        client.list_secrets(lazycloud_sdk.workspace)
    assert refused.value.status_code == 401
    assert refused.value.code is not None
    assert refused.value.code.value == "unauthenticated"


def test_deploy_records_each_function_spec_and_its_source(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    module, source = deployed
    spec = lazycloud_sdk.spec("plan-patch")
    assert spec["handler"] == f"{module.__name__}:plan_patch"
    assert spec["secrets"] == ["SCA_STANDIN_KEY"]
    assert spec["environment"] == {"SCA_MODE": "test"}
    assert spec["retry_policy"]["max_attempts"] == 1
    assert spec["timeout_seconds"] == 30
    assert spec["resources"] == {"cpu_millis": 250, "memory_mib": 256}
    assert lazycloud_sdk.source_files(spec["source"]["sha256"]) == [f"{module.__name__}.py"]
    # The SDK writes its ignore file into the source root it zips: here a tmp folder.
    assert (source / ".lazycloudignore").is_file()
    assert [record.app for record in lazycloud_sdk.deployments] == [APP]
    assert {w.name for w in lazycloud_sdk.workloads.values()} == {
        "plan-patch",
        "always-fails",
        "sleeps-too-long",
    }


def test_deployed_function_runs_in_a_subprocess_with_only_its_declared_secret(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.session.deployment import DeploymentClient

    submission = DeploymentClient().submit("plan-patch", 2, 3, kwargs={"label": "total"})
    value = submission.result(wait=True)

    assert value["value"] == 5
    assert value["label"] == "total"
    assert value["key"] == "sk-standin-planner-key"
    assert value["other"] is None
    assert value["mode"] == "test"
    assert value["pid"] != os.getpid()
    assert submission.done
    task = lazycloud_sdk.tasks[submission.task_id]
    assert task.args == (2, 3)
    assert task.kwargs == {"label": "total"}
    assert "SCA_STANDIN_OTHER" not in task.env
    # Submitting to the deployment sends no release: the active one runs.
    submit = lazycloud_sdk.requests_to("POST", r"/workloads/function/plan-patch/tasks$")[-1]
    assert "release_id" not in submit.json()


def test_failing_handler_raises_deployment_operation_error(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.session.deployment import DeploymentClient, DeploymentOperationError

    submission = DeploymentClient().submit("always-fails", "calculator")
    with pytest.raises(DeploymentOperationError, match="ValueError: no plan for calculator"):
        submission.result(wait=True)
    failure = lazycloud_sdk.tasks[submission.task_id].failure
    assert failure is not None
    assert failure["kind"] == "user_error"
    assert "raise ValueError" in failure["traceback"]


def test_remote_exception_is_restored_by_function_call_get(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.clients.api import ApiClient
    from lazycloud.exceptions import RemoteTaskError
    from lazycloud.session.deployment import DeploymentClient
    from lazycloud.session.task import FunctionCall, Task

    submission = DeploymentClient().submit("always-fails", "x")
    client = ApiClient(endpoint=lazycloud_sdk.endpoint, token=lazycloud_sdk.token)
    call: FunctionCall[Any] = FunctionCall(
        Task(submission.task_id, lazycloud_sdk.workspace, client)
    )
    with pytest.raises(ValueError, match="no plan for x") as raised:
        call.get(timeout_seconds=20)
    assert isinstance(raised.value.__cause__, RemoteTaskError)


def test_handler_past_its_timeout_fails_as_timeout(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.session.deployment import DeploymentClient, DeploymentOperationError

    started = time.monotonic()
    submission = DeploymentClient().submit("sleeps-too-long")
    with pytest.raises(DeploymentOperationError, match="timeout"):
        submission.result(wait=True)
    assert time.monotonic() - started < 10
    assert lazycloud_sdk.tasks[submission.task_id].failure["kind"] == "timeout"


def test_injected_task_failure_reaches_the_caller(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.session.deployment import DeploymentClient, DeploymentOperationError

    lazycloud_sdk.fail_next_task("plan-patch", type="RateLimited", message="provider said 429")
    with pytest.raises(DeploymentOperationError, match="RateLimited: provider said 429"):
        DeploymentClient().submit("plan-patch", 1, 1).result(wait=True)
    assert DeploymentClient().submit("plan-patch", 1, 1).result(wait=True)["value"] == 2


def test_list_and_delete_deployment_and_app(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.clients.api import ApiClient
    from lazycloud.session.deployment import DeploymentClient

    deployments = DeploymentClient()
    assert [w.name for w in deployments.list(name="plan-patch")] == ["plan-patch"]
    deleted = deployments.delete("plan-patch", app=APP)
    assert deleted.state.value == "deleted"
    assert deployments.list(name="plan-patch") == []

    ApiClient(endpoint=lazycloud_sdk.endpoint, token=lazycloud_sdk.token).delete_app(
        lazycloud_sdk.workspace, APP
    )
    assert deployments.list(app=APP) == []


def test_missing_secret_refuses_the_deploy_before_anything_uploads(
    lazycloud_sdk: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lazycloud.session.deployment import DeploymentRefusedError

    module, source = _declare_app(tmp_path, monkeypatch)
    with pytest.raises(DeploymentRefusedError, match="SCA_STANDIN_KEY"):
        module.app.deploy(source_root=source)
    assert lazycloud_sdk.sources == {}
    assert lazycloud_sdk.workloads == {}


def test_sandbox_runs_commands_on_uploaded_files_and_is_terminated(
    lazycloud_sdk: ControlPlane, tmp_path: Path
) -> None:
    from lazycloud import App

    app = App(APP)
    sandbox = app.sandbox(name="test-patch", block_network=True, env={"SEED": "calculator"})
    instance = sandbox.create(timeout_seconds=10)
    local = tmp_path / "calculator.py"
    local.write_text("def add(a, b):\n    return a + b\n")
    instance.fs.create_directory("/workspace/seed")
    instance.fs.upload_file(local, "/workspace/seed/calculator.py")

    result = instance.run(
        ["python", "-c", "import os, calculator; print(calculator.add(2, 3), os.environ['SEED'])"],
        cwd="/workspace/seed",
        timeout_seconds=20,
    )
    failed = instance.run(["python", "-c", "import sys; sys.exit(3)"], timeout_seconds=20)

    assert (result.exit_code, result.stdout, result.stderr) == (0, "5 calculator\n", "")
    assert failed.exit_code == 3
    record = lazycloud_sdk.sandboxes[instance.sandbox_id()]
    assert record.spec["pod"]["kind"] == "sandbox"
    assert record.spec["pod"]["block_network"] is True
    assert record.files == {"/workspace/seed/calculator.py": local.read_bytes()}
    assert [p.cwd for p in record.processes] == ["/workspace/seed", "/workspace"]
    assert [p.exit_code for p in record.processes] == [0, 3]
    assert not record.stopped

    assert instance.terminate()
    assert record.stopped
    assert lazycloud_sdk.live_sandboxes() == []
    rows = sandbox.list(app_id=APP)
    assert [(str(row.id), row.status.value) for row in rows] == [(instance.sandbox_id(), "stopped")]


def test_sandbox_process_timeout_sends_term_and_raises(lazycloud_sdk: ControlPlane) -> None:
    from lazycloud import App
    from lazycloud.abstractions.sandbox import SandboxProcessTimeoutError

    instance = App(APP).sandbox(name="test-patch", block_network=True).create(timeout_seconds=10)
    started = time.monotonic()
    with pytest.raises(SandboxProcessTimeoutError):
        instance.run(["python", "-c", "import time; time.sleep(60)"], timeout_seconds=1)
    assert time.monotonic() - started < 10
    process = lazycloud_sdk.sandboxes[instance.sandbox_id()].processes[0]
    assert process.signals == ["TERM"]
    assert not process.running
    instance.terminate()


def test_sandbox_paths_cannot_climb_out_of_the_sandbox_root(lazycloud_sdk: ControlPlane) -> None:
    from lazycloud import App
    from lazycloud.abstractions.sandbox import SandboxConnectionError
    from lazycloud.clients.api import ApiError

    instance = App(APP).sandbox(name="test-patch").create(timeout_seconds=10)
    with pytest.raises((ApiError, SandboxConnectionError), match=r"\.\."):
        instance.fs._upload_bytes("/workspace/../../escape.txt", b"x")
    instance.terminate()


def test_unavailable_answers_fail_a_call_the_sdk_does_not_retry(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.clients.api import ApiError
    from lazycloud.session.deployment import DeploymentClient

    fault = lazycloud_sdk.fail("POST", r"/workloads/function/plan-patch/tasks$", status=503)
    started = time.monotonic()
    with pytest.raises(ApiError, match=r"unavailable: stand-in fault: HTTP 503"):
        DeploymentClient().submit("plan-patch", 1, 2)
    assert time.monotonic() - started < 5
    assert fault.hits == 1


def test_transient_failure_once_is_retried_by_the_waiting_call(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.session.deployment import DeploymentClient

    fault = lazycloud_sdk.fail("GET", r"/tasks/[^/]+$", status=503, times=2)
    assert DeploymentClient().submit("plan-patch", 4, 5).result(wait=True)["value"] == 9
    assert fault.hits == 2


def test_waiting_on_503_forever_ends_only_at_the_callers_own_deadline(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET tasks/{id} retries 502/503/504 for 600 s; nothing in the environment shortens it.

    A caller must put its own deadline around the wait; here the SDK's module constant
    is lowered only so the test sees the failure surface at all.
    """
    import lazycloud.session.task as task_module
    from lazycloud.clients.api import ApiError
    from lazycloud.session.deployment import DeploymentClient

    monkeypatch.setattr(task_module, "_TRANSIENT_BUDGET_SECONDS", 1.0)
    submission = DeploymentClient().submit("plan-patch", 1, 2)
    lazycloud_sdk.fail("GET", r"/tasks/[^/]+$", status=503)
    started = time.monotonic()
    with pytest.raises(ApiError, match="unavailable"):
        submission.result(wait=True)
    assert time.monotonic() - started < 5


def test_refused_connections_fail_secret_calls(lazycloud_sdk: ControlPlane) -> None:
    from lazycloud import Secret
    from lazycloud.abstractions.secret import SecretOperationError

    lazycloud_sdk.refuse_connections()
    with pytest.raises(SecretOperationError):
        Secret("SCA_PROVIDER_KEY").set("value")
    lazycloud_sdk.accept_connections()
    Secret("SCA_PROVIDER_KEY").set("value")
    assert lazycloud_sdk.secrets == {"SCA_PROVIDER_KEY": "value"}


def test_hung_request_ends_at_the_sdk_read_timeout(lazycloud_sdk: ControlPlane) -> None:
    from lazycloud.clients.api import ApiClient, ApiConnectionError

    lazycloud_sdk.hang("GET", r"/secrets$", seconds=5)
    client = ApiClient(
        endpoint=lazycloud_sdk.endpoint, token=lazycloud_sdk.token, timeout_seconds=0.5
    )
    started = time.monotonic()
    with pytest.raises(ApiConnectionError):
        client.list_secrets(lazycloud_sdk.workspace)
    assert time.monotonic() - started < 3


def test_subprocess_environment_drops_container_variables(
    lazycloud_env: dict[str, str],
) -> None:
    env = subprocess_environment(
        lazycloud_env, base={"PATH": "/bin", "CONTAINER_ID": "c1", "LAZYCLOUD_PROFILE": "prod"}
    )
    assert env["PATH"] == "/bin"
    assert "CONTAINER_ID" not in env
    assert "LAZYCLOUD_PROFILE" not in env
    assert env["LAZYCLOUD_ENDPOINT"].startswith("http://127.0.0.1:")
    assert not any(Path(env["LAZYCLOUD_HOME"]).iterdir())


def test_nothing_the_sdk_asked_for_went_unserved(
    deployed: tuple[Any, Path], lazycloud_sdk: ControlPlane
) -> None:
    from lazycloud.session.deployment import DeploymentClient

    DeploymentClient().submit("plan-patch", 1, 1).result(wait=True)
    assert lazycloud_sdk.unhandled == []


def test_laptop_spawn_and_remote_run_on_a_working_tree_release(
    lazycloud_sdk: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lazycloud import Secret

    Secret("SCA_STANDIN_KEY").set("sk-standin-planner-key")
    module, source = _declare_app(tmp_path, monkeypatch)
    monkeypatch.chdir(source)  # a laptop call zips the current directory

    call = module.plan_patch.spawn(20, 22)
    assert call.get(timeout_seconds=20)["value"] == 42
    assert module.plan_patch.remote(1, 2)["key"] == "sk-standin-planner-key"

    assert lazycloud_sdk.workloads == {}
    release_ids = {r.json()["release_id"] for r in lazycloud_sdk.requests_to("POST", r"/tasks$")}
    assert [lazycloud_sdk.releases[i].version for i in release_ids] == [None]
    assert lazycloud_sdk.requests_to("POST", r"/workloads/function/plan-patch/run$")


def test_sandbox_files_can_be_listed_and_downloaded(
    lazycloud_sdk: ControlPlane, tmp_path: Path
) -> None:
    from lazycloud import App

    instance = App(APP).sandbox(name="test-patch").create(timeout_seconds=10)
    instance.run(["python", "-c", "open('report.txt', 'w').write('1 passed')"], timeout_seconds=20)
    assert [f.name for f in instance.fs.list_files("/workspace")] == ["report.txt"]
    instance.fs.download_file("/workspace/report.txt", tmp_path / "report.txt")
    assert (tmp_path / "report.txt").read_text() == "1 passed"
    instance.terminate()


def test_server_error_once_fails_one_secret_call_only(lazycloud_sdk: ControlPlane) -> None:
    from lazycloud import Secret
    from lazycloud.abstractions.secret import SecretOperationError

    lazycloud_sdk.fail("PUT", r"/secrets/SCA_PROVIDER_KEY$", status=500, times=1)
    with pytest.raises(SecretOperationError, match="HTTP 500"):
        Secret("SCA_PROVIDER_KEY").set("value")
    Secret("SCA_PROVIDER_KEY").set("value")
    assert lazycloud_sdk.secrets == {"SCA_PROVIDER_KEY": "value"}


def test_sdk_in_a_child_process_reaches_the_stand_in(
    lazycloud_env: dict[str, str], control_plane: ControlPlane
) -> None:
    code = "from lazycloud import Secret; Secret('SCA_CHILD').set('from-child')"
    subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_environment(lazycloud_env),
        check=True,
        timeout=60,
    )
    assert control_plane.secrets == {"SCA_CHILD": "from-child"}

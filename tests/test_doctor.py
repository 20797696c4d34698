"""`agent doctor` on this machine, for real: each item OK or its fix, and the exit code says it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

import attrs
from conftest import AGENT, API_KEY, AgentRun, control_groups_here

from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import Finding
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.runs.doctor import ready, run_checks
from sandboxed_coding_agent.plugins.local_sandbox import bwrap_executable

RunAgent = Callable[..., AgentRun]

EVERY_ITEM = {
    "lazycloud client",
    "bwrap",
    "namespace user",
    "namespace pid",
    "namespace network",
    "namespace ipc",
    "namespace uts",
    "namespace cgroup",
    "namespace user, nested ones blocked",
    "sandbox",
    "sandbox user",
    "/proc/sys",
    "stdlib seeds",
    "keyrings",
    "limit timeout",
    "limit output",
    "limit memory",
    "limit processes",
    "limit cpu",
    "limit file-size",
    "limit disk",
    "uv",
    "provider variables",
}


def findings_of(stdout: str) -> dict[str, dict[str, Any]]:
    return {f["item"]: f for f in json.loads(stdout)["findings"]}


def test_doctor_finds_everything_a_run_needs_on_this_machine(run_agent: RunAgent) -> None:
    run = run_agent("doctor", "--json")

    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["ready"] is True
    findings = findings_of(run.stdout)
    assert set(findings) == EVERY_ITEM
    assert [item for item, f in findings.items() if not f["ok"]] == []
    assert findings["sandbox"]["detail"].endswith("network interfaces inside: ['lo']")
    # Each limit is enforced the best way this caller allows: a group where one can be made,
    # else the rlimit, counted for the caller or, for root, for the sandbox user.
    made, _ = control_groups_here()
    processes = findings["limit processes"]["detail"]
    if "pids" in made:
        assert processes == "a pids cgroup with pids.max"
    else:
        whose = "your processes" if os.geteuid() != 0 else "the processes of uid 65534"
        assert processes.startswith(f"RLIMIT_NPROC only, which counts all {whose}"), processes
    memory = findings["limit memory"]["detail"]
    threads = "2 MiB stacks for threads and one malloc arena per process, whatever the number"
    if "memory" in made:
        assert memory.startswith(
            "a memory cgroup for the whole sandbox (640 MiB of memory and tmpfs pages at the "
            "defaults); "
        ), memory
    else:
        assert memory.startswith("RLIMIT_AS per process only (no memory cgroup: "), memory
        assert "): 1040 MiB at the defaults, 512 MiB and room for 256 threads; " in memory
    assert threads in memory


def test_doctor_never_shows_the_api_key(run_agent: RunAgent) -> None:
    for flags in ((), ("--json",)):
        run = run_agent("doctor", *flags)

        assert API_KEY not in run.stdout + run.stderr
        assert "CODING_AGENT_API_KEY set (not shown)" in run.stdout


def test_doctor_without_the_key_fails_and_names_the_variable(run_agent: RunAgent) -> None:
    run = run_agent("doctor", "--planner", "openai", env={"CODING_AGENT_API_KEY": ""})

    assert run.returncode == 2, run.stdout + run.stderr
    line = next(line for line in run.stdout.splitlines() if "provider variables" in line)
    assert line.startswith("FAIL")
    assert "CODING_AGENT_API_KEY is not set" in line
    assert "fix: export CODING_AGENT_BASE_URL" in run.stdout
    # The advice is given once, on the fix line, not again in the finding.
    assert line.rstrip().endswith("CODING_AGENT_API_KEY is not set")
    assert run.stdout.count("agent run --plan") == 1
    assert "not ready: 1 required item(s) failed" in run.stdout


NO_PROVIDER = {"CODING_AGENT_BASE_URL": "", "CODING_AGENT_MODEL": "", "CODING_AGENT_API_KEY": ""}


def test_doctor_without_a_provider_is_ready_for_plan_files_and_says_what_model_runs_need(
    run_agent: RunAgent,
) -> None:
    run = run_agent("doctor", env=NO_PROVIDER)
    as_json = run_agent("doctor", "--json", env=NO_PROVIDER)

    assert run.returncode == 0, run.stdout + run.stderr
    line = next(line for line in run.stdout.splitlines() if "provider variables" in line)
    assert line.startswith("WARN"), line
    assert "(needed for model runs with planner 'openai', not for plan files)" in line
    assert "fix: export CODING_AGENT_BASE_URL, CODING_AGENT_MODEL, CODING_AGENT_API_KEY" in (
        run.stdout
    )
    assert run.stdout.rstrip().endswith(
        "ready for plan files (agent run --plan): every required item is OK; "
        "model runs with planner 'openai' need its items above"
    )
    assert as_json.returncode == 0
    report = as_json.json()
    assert (report["ready"], report["planner_ready"]) == (True, False)
    provider = findings_of(as_json.stdout)["provider variables"]
    assert (provider["ok"], provider["required"]) == (False, False)


def test_doctor_without_a_provider_is_still_not_ready_when_the_sandbox_cannot_start(
    run_agent: RunAgent,
) -> None:
    run = run_agent("doctor", env={**NO_PROVIDER, "SANDBOXED_CODING_AGENT_BWRAP": "relative/bwrap"})

    assert run.returncode == 2, run.stdout + run.stderr
    assert "FAIL  bwrap" in run.stdout
    assert "WARN  provider variables" in run.stdout
    assert run.stdout.rstrip().endswith("not ready: 1 required item(s) failed")


def in_outer_sandbox(
    agent_env: dict[str, str], *bwrap_flags: str
) -> subprocess.CompletedProcess[str]:
    """Run `agent doctor --json` inside a bwrap that takes something away from it."""
    return subprocess.run(
        [str(bwrap_executable()), *bwrap_flags, "--", str(AGENT), "doctor", "--json"],
        env=agent_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_doctor_says_how_it_bounds_what_no_control_group_bounds(agent_env: dict[str, str]) -> None:
    # With the control groups read-only, no group can be made: the process count then rests
    # on RLIMIT_NPROC of the sandbox's user (never root, so it binds), memory on RLIMIT_AS.
    done = in_outer_sandbox(
        agent_env, "--dev-bind", "/", "/", "--ro-bind", "/sys/fs/cgroup", "/sys/fs/cgroup"
    )

    assert done.returncode == 0, done.stdout + done.stderr
    findings = findings_of(done.stdout)
    processes = findings["limit processes"]
    assert processes["ok"] is True, processes
    assert processes["detail"].startswith("RLIMIT_NPROC only, which counts all ")
    memory = findings["limit memory"]
    assert memory["ok"] is True, memory
    assert memory["detail"].startswith("RLIMIT_AS per process only (no memory cgroup: ")
    assert "1040 MiB at the defaults" in memory["detail"]
    assert findings["limit cpu"]["ok"] is True
    assert findings["sandbox user"]["ok"] is True


def test_doctor_fails_where_namespaces_cannot_be_created(agent_env: dict[str, str]) -> None:
    done = in_outer_sandbox(agent_env, "--unshare-user", "--disable-userns", "--dev-bind", "/", "/")

    assert done.returncode == 2, done.stdout + done.stderr
    findings = findings_of(done.stdout)
    user = findings["namespace user"]
    assert user["ok"] is False
    # The sandbox's own refusal, as bwrap says it, and what it means.
    assert "(ENOSPC); no more user namespaces may be made here" in user["detail"], user
    assert user["fix"].startswith("run the agent outside that sandbox")
    assert "sandbox" not in findings  # not tried: it could not work
    assert "Traceback" not in done.stderr


@attrs.frozen
class CloudCredentials:
    name: str = "cloud-credentials"
    description: str = "an example of a third-party check"

    def run(self) -> list[Finding]:
        return [Finding("cloud token", ok=False, detail="not set", fix="export TOKEN")]


@attrs.frozen
class BrokenCheck:
    name: str = "broken-check"
    description: str = "a check that raises"

    def run(self) -> list[Finding]:
        raise RuntimeError("boom")


class ExamplePlugin:
    @hookimpl
    def register_checks(self, register: Callable[[object], None]) -> None:
        register(CloudCredentials())
        register(BrokenCheck())


def test_a_plugin_adds_checks_through_the_hook_and_a_broken_one_is_a_failed_item() -> None:
    host = PluginHost(entry_points=False, plugins={"example": ExamplePlugin()})

    assert host.checks["cloud-credentials"].plugin == "example"
    findings = run_checks(
        [(r.plugin, r.item) for r in host.checks.values() if r.plugin == "example"]
    )

    assert findings == [
        Finding("cloud token", ok=False, detail="not set", fix="export TOKEN"),
        Finding(
            "broken-check",
            ok=False,
            detail="the check failed: RuntimeError: boom",
            fix="report this to the authors of plugin 'example'",
        ),
    ]
    assert ready(findings) is False
    assert ready([Finding("optional", ok=False, detail="-", required=False)]) is True

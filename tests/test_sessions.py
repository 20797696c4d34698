"""Sessions: shell commands one at a time on a seed, each in a fresh sandbox of the runner,
only the project's files carried from one to the next (``core.runs.sessions``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import sys
from pathlib import Path

import attrs
import pytest
from lazycloud_standin import (  # noqa: F401 - the fixtures, used by their names
    ControlPlane,
    control_plane_fixture,
    lazycloud_env_fixture,
    lazycloud_sdk_fixture,
)
from test_git_seeds import make_repository, seed_folder
from test_hidden_tests import seed as hidden_seed  # noqa: F401 - a fixture

from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.core.runs.sessions import Session, SessionError, read_hand_back
from sandboxed_coding_agent.core.seeds import git_source
from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.core.testing import check_sessions
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.lazycloud.runner import LazyCloudRunner
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import PYTHON_LINKS

KEY = "ab" * 32


def test_the_local_sandbox_offers_sessions_as_the_runner_contract_says() -> None:
    check_sessions(LocalSandbox(), calculator_seed())


class _CarriesAVariable:
    """A runner that breaks the contract: every command starts with a variable set."""

    name = "leaky"
    description = "the local sandbox, with state carried between commands"

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        command = "export SESSION_MARK=1; " + job.test_command[2]
        return LocalSandbox().run_test(attrs.evolve(job, test_command=("bash", "-c", command)))


def test_the_session_kit_fails_a_runner_that_carries_state_between_commands() -> None:
    with pytest.raises(AssertionError, match="no variable carries over"):
        check_sessions(_CarriesAVariable(), calculator_seed())


class _NoHarness:
    name = "bare"
    description = "runs the command, no harness"

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        return SandboxOutcome(runner=self.name, sandbox_id="bare-1", exit_code=0, output="")


def test_a_runner_that_runs_no_harness_offers_no_sessions() -> None:
    session = Session(_NoHarness(), calculator_seed())

    with pytest.raises(SessionError, match="runner 'bare' offers no sessions"):
        session.run("true")


def test_a_session_never_holds_the_hidden_tests(hidden_seed: Path) -> None:  # noqa: F811
    seed = load_seed(hidden_seed)
    session = Session(LocalSandbox(), seed, command_seconds=20)

    listed = session.run("ls; cat held_out_test.py; echo status=$?")

    assert "held_out_test.py" not in session.files
    assert "held_out_test.py" not in listed.output.split("status=")[0].split("cat:")[0]
    assert "status=1" in listed.output


def test_python_in_a_session_is_the_agents_interpreter_by_either_name() -> None:
    # A distribution's /usr/bin has python3 but no python: the sandbox's own links give both.
    session = Session(LocalSandbox(), calculator_seed(), command_seconds=20)
    found = session.run("command -v python python3; python -c 'import sys; print(sys.hexversion)'")
    other = session.run("python3 -c 'import sys; print(sys.hexversion)'")

    assert found.output.split() == [
        f"{PYTHON_LINKS}/python",
        f"{PYTHON_LINKS}/python3",
        str(sys.hexversion),
    ], found.output
    assert other.output.split() == [str(sys.hexversion)], other.output


def test_a_git_seeds_session_has_its_tree_and_no_git_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    commit = make_repository(tmp_path / "repo")
    seed = load_seed(seed_folder(tmp_path / "seed", str(tmp_path / "repo"), commit))
    assert seed.source is not None
    git_source.materialize(seed.source)
    session = Session(LocalSandbox(), seed, command_seconds=20)

    looked = session.run("cat README; ls -a; git log 2>&1 | head -1; ls .git 2>&1 | head -1")
    fixed = session.run("sed -i 's/a - b/a + b/' pkg/calc.py && echo done")
    proved = session.run("python -m unittest discover -s tests -t . 2>&1 | tail -1")

    assert "calc" in looked.output
    assert ".git" not in looked.output.split("\n")[1:][:8]
    assert "No such file" in looked.output or "not a git repository" in looked.output
    assert fixed.exit_code == 0, fixed.output
    assert "OK" in proved.output, proved.output
    assert list(session.changes()) == ["pkg/calc.py"]


def _signed(*records: dict[str, object]) -> str:
    lines = []
    for number, record in enumerate(records, start=1):
        body = json.dumps({**record, "seq": number}, sort_keys=True)
        mac = hmac.new(bytes.fromhex(KEY), body.encode(), hashlib.sha256).hexdigest()
        lines.append(f"{mac} {body}")
    return "\n".join(lines) + "\n"


def _file(path: str, data: bytes = b"x") -> dict[str, object]:
    return {"kind": "file", "path": path, "data": base64.b64encode(data).decode()}


STEP = {"kind": "step", "exit_code": 0, "timed_out": False}
END = {"kind": "files", "count": 1, "skipped": []}


def test_what_a_command_hands_back_is_read_as_hostile_data() -> None:
    handed = read_hand_back(_signed(STEP, _file("pkg/a.py", b"ok\n"), END), KEY, "local")
    assert (handed.exit_code, handed.timed_out) == (0, False)
    assert handed.files == {"pkg/a.py": b"ok\n"}

    for path in ("../outside.py", "/etc/passwd", "a/../../b", "a//b", "./a", "a\0b"):
        with pytest.raises(SessionError, match="has the path"):
            read_hand_back(_signed(STEP, _file(path), END), KEY, "local")
    bad_data = {"kind": "file", "path": "a.py", "data": "not base64!"}
    with pytest.raises(SessionError, match="not base64"):
        read_hand_back(_signed(STEP, bad_data, END), KEY, "local")
    with pytest.raises(SessionError, match="not the harness's"):
        read_hand_back(_signed(STEP, END) + "0 {}\n", KEY, "local")
    with pytest.raises(SessionError, match="handed back no files"):
        read_hand_back(_signed(STEP, _file("a.py")), KEY, "local")
    with pytest.raises(SessionError, match="more than"):
        read_hand_back(_signed(STEP, {"kind": "too-large", "bytes": 9, "files": 1}), KEY, "x")


def test_a_session_whose_files_outgrow_its_bound_says_so() -> None:
    session = Session(LocalSandbox(), calculator_seed(), command_seconds=20)

    with pytest.raises(SessionError, match="more than"):
        session.run("head -c 6000000 /dev/zero > big.bin")
    # The files before the command are still the session's.
    assert "big.bin" not in session.files


def test_links_and_special_files_are_named_as_not_kept() -> None:
    session = Session(LocalSandbox(), calculator_seed(), command_seconds=20)

    made = session.run("ln -s /etc/hostname link; mkfifo pipe; echo kept > plain.txt")

    assert set(made.not_kept) == {"link", "pipe"}
    assert "link" not in session.files
    assert session.files["plain.txt"] == b"kept\n"


def test_lazycloud_sandboxes_offer_sessions(tmp_path: Path, lazycloud_sdk: ControlPlane) -> None:
    # The control plane is the suite's stand-in (no real one is reachable from here): its
    # sandboxes run the harness as an ordinary process, not as PID 1, so this shows the
    # session part of the contract, not LazyCloud's walls.
    runner = LazyCloudRunner(environ={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    session = Session(runner, calculator_seed(), command_seconds=20)

    first = session.run("cat calculator.py; echo kept > notes.txt; export MARK=1; (sleep 30 &)")
    second = session.run("cat notes.txt; echo mark=${MARK:-none}")

    assert "def add" in first.output, first.output
    assert "kept" in second.output
    assert "mark=none" in second.output
    assert session.changes() == {"notes.txt": b"kept\n"}
    assert not any(sandbox.processes for sandbox in lazycloud_sdk.live_sandboxes())

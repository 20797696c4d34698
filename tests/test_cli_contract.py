"""What `agent` promises the scripts that call it: with ``--json``, exactly one JSON object on
stdout whatever happens; a documented exit code; one message on stderr; a traceback only with
``--debug``. Every case runs the real console script."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, AgentRun, FakeProvider, install_plugin, wait_until

RunAgent = Callable[..., AgentRun]


def one_error(run: AgentRun) -> dict[str, Any]:
    """The single JSON error object on stdout (anything else there fails the test)."""
    data = json.loads(run.stdout)
    assert isinstance(data, dict)
    assert set(data) == {"error"}
    error = data["error"]
    assert {"kind", "message", "planner_task_id", "sandbox_id"} <= set(error)
    assert isinstance(error, dict)
    return error


# --- usage errors that click reports before any command runs ----------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--json", "--no-such-option"], "No such option: --no-such-option"),
        (["run", "--json", "--test-timeout", "soon"], "Invalid value for '--test-timeout'"),
        (["run", "--json", "--provider-retries", "99"], "Invalid value for '--provider-retries'"),
        (["run", "--json", "--plan", "."], "is a directory"),
        (["validate", "--json"], "Missing argument"),
        (["logs", "--json"], "Missing argument"),
        (["seeds", "list", "--json", "--verbose"], "No such option: --verbose"),
        (["doctor", "--json", "extra"], "Got unexpected extra argument"),
    ],
    ids=[
        "unknown-option",
        "bad-value",
        "out-of-range",
        "plan-is-directory",
        "validate-no-plan",
        "logs-no-id",
        "subgroup-option",
        "extra-argument",
    ],
)
def test_usage_error_with_json_is_one_error_object_and_exit_2(
    run_agent: RunAgent, args: list[str], said: str
) -> None:
    run = run_agent(*args)

    assert run.returncode == 2, run.stderr
    error = one_error(run)
    assert error["kind"] == "usage"
    assert said in error["message"]
    assert error["planner_task_id"] is None
    assert error["sandbox_id"] is None
    assert said in run.stderr  # click's own message stays on stderr for a person
    assert "Traceback" not in run.stderr


def test_usage_error_without_json_prints_nothing_on_stdout(run_agent: RunAgent) -> None:
    run = run_agent("run", "--no-such-option")

    assert run.returncode == 2
    assert run.stdout == ""
    assert "No such option" in run.stderr


def test_json_after_the_end_of_options_does_not_ask_for_json(run_agent: RunAgent) -> None:
    run = run_agent("validate", "--seed", "calculator", "--nope", "--", "--json")

    assert run.returncode == 2
    assert run.stdout == ""


# --- Ctrl-C, internal errors, --debug ----------------------------------------------------------


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def test_ctrl_c_while_planning_with_json_is_one_error_object_and_exit_130(
    provider: FakeProvider, agent_env: dict[str, str], release: threading.Event
) -> None:
    provider.default.action = lambda handler: release.wait(30)
    process = subprocess.Popen(
        [str(AGENT), "run", "--json"],
        env=agent_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: bool(provider.requests), timeout=20)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert process.returncode == 130, stdout + stderr
    error = one_error(AgentRun(process.returncode, stdout, stderr, Path()))
    assert error["kind"] == "interrupted"
    assert error["sandbox_id"] is None
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    runs = Path(agent_env["XDG_STATE_HOME"]) / "sandboxed-coding-agent" / "runs"
    (record,) = runs.iterdir()
    assert json.loads(record.read_text())["outcome"] == "interrupted"


@pytest.fixture
def crashing_plugins(tmp_path: Path) -> dict[str, str]:
    """A site folder with a runner that crashes, a plugin that cannot be imported and one
    that prints (itself, and through a process it starts).

    Each is a plain ``.dist-info`` (see ``install_plugin``).
    """
    site = tmp_path / "site"
    site.mkdir()
    (site / "crashing_runner.py").write_text(
        textwrap.dedent(
            """\
            from sandboxed_coding_agent.core.hookspecs import hookimpl

            class CrashingRunner:
                name = "crashing"
                description = "a runner with a bug"

                def run_test(self, job):
                    raise RuntimeError("a bug in a third-party runner")

            @hookimpl
            def register_runners(register):
                register(CrashingRunner())
            """
        )
    )
    (site / "unimportable_plugin.py").write_text("import a_module_that_is_not_installed\n")
    (site / "chatty_plugin.py").write_text(
        "import os\nprint('chatty plugin imported')\nos.system('echo chatty subprocess')\n"
    )
    for module, name in {
        "crashing_runner": "crashing",
        "unimportable_plugin": "unimportable",
        "chatty_plugin": "chatty",
    }.items():
        install_plugin(site, module.replace("_", "-"), "0.1.0", {name: module})
    return {"PYTHONPATH": str(site)}


def test_internal_error_is_exit_70_with_one_error_object_and_no_traceback(
    run_agent: RunAgent, write_plan: Callable[..., Path], crashing_plugins: dict[str, str]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": "x = 1\n"}]})

    run = run_agent(
        "run", "--plan", str(plan), "--runner", "crashing", "--json", env=crashing_plugins
    )

    assert run.returncode == 70, run.stderr
    error = one_error(run)
    assert error["kind"] == "internal"
    assert "RuntimeError: a bug in a third-party runner" in error["message"]
    assert "--debug" in run.stderr
    assert "Traceback" not in run.stderr
    # The broken plugin is a warning on stderr; stdout stayed one JSON object.
    assert "warning: plugin 'unimportable'" in run.stderr


@pytest.mark.parametrize(
    "args",
    [["seeds", "list", "--json"], ["plugins", "list", "--json"], ["validate", "--json", "x.json"]],
    ids=["seeds", "plugins", "validate"],
)
def test_what_plugins_print_goes_to_stderr_with_json(
    run_agent: RunAgent, crashing_plugins: dict[str, str], args: list[str]
) -> None:
    run = run_agent(*args, env=crashing_plugins)

    json.loads(run.stdout)  # one JSON value (a line for validate), nothing else
    assert "chatty plugin imported" in run.stderr
    assert "chatty subprocess" in run.stderr
    assert "warning: plugin 'unimportable'" in run.stderr


def test_debug_adds_the_traceback_and_keeps_the_exit_code_and_json(
    run_agent: RunAgent, write_plan: Callable[..., Path], crashing_plugins: dict[str, str]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": "x = 1\n"}]})

    internal = run_agent(
        "--debug",
        "run",
        "--plan",
        str(plan),
        "--runner",
        "crashing",
        "--json",
        env=crashing_plugins,
    )
    usage = run_agent("run", "--seed", "nope", "--json", "--debug")

    assert internal.returncode == 70
    assert one_error(internal)["kind"] == "internal"
    assert "Traceback" in internal.stderr
    assert 'raise RuntimeError("a bug in a third-party runner")' in internal.stderr
    assert usage.returncode == 2
    assert one_error(usage)["kind"] == "usage"
    assert "Traceback" in usage.stderr


def test_debug_tracebacks_show_control_characters_escaped(
    run_agent: RunAgent, tmp_path: Path
) -> None:
    # A seed folder's key holding terminal escapes is quoted by the error, and so by the
    # traceback: neither may clear the screen or repaint what the reader sees.
    folder = tmp_path / "seed"
    folder.mkdir()
    (folder / "seed.toml").write_text('name = "x"\n"\\u001b[2J\\u001b[31mevil" = 1\n')

    run = run_agent("--debug", "seeds", "show", str(folder))

    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" in run.stderr
    assert "\x1b" not in run.stderr
    assert "\\x1b[2J\\x1b[31mevil: unknown key" in run.stderr


# --- text that is not UTF-8 --------------------------------------------------------------------


def test_prompt_that_is_not_utf8_is_a_usage_error_and_nothing_is_sent(
    provider: FakeProvider, run_agent: RunAgent
) -> None:
    # A str argument with a lone surrogate reaches the program as the raw byte 0xff.
    run = run_agent("run", "fix add \udcff", "--json")

    assert run.returncode == 2, run.stderr
    error = one_error(run)
    assert error["kind"] == "usage"
    assert "PROMPT is not valid UTF-8" in error["message"]
    assert "Traceback" not in run.stderr
    assert provider.requests == []


def test_json_stays_valid_utf8_when_a_name_is_not(
    agent_env: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "seed-\udcff"  # the file name holds the byte 0xff
    done = subprocess.run(
        [str(AGENT), "run", "--seed", str(folder), "--json"],
        env=agent_env,
        capture_output=True,
        check=False,
    )

    assert done.returncode == 2
    error = json.loads(done.stdout.decode("utf-8"))["error"]  # strict: raises on a raw 0xff
    assert error["kind"] == "usage"
    assert "seed-\udcff" in error["message"]


# --- what a person reads -----------------------------------------------------------------------


def test_test_output_cannot_rewrite_the_summary_on_a_terminal(
    agent_env: dict[str, str], write_plan: Callable[..., Path]
) -> None:
    # A hostile patch prints escape sequences that would move the cursor up to the
    # verdict and overwrite it, set the window title, and return to the line start.
    hostile = (
        "import sys\n"
        "sys.stdout.write('\\x1b[30A\\x1b[2Kx\\x1b]0;pwned\\x07\\rtests passed\\n')\n"
        "def add(left, right):\n    return left - right\n"
    )
    plan = write_plan({"files": [{"path": "calculator.py", "content": hostile}]})
    terminal, child_side = pty.openpty()
    process = subprocess.Popen(
        [str(AGENT), "run", "--plan", str(plan)],
        env=agent_env,
        stdin=subprocess.DEVNULL,
        stdout=child_side,
        stderr=subprocess.PIPE,
    )
    os.close(child_side)
    shown = bytearray()
    try:
        while chunk := os.read(terminal, 65536):
            shown += chunk
    except OSError:  # EIO: the agent closed its side
        pass
    finally:
        os.close(terminal)
        process.communicate(timeout=60)

    text = shown.decode("utf-8", errors="replace")
    assert process.returncode == 1, text
    assert "tests FAILED" in text
    assert "\x1b[30A" not in text
    assert "\x1b]0;" not in text
    assert "\\x1b[30A\\x1b[2Kx\\x1b]0;pwned\\x07\\rtests passed" in text


def test_stdout_that_cannot_be_written_is_one_message_not_a_traceback(
    agent_env: dict[str, str], write_plan: Callable[..., Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": "x = 1\n"}]})
    with open("/dev/full", "w") as full:  # every write fails: "No space left on device"
        done = subprocess.run(
            [str(AGENT), "run", "--plan", str(plan), "--json"],
            env=agent_env,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )

    assert done.returncode == 70
    assert "No space left on device" in done.stderr
    assert "Traceback" not in done.stderr

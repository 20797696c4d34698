"""A hostile model's commands in a session (``agent run --planner explore``), against the real
local sandbox: each tries a way out of what a session promises, and the promise holds.

The promises are in ``core/runs/sessions.py`` and ``docs/exploring-planner.md``: each
command runs in a fresh sandbox with no network and nothing of the host; nothing but the
project's files carries from one command to the next; the test files stay the seed's; the
report of what the command left is the harness's, signed with a key the command never
sees; and nothing the command leaves stops the agent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import AgentRun, FakeProvider
from test_git_seeds import make_repository, seed_folder
from test_sessions import KEY, STEP, _signed

from sandboxed_coding_agent.core.runs import sessions
from sandboxed_coding_agent.core.runs.sessions import (
    LONGEST_SESSION_PATH,
    MAX_SESSION_FILES,
    MAX_SESSION_PATH_BYTES,
    Session,
    SessionError,
    SessionFilesRefused,
    read_hand_back,
)
from sandboxed_coding_agent.core.seeds import git_source
from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox
from sandboxed_coding_agent.plugins.local_sandbox.tree import MAX_TREE_MOUNTS
from sandboxed_coding_agent.plugins.openai_planner import conversation as talk
from sandboxed_coding_agent.plugins.openai_planner.prompt import encode_body

TEST_FILE = "check_calculator.py"
EDITABLE = "calculator.py"


def _session() -> Session:
    return Session(LocalSandbox(), calculator_seed(), command_seconds=20)


def test_a_command_sees_nothing_of_the_hosts_files_processes_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret\n")
    monkeypatch.setenv("CODING_AGENT_API_KEY", "sk-session-attack-key")
    session = _session()

    looked = session.run(
        f"cat {secret} {Path(__file__).resolve()} /etc/passwd /etc/hostname 2>&1; "
        "ls / /home /work 2>&1; cat /proc/1/root/etc/passwd 2>&1 | head -1; env; "
        "echo processes=$(ls -d /proc/[0-9]* | wc -l)"
    )

    assert "host-secret" not in looked.output
    assert "sk-session-attack-key" not in looked.output
    assert "CODING_AGENT" not in looked.output
    assert int(looked.output.split("processes=")[1]) <= 5, looked.output
    assert "import pytest" not in looked.output
    assert "root:" not in looked.output
    assert sorted(session.files) == sorted(calculator_seed().read_files())


@pytest.fixture
def listeners() -> Iterator[tuple[int, str]]:
    """A TCP port on the host's loopback and an abstract Unix socket of the host, listening."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    name = f"session-attack-{uuid.uuid4().hex}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind("\0" + name)
    unix.listen()
    try:
        yield tcp.getsockname()[1], name
    finally:
        tcp.close()
        unix.close()


def test_a_command_reaches_no_socket_of_the_host(listeners: tuple[int, str]) -> None:
    port, name = listeners
    session = _session()
    probe = f"""
import socket
for family, address in ((socket.AF_INET, ("127.0.0.1", {port})),
                        (socket.AF_INET, ("10.0.2.2", 80)), (socket.AF_INET, ("1.1.1.1", 53)),
                        (socket.AF_UNIX, "\\0{name}")):
    try:
        socket.socket(family).connect(address)
        print("reached", address)
    except OSError as error:
        print("refused", error.errno)
"""

    tried = session.run(f"python3 - <<'EOF'\n{probe}\nEOF")

    assert tried.exit_code == 0, tried.output
    assert "reached" not in tried.output
    assert tried.output.count("refused") == 4, tried.output


def _host_processes_with(marker: str) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in line:
                found[int(entry.name)] = line
    return found


def test_no_process_outlives_its_command_however_it_hides() -> None:
    session = _session()
    # An unusual length of sleep, to find on the host: none may be left anywhere.
    marker = "sleep 987.654"
    double_fork = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execvp('sleep', ['sleep', '987.654'])\n"
    )

    started = session.run(
        f"(setsid {marker} &); (nohup {marker} >/dev/null 2>&1 &); "
        f'python3 -c "{double_fork}"; '
        f"disown -a; {marker} & echo started"
    )
    after = session.run("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")

    assert "started" in started.output
    assert started.exit_code == 0
    assert marker not in after.output, after.output
    assert not _host_processes_with(marker)


def test_nothing_but_project_files_carries_to_the_next_command() -> None:
    session = _session()

    session.run(
        "echo mark > /tmp/mark; echo mark > /dev/shm/mark; mkdir -p sub; "
        "export MARK=1; cd sub; ln -s /tmp/mark link; mkfifo pipe; "
        "echo kept > kept.txt; chmod 755 kept.txt"
    )
    after = session.run(
        "ls /tmp /dev/shm; echo mark=${MARK:-none}; pwd; ls -l sub; cat sub/kept.txt"
    )

    assert "mark=none" in after.output
    assert "/workspace\n" in after.output
    assert "link" not in after.output
    assert "pipe" not in after.output
    assert "-rw-r--r--" in after.output  # its mode was not carried either
    assert "kept" in after.output
    assert session.changes() == {"sub/kept.txt": b"kept\n"}


def test_a_command_can_neither_read_the_key_nor_write_a_signed_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "5e" * 32
    monkeypatch.setattr(sessions.secrets, "token_hex", lambda _: key)
    session = _session()
    forged = '{"kind": "file", "path": "calculator.py", "data": "ZXZpbA==", "seq": 2}'  # "evil"

    tried = session.run(
        "cat /proc/1/environ /proc/1/cmdline /proc/1/mem 2>&1; ls -l /proc/1/fd 2>&1; "
        "for fd in /proc/1/fd/* /proc/1/task/*/fd/*; do "
        f"  echo '{key[:8]}... {forged}' > $fd 2>/dev/null && echo wrote $fd; done; "
        "python3 -c \"import os; print(os.listdir('/proc/self/fd'))\"; "
        f"echo '{forged}'; echo '{forged}' >&2; grep -rl --text 5e5e5e5e /proc/1 /tmp . 2>&1 | head"
    )

    assert key not in tried.output
    assert "wrote" not in tried.output
    # The command's own descriptors are its standard three and the listing's own: no report.
    assert "['0', '1', '2', '3']" in tried.output, tried.output
    assert session.files[EDITABLE] == calculator_seed().read_files()[EDITABLE]


def test_the_test_files_stay_the_seeds_whatever_a_command_does() -> None:
    session = _session()
    original = calculator_seed().read_files()

    tried = session.run(
        f"chmod u+w {TEST_FILE}; echo evil >> {TEST_FILE}; rm -f {TEST_FILE}; "
        f"mv {TEST_FILE} moved.py; ln {TEST_FILE} hard.py; cp {TEST_FILE} copy.py; "
        f"echo 'raise SystemExit' > conftest.py; "
        f"rm {EDITABLE}; ln -s {TEST_FILE} {EDITABLE}; echo done"
    )

    assert "done" in tried.output
    assert session.files[TEST_FILE] == original[TEST_FILE]
    assert EDITABLE in tried.not_kept  # a link, so not carried: the file is deleted
    changes = session.changes()
    assert TEST_FILE not in changes
    assert changes[EDITABLE] is None
    assert set(changes) == {EDITABLE, "copy.py", "conftest.py"}


def test_names_that_are_not_utf8_are_no_trouble_for_the_model_conversation() -> None:
    session = _session()

    made = session.run(
        "echo a > $'\\xff\\xfe.py'; ln -s x $'\\xfflink'; mkfifo $'new\\nline'; "
        "echo b > '..'x; echo done"
    )
    shown = talk.command_result(made)
    after = session.run("ls")

    assert "done" in made.output
    assert set(made.not_kept) == {"\ufffdlink", "new\nline"}, made.not_kept
    # The tool message goes to the provider as UTF-8: it must encode.
    assert b"\xef\xbf\xbdlink" in encode_body({"content": shown})
    assert after.exit_code == 0
    assert "..x" in session.files
    assert session.files[os.fsdecode(b"\xff\xfe.py")] == b"a\n"  # the bytes of its name kept


def test_too_many_files_or_too_long_paths_are_refused_and_the_session_goes_on() -> None:
    session = _session()

    with pytest.raises(SessionError, match="files"):
        session.run(f"for i in $(seq {MAX_SESSION_FILES + 1}); do : > f$i; done")
    with pytest.raises(SessionError, match="bytes of paths"):
        session.run(
            "python3 -c \"[open('%03d' % i + 'x' * 250, 'w').close() for i in range(600)]\""
        )
    near = session.run(f"for i in $(seq {MAX_SESSION_FILES - 10}); do : > f$i; done")
    after = session.run("ls | wc -l")

    assert near.exit_code == 0
    assert after.exit_code == 0, after.output
    assert int(after.output.split()[-1]) == MAX_SESSION_FILES - 10 + 2


def test_what_a_command_leaves_unreadable_deep_or_long_is_handed_back_or_named() -> None:
    session = _session()
    deep = "/".join(["d"] * 1010)  # deeper than Python's recursion, 2 KiB of path
    long = "/".join(["x" * 250] * 16)  # a path no sandbox could make under its project

    left = session.run(
        f"mkdir -p {deep} {long} && echo deep > {deep}/f && echo long > {long}/f; "
        "echo x > closed; chmod 000 closed; mkdir shut; echo y > shut/g; chmod 000 shut; "
        "echo done"
    )
    after = session.run(f"cat {deep}/f")

    assert "done" in left.output
    assert set(left.not_kept) == {"closed", "shut", long[:200]}, left.not_kept
    assert f"{deep}/f" in session.files
    assert not any(path.startswith("x") for path in session.files)
    assert after.output == "deep\n"


def test_a_signal_to_the_harness_changes_nothing() -> None:
    session = _session()

    signalled = session.run(
        "kill -INT 1; kill -TERM 1; kill -HUP 1; kill -USR1 1; sleep 0.5; echo x > after.txt"
    )

    assert signalled.exit_code == 0, signalled.output
    assert session.files["after.txt"] == b"x\n"


def test_a_flood_of_output_costs_the_command_its_changes_not_the_session() -> None:
    session = _session()

    with pytest.raises(SessionFilesRefused, match="output limit"):
        session.run("echo made > made.txt; yes")
    after = session.run("ls")

    assert after.output.split() == sorted(calculator_seed().read_files())


def test_a_command_runs_with_the_default_signal_actions() -> None:
    session = _session()

    piped = session.run("yes | head -1; trap -p")

    assert piped.output == "y\n", piped.output
    assert piped.exit_code == 0


def test_filling_the_disk_stops_at_the_sandboxs_bound() -> None:
    session = _session()
    # Each file under the bound on one file's size; together past each folder's bound.
    chunk = session.seed.limits.max_file_mb * 1024 * 1024 - 1
    count = session.seed.limits.disk_mb // session.seed.limits.max_file_mb + 1

    filled = session.run(
        "for where in /tmp /dev/shm .; do for i in $(seq "
        f"{count}); do head -c {chunk} /dev/zero > $where/fill$i || echo full $where; "
        "done; done; rm -f fill*; echo done"
    )
    after = session.run("echo next")

    for where in ("/tmp", "/dev/shm", "."):
        assert f"full {where}\n" in filled.output, filled.output
    assert "No space left on device" in filled.output
    assert "done" in filled.output
    assert not any(path.startswith("fill") for path in session.files)
    assert after.output == "next\n"


def test_a_fork_bomb_and_a_memory_hog_stop_at_the_seeds_bounds() -> None:
    bombed = Session(LocalSandbox(), calculator_seed(), command_seconds=3)
    session = _session()
    memory = session.seed.limits.memory_mb

    bombed.run("bomb() { bomb | bomb & }; bomb; sleep 1")
    hogged = session.run(f"python3 -c 'a = bytearray({4 * memory} * 1024 * 1024)'; echo status=$?")
    after = bombed.run("ps -e | wc -l")

    # Killed by the memory group (137), or refused by the address-space limit (1).
    assert "status=137" in hogged.output or "MemoryError" in hogged.output, hogged.output
    assert int(after.output) <= 5, after.output  # the harness, the shell, ps, wc


def test_a_sandbox_of_more_files_than_select_takes_starts() -> None:
    # One descriptor per file while the sandbox starts: past 1024 of them, select() fails.
    session = _session()
    session.files.update({f"f{number}": b"" for number in range(1100)})

    with pytest.raises(SessionError, match="1000 files"):
        session.run("ls | wc -l")


#: One command run by the harness's session step as an ordinary process, as a runner whose
#: container has an init of its own runs it (not as PID 1): what it hands back, by kind.
HARNESS_NOT_PID_1 = """
import json, sys
from sandboxed_coding_agent.core.harness import session_step
kinds = []
session_step.run_step(["bash", "-c", sys.argv[1]], {"timeout": 20, "max_bytes": 100000},
                      set(), lambda kind, **fields: kinds.append([kind, fields.get("path")]))
print(json.dumps(kinds))
"""


def test_a_harness_that_is_not_pid_1_ends_what_left_its_group(tmp_path: Path) -> None:
    marker = f"sleep {uuid.uuid4().int % 1000}.{os.getpid()}"
    escape = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(0.5)\n"
        "        open('late.txt', 'w').write('late')\n"
        f"        os.execvp('sleep', {marker.split()!r})\n"
    )
    quiet = ">/dev/null 2>&1"  # none holds the output open: the harness's end is seen at once
    command = (
        f"(setsid {marker} {quiet} &); (setsid -f {marker} {quiet}); "
        f'python3 -c "{escape}" {quiet}; echo x > a.txt'
    )
    try:
        ran = subprocess.run(
            [sys.executable, "-c", HARNESS_NOT_PID_1, command],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        time.sleep(1)  # time for what the command left to write, had it been left

        assert json.loads(ran.stdout.splitlines()[-1]) == [
            ["step", None],
            ["file", "a.txt"],
            ["files", None],
        ]
        assert not (tmp_path / "late.txt").exists()
        assert not _host_processes_with(marker)
    finally:
        for pid in _host_processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_git_seeds_hidden_test_in_its_tree_is_not_in_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    secret = "tests/test_secret.py"
    commit = make_repository(tmp_path / "repo", extra={secret: "EXPECTED = 'held-out'\n"})
    folder = seed_folder(tmp_path / "seed", str(tmp_path / "repo"), commit)
    manifest = folder / "seed.toml"
    manifest.write_text(
        manifest.read_text().replace("\ntests = ", f"\nhidden_tests = [{secret!r}]\ntests = ")
    )
    seed = load_seed(folder)
    assert seed.source is not None
    assert seed.hidden_files == (secret,)
    git_source.materialize(seed.source)
    session = Session(LocalSandbox(), seed, command_seconds=20)

    looked = session.run(f"ls tests; cat {secret}; grep -r held-out . /proc/self/mountinfo")
    proved = session.run("python -m unittest discover -s tests -t . 2>&1 | tail -1")

    assert "held-out" not in looked.output
    assert "test_secret" not in looked.output.replace(f"cat: {secret}", "")
    assert "test_calc.py" in looked.output
    assert "FAILED" in proved.output  # the visible test runs, on the broken code


def test_a_hostile_models_leavings_end_neither_the_agent_nor_the_run(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    # Names that are not UTF-8 among what is not kept; more files than a session carries.
    provider.reply_bash("ln -s x $'\\xff'; mkfifo $'\\xfe'; echo made")
    provider.reply_bash(f"for i in $(seq {MAX_SESSION_FILES + 1}); do : > f$i; done")
    provider.reply_bash("yes")
    provider.reply_bash("echo a\0b")
    provider.reply_bash("echo lone-\ud800-surrogate")
    provider.reply_bash("ls | wc -l; sed -i 's/left - right/left + right/' calculator.py")
    provider.reply_calls(("submit", {}))

    done = run_agent("run", "--planner", "explore", "--seed", "calculator", "--json", timeout=300)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.json()["tests_passed"] is True
    told = [m["content"] for m in provider.requests[-1].json()["messages"] if m["role"] == "tool"]
    assert "not carried to the next command: \ufffd, \ufffd" in told[0], told[0]
    assert "the files are as before the command" in told[1]
    assert "output limit" in told[2]
    assert "NUL" in told[3]
    assert "harness: cannot run the command: UnicodeEncodeError" in told[4], told[4]
    assert "Traceback" not in told[4]
    assert told[5].endswith("\n2\n"), told[5]  # the seed's two files, no more


def test_the_agent_bounds_what_any_harness_hands_back() -> None:
    # A runner's harness that does not bound the files: the agent refuses them all the same.
    def handed(*paths: str) -> str:
        files = [{"kind": "file", "path": path, "data": ""} for path in paths]
        return _signed(STEP, *files, {"kind": "files", "count": len(paths), "skipped": []})

    assert read_hand_back(handed("a", "b/c"), KEY, "x").files == {"a": b"", "b/c": b""}
    too_many = [f"f{number}" for number in range(MAX_SESSION_FILES + 1)]
    too_long = ["/".join(["d" * 200] * (LONGEST_SESSION_PATH // 200 + 1))]
    too_much = [f"{number:03}" + "n" * 250 for number in range(MAX_SESSION_PATH_BYTES // 250)]
    for paths in (too_many, too_long, too_much):
        with pytest.raises(SessionFilesRefused):
            read_hand_back(handed(*paths), KEY, "x")
    with pytest.raises(SessionError, match="has the path"):
        read_hand_back(handed("\ud800"), KEY, "x")  # no name's bytes
    not_utf8 = {"kind": "files", "count": 0, "skipped": ["\udcff\ud800x"]}
    (shown,) = read_hand_back(_signed(STEP, not_utf8), KEY, "x").not_kept
    assert shown.encode("utf-8").endswith(b"x")  # text any message may hold


def test_a_cheat_left_in_the_session_is_not_in_the_plan_nor_its_test(
    provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    # Files that would make any test pass, were they where the plan is tested; no fix.
    cheat = "import os; os._exit(0)"
    provider.reply_bash(
        f"echo '{cheat}' | tee conftest.py sitecustomize.py usercustomize.py "
        "> check_calculator.py; echo '# touched' >> calculator.py; python -m unittest; echo $?"
    )
    provider.reply_calls(("submit", {}))

    done = run_agent("run", "--planner", "explore", "--seed", "calculator", "--json", timeout=300)

    result = done.json()
    assert result["changed_files"] == ["calculator.py"], result
    assert result["tests_passed"] is False
    assert done.returncode != 0


def test_a_git_seeds_session_goes_on_whatever_a_command_does_to_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    commit = make_repository(tmp_path / "repo")
    seed = load_seed(seed_folder(tmp_path / "seed", str(tmp_path / "repo"), commit))
    assert seed.source is not None
    git_source.materialize(seed.source)
    session = Session(LocalSandbox(), seed, command_seconds=20)

    # A folder of the tree renamed, and a folder made where the tree has a file.
    moved = session.run(
        "mv pkg pkg_old && mkdir -p pkg/__init__.py && echo x > pkg/__init__.py/evil; "
        "chmod u+w README; echo changed > README; echo done"
    )
    after = session.run("cat README; ls pkg")

    assert "done" in moved.output
    assert moved.not_kept == ("pkg/__init__.py/evil",)
    assert after.exit_code == 0, after.output
    assert after.output.split() == ["calc", "__init__.py", "calc.py"]
    assert set(session.changes()) == {"pkg/calc.py", "pkg_old/calc.py"}


def test_files_no_sandbox_can_start_with_take_the_session_back_a_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder of the tree with more entries than a sandbox may bind one by one: a command
    # that makes a file there has it opened, entry by entry, in the next sandbox.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    wide = {f"pkg/wide/m{number}.py": "" for number in range(MAX_TREE_MOUNTS + 1)}
    commit = make_repository(tmp_path / "repo", extra=wide)
    seed = load_seed(seed_folder(tmp_path / "seed", str(tmp_path / "repo"), commit))
    assert seed.source is not None
    git_source.materialize(seed.source)
    session = Session(LocalSandbox(), seed, command_seconds=20)
    session.run("echo kept > notes.txt")

    opened = session.run("mv pkg old && mkdir -p pkg/wide && echo x > pkg/wide/new.py")
    with pytest.raises(SessionFilesRefused, match="could not be put in a sandbox"):
        session.run("true")
    after = session.run("ls; cat notes.txt")

    assert opened.exit_code == 0, opened.output
    assert after.output.split() == ["README", "notes.txt", "pkg", "tests", "kept"], after.output
    assert set(session.changes()) == {"notes.txt"}

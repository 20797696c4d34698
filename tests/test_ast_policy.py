"""The built-in ``python-ast`` policy: what it refuses, what it lets through, its parameters.

Most cases check the policy object directly on a plan for the calculator; the
last ones go through the real CLI and sandbox, to show that the cheats it
refuses really do fool the test when the policy is off.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXED_CALCULATOR, AgentRun

from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.model import PatchFile, PatchPlan
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.python_ast_policy import DEFAULT_FORBIDDEN, PythonAstPolicy

SEED = calculator_seed()
POLICY = PythonAstPolicy()


def check(
    content: str, policy: PythonAstPolicy = POLICY, path: str = "calculator.py"
) -> list[Rejection]:
    return list(policy.check(PatchPlan([PatchFile(path, content)]), SEED))


def found(content: str, policy: PythonAstPolicy = POLICY) -> list[tuple[str, str]]:
    """(rule, entry) for every rejection; the entry is the last quoted name in the message."""
    return [(r.rule, r.message.rsplit("'", 2)[-2]) for r in check(content, policy)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import socket\n", [("forbidden-import", "socket")]),
        ("import socket as s\ns.create_connection(('h', 1))\n", [("forbidden-import", "socket")]),
        ("from subprocess import run\nrun(['id'])\n", [("forbidden-import", "subprocess")]),
        ("import ctypes.util\n", [("forbidden-import", "ctypes")]),
        ("import os\nos.system('id')\n", [("forbidden-name", "os.system")]),
        ("import os as o\no.execv('/bin/sh', [])\n", [("forbidden-name", "os.exec*")]),
        ("from os import system as run_it\nrun_it('id')\n", [("forbidden-import", "os.system")]),
        ("from os import *\n", [("forbidden-import", "os.system")]),
        ("import os\nf = getattr(os, 'popen')\n", [("forbidden-name", "os.popen")]),
        # Faking the verdict: leave with status 0 before the assertion runs.
        ("import os\nos._exit(0)\n", [("forbidden-name", "os._exit")]),
        ("import sys\nsys.exit(0)\n", [("forbidden-name", "sys.exit")]),
        ("exit(0)\n", [("forbidden-name", "exit")]),
        ("import atexit\n", [("forbidden-import", "atexit")]),
        # Faking the checker: replace unittest or a module the test imports.
        (
            "import unittest\nunittest.TestCase.assertEqual = print\n",
            [("forbidden-import", "unittest")],
        ),
        ("from unittest import mock\n", [("forbidden-import", "unittest")]),
        (
            "import sys\nsys.modules['check_calculator'] = None\n",
            [("forbidden-name", "sys.modules")],
        ),
        ("import builtins\nbuiltins.print = id\n", [("forbidden-import", "builtins")]),
        ("__builtins__['len'] = id\n", [("forbidden-name", "__builtins__")]),
        # Hiding any of that from a reader.
        ("eval('1')\n", [("forbidden-name", "eval")]),
        ("__import__('socket')\n", [("forbidden-name", "__import__")]),
        ("import importlib\n", [("forbidden-import", "importlib")]),
        ("x = add.__globals__\n", [("forbidden-attribute", "__globals__")]),
        (
            "x = ().__class__.__base__.__subclasses__()\n",
            [("forbidden-attribute", "__subclasses__")],
        ),
    ],
)
def test_forbidden_imports_and_uses_are_rejected(
    source: str, expected: list[tuple[str, str]]
) -> None:
    assert found(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        FIXED_CALCULATOR,
        "import math\nimport os.path\n\ndef add(a, b):\n    return math.fsum([a, b])\n",
        "import os\nHERE = os.path.dirname(__file__)\n",
        # A local name that happens to be a forbidden module's is not that module.
        "def add(left, right):\n    signal = left + right\n    return signal\n",
        "from . import helpers\n",
        "value = {'exit': 1}['exit']\n",
    ],
)
def test_ordinary_code_passes(source: str) -> None:
    assert check(source) == []


def test_each_forbidden_entry_is_reported_once_with_its_first_line() -> None:
    source = "import os\n\nos.system('a')\nos.system('b')\n"
    (rejection,) = check(source)
    assert rejection.policy == "python-ast"
    assert rejection.path == "calculator.py"
    assert rejection.message.startswith("line 3: uses os.system")


def test_code_that_does_not_parse_is_rejected_because_it_cannot_be_checked() -> None:
    (rejection,) = check("def add(:\n")
    assert rejection.rule == "syntax"
    assert "line 1" in rejection.message


def test_only_python_files_are_read() -> None:
    assert check("import socket\n", path="notes.txt") == []


def test_allow_takes_an_entry_off_the_list() -> None:
    policy = POLICY.configure({"allow": ["sys.exit"]})
    assert check("import sys\nsys.exit(0)\n", policy) == []
    assert "sys.exit" in DEFAULT_FORBIDDEN  # the registered policy is unchanged
    assert found("import os\nos._exit(0)\n", policy) == [("forbidden-name", "os._exit")]


def test_also_forbid_adds_to_the_list_and_forbid_replaces_it() -> None:
    added = POLICY.configure({"also_forbid": ["json", "os.environ"]})
    assert found("import json\n", added) == [("forbidden-import", "json")]
    assert found("import os\nkey = os.environ['HOME']\n", added) == [
        ("forbidden-name", "os.environ")
    ]
    replaced = POLICY.configure({"forbid": ["json"]})
    assert check("import socket\n", replaced) == []
    assert found("import json\n", replaced) == [("forbidden-import", "json")]


def test_paths_chooses_the_files_to_read() -> None:
    policy = POLICY.configure({"paths": ["lib/*.py"]})
    assert check("import socket\n", policy) == []
    assert check("import socket\n", policy, path="lib/net.py") != []


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"forbidden": ["x"]}, "unknown parameter 'forbidden'"),
        ({"allow": "sys.exit"}, "allow: expected a list of non-empty strings"),
        ({"allow": ["json"]}, "allow: 'json' is not forbidden"),
        ({"paths": ["../*.py"]}, "paths: '../*.py'"),
    ],
)
def test_bad_parameters_are_refused_with_the_parameter_named(
    parameters: dict[str, Any], message: str
) -> None:
    with pytest.raises(
        (ValueError, TypeError), match=message.replace("*", r"\*").replace(".", r"\.")
    ):
        POLICY.configure(parameters)


@pytest.mark.parametrize("key", ["forbid", "also_forbid", "allow", "paths"])
def test_a_list_of_more_than_a_thousand_entries_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key}: 1,001 entries; at most 1,000$"):
        POLICY.configure({key: [f"m{i}" for i in range(1001)]})


def test_an_entry_longer_than_any_dotted_name_is_refused() -> None:
    with pytest.raises(ValueError, match="also_forbid: an entry of 257 characters; at most 256"):
        POLICY.configure({"also_forbid": ["a" * 257]})


def test_a_seed_folder_with_too_many_entries_is_refused_at_once(
    tmp_path: Path, run_agent: Callable[..., AgentRun]
) -> None:
    for name in ("calculator.py", "check_calculator.py"):
        (tmp_path / name).write_bytes((SEED.root / name).read_bytes())
    entries = json.dumps([f"m{i}*" for i in range(14_000)])
    (tmp_path / "seed.toml").write_text(
        'name = "many"\ndescription = "d"\ntests = ["check_*.py"]\n'
        'editable = ["calculator.py"]\ntest_command = ["python", "check_calculator.py"]\n'
        f'default_prompt = "Fix add."\n[policies.python-ast]\nforbid = {entries}\n'
    )

    run = run_agent("seeds", "show", str(tmp_path))

    assert run.returncode == 2, run.stderr
    assert "refused its parameters: forbid: 14,000 entries; at most 1,000" in run.stderr


def test_an_entry_given_twice_is_allowed_by_one_allow() -> None:
    policy = POLICY.configure({"forbid": ["json", "json", "os"], "also_forbid": ["os"]})

    assert policy.forbidden == ("json", "os")
    assert found("import json\n", policy.configure({"allow": ["json"]})) == []


def test_the_first_matching_entry_in_the_lists_order_is_reported() -> None:
    source = "import os\nos.system('id')\n"

    assert found(source, POLICY.configure({"forbid": ["os.*", "os.system"]})) == [
        ("forbidden-name", "os.*")
    ]
    assert found(source, POLICY.configure({"forbid": ["os.system", "os.*"]})) == [
        ("forbidden-name", "os.system")
    ]
    assert found(source, POLICY.configure({"forbid": ["o*", "os"]})) == [("forbidden-import", "o*")]


def test_a_thousand_wildcard_entries_are_one_pattern_not_a_thousand_tries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Trying each entry in turn for each name (fnmatch per entry) took 40 times as long
    # with 1,000 entries as with 10; the entries are now one compiled pattern. Counted,
    # not timed: a timed test says more about the machine's load than about the code.
    import fnmatch
    import re

    source = "".join(f"y = len.a{i}\nimport m{i}x\n" for i in range(400))
    policy = POLICY.configure({"forbid": [f"m{i}*" for i in range(1000)]})
    compiled: list[str] = []
    real_compile = re.compile

    def counting_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
        compiled.append(pattern)
        return real_compile(pattern, flags)

    def per_entry(*_: object) -> bool:
        raise AssertionError("an entry was tried on its own")

    monkeypatch.setattr(fnmatch, "fnmatch", per_entry)
    monkeypatch.setattr(fnmatch, "fnmatchcase", per_entry)
    monkeypatch.setattr(re, "compile", counting_compile)

    assert check(source, policy)
    assert check(source, policy)  # the second check reuses the first one's pattern

    assert len([p for p in compiled if "m999" in p]) <= 1, len(compiled)


def test_policy_is_registered_off_by_default() -> None:
    host = PluginHost(entry_points=False)
    assert host.policy("python-ast").activation == "off"
    assert "python-ast" not in [p.name for p in host.policies_for(SEED)]
    assert "python-ast" in [p.name for p in host.policies_for(SEED, switch_on=["python-ast"])]


# The cheat below makes the calculator's unittest exit with status 0 without fixing add():
# it ends the interpreter while unittest imports the module under test.
CHEAT = "import os\nos._exit(0)\n"


def test_exit_cheat_does_not_pass_when_the_policy_is_off(
    run_agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    # The exit status is 0, but unittest never reported: the verdict is a failure anyway.
    plan = write_plan({"files": [{"path": "calculator.py", "content": CHEAT}]})
    run = run_agent("run", "--plan", str(plan), "--seed", "calculator", "--json")
    assert run.returncode == 1, run.stderr
    result = run.json()
    assert (result["tests_passed"], result["test_exit_code"]) == (False, 0)
    assert result["test_report"]["status"] == "missing"


def test_policy_switched_on_from_the_command_line_refuses_the_exit_cheat(
    run_agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    plan = write_plan({"files": [{"path": "calculator.py", "content": CHEAT}]})
    run = run_agent(
        "run", "--plan", str(plan), "--seed", "calculator", "--policy", "python-ast", "--json"
    )
    assert run.returncode == 4, run.stderr
    (rejection,) = json.loads(run.stdout)["error"]["rejections"]
    assert (rejection["policy"], rejection["rule"]) == ("python-ast", "forbidden-name")
    assert "os._exit" in rejection["message"]
    assert "testing in runner" not in run.stderr
    assert run.sandboxes == []

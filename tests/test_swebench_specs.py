"""``--specs FILE``: settings by repository and version, so that one call imports or evaluates
a task file spanning repositories. The file is read as strictly as a seed's manifest."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import AgentRun
from test_swebench import Bench, bench, swe  # noqa: F401 (fixtures)

from sandboxed_coding_agent.core.errors import UsageError
from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.core.swebench.seed_contents import ImportOptions, command_of
from sandboxed_coding_agent.core.swebench.specs import read_specs

TOML = """\
["acme/calc"."1.0"]
python = "3.12"
requirements = ["pytest>=8"]
allow = ["introspection"]
test_command = ["python", "-m", "pytest", "-x", "{tests}"]

["acme/calc"."*"]
framework = "unittest"
project = false
"""


def test_an_entry_replaces_the_options_for_its_repository_and_version(tmp_path: Path) -> None:
    path = tmp_path / "specs.toml"
    path.write_text(TOML)
    as_json = tmp_path / "specs.json"
    as_json.write_text(
        json.dumps({"acme/calc": {"1.0": {"python": "3.12", "requirements": ["pytest>=8"]}}})
    )
    base = ImportOptions(framework="pytest", python="3.11")

    specs = read_specs(path)
    exact = specs.options(base, "acme/calc", "1.0")
    other = specs.options(base, "acme/calc", "2.0")
    elsewhere = specs.options(base, "acme/other", "1.0")

    assert (exact.python, exact.requirements, exact.guard_allow) == (
        "3.12",
        ("pytest>=8",),
        ("introspection",),
    )
    assert command_of(exact, ["tests/a.py", "tests/b.py"]) == (
        "python", "-m", "pytest", "-x", "tests/a.py", "tests/b.py",
    )  # fmt: skip
    assert (other.framework, other.project, other.python) == ("unittest", False, "3.11")
    assert elsewhere == base
    assert read_specs(as_json).options(base, "acme/calc", "1.0").python == "3.12"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('["acme/calc"."1.0"]\npyhton = "3.9"\n', 'unknown key "pyhton" (did you mean "python"'),
        ('["acme/calc"."1.0"]\npython = "3"\n', "python must be a version"),
        ('["acme/calc"."1.0"]\nrequirements = ["x @ https://e.com/x.whl"]\n', "not a package"),
        ('["acme/calc"."1.0"]\nrequirements = ["--index-url=https://e.com"]\n', "is an option"),
        ('["acme/calc"."1.0"]\nallow = ["everything"]\n', "allow names the guard's"),
        ('["acme/calc"."1.0"]\ntest_command = ["pytest"]\n', "holding '{tests}'"),
        ('["acme/calc"."1.0"]\nframework = "nose"\n', "framework must be one of"),
        ('["acme/calc"."1.0"]\nproject = "yes"\n', "project must be true or false"),
        ('["../calc"."1.0"]\npython = "3.9"\n', "is not a repository"),
        ('["acme/calc"]\npython = "3.9"\n', "must be a table of settings"),
        ('["acme/calc"."1 0"]\npython = "3.9"\n', "not a version"),
        ("[acme\n", "is not valid TOML"),
    ],
)
def test_a_bad_entry_is_one_message_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "specs.toml"
    path.write_text(text)

    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("(", r"\(")):
        read_specs(path)


def test_import_writes_each_tasks_seed_with_its_repositorys_settings(
    swe: Callable[..., AgentRun],  # noqa: F811
    bench: Bench,  # noqa: F811
    tmp_path: Path,
) -> None:
    specs = tmp_path / "specs.toml"
    specs.write_text(TOML)
    out = tmp_path / "seeds"

    done = swe(
        "import", str(bench.tasks_file(tmp_path)), "--repos", str(bench.repos),
        "--out", str(out), "--specs", str(specs),
    )  # fmt: skip
    refused = swe(
        "import", str(bench.tasks_file(tmp_path)), "--repos", str(bench.repos),
        "--out", str(tmp_path / "other"), "--specs", str(tmp_path / "missing.toml"),
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    seed = load_seed(out / "acme__calc-1")
    assert seed.runtime is not None
    assert (seed.runtime.python, seed.runtime.requirements) == ("3.12", ("pytest>=8",))
    assert seed.guard_allow == ("introspection",)
    assert seed.test_command == ("python", "-m", "pytest", "-x", "tests/test_ops.py")
    assert refused.returncode == 2
    assert "cannot read the specs file" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_tasks_version_is_read_as_text_and_a_bad_one_refuses_its_line(
    bench: Bench,  # noqa: F811
    tmp_path: Path,
) -> None:
    from sandboxed_coding_agent.core.swebench.tasks import read_tasks

    first, second = bench.tasks[0], bench.tasks[1]
    path = bench.tasks_file(tmp_path, [{**first, "version": 0.13}, {**second, "version": ["1"]}])

    found, refused = read_tasks(path)

    assert [task.version for task in found] == ["0.13"]
    assert [(bad.line, bad.field) for bad in refused] == [(2, "version")]


@pytest.mark.parametrize(
    "entry",
    [
        {"test_command": ["python", "\ud800", "{tests}"]},
        {"test_command": ["python", "a\u0000b", "{tests}"]},
        {"requirements": ["pytest\u2028"]},
        {"python": "3.\u0661\u0661"},
    ],
)
def test_text_that_cannot_go_into_a_manifest_or_a_command_is_refused_up_front(
    tmp_path: Path, entry: dict[str, object]
) -> None:
    path = tmp_path / "specs.json"
    path.write_text(json.dumps({"acme/calc": {"*": entry}}))

    with pytest.raises(UsageError, match="specs: acme/calc"):
        read_specs(path)

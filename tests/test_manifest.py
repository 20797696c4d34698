"""Folder seeds: reading ``seed.toml``, rejecting a bad one by line, and running one end to end."""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import AgentRun, FakeProvider

from sandboxed_coding_agent.core.model import (
    LimitError,
    PatchFile,
    PatchPlan,
    SeedLimits,
    SeedProject,
    SeedRuntime,
)
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.seeds import patterns
from sandboxed_coding_agent.core.seeds.manifest import (
    ManifestError,
    key_lines,
    load_seed,
    looks_like_path,
)

BUGGY = "def mean(values):\n    return sum(values) / (len(values) + 1)\n"
FIXED = "def mean(values):\n    return sum(values) / len(values)\n"
TEST = textwrap.dedent(
    """\
    import unittest

    from stats.mean import mean


    class MeanTest(unittest.TestCase):
        def test_mean_of_three(self):
            self.assertEqual(mean([1, 2, 3]), 2)
    """
)
MANIFEST = textwrap.dedent(
    """\
    name = "stats"
    description = "mean() divides by one too many"
    files = ["stats/*.py", "tests/*.py"]
    tests = ["tests/**"]
    editable = ["stats/*.py"]
    test_command = ["python", "-m", "unittest", "discover", "-v", "-s", "tests", "-t", "."]
    default_prompt = "Fix mean."
    """
)


def make_seed(root: Path, manifest: str = MANIFEST, files: dict[str, str] | None = None) -> Path:
    files = {
        "stats/__init__.py": "",
        "stats/mean.py": BUGGY,
        "tests/__init__.py": "",
        "tests/test_mean.py": TEST,
        **(files or {}),
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "seed.toml").write_text(manifest)
    return root


def problem(root: Path, manifest: str, files: dict[str, str] | None = None) -> str:
    make_seed(root, manifest, files)
    with pytest.raises(ManifestError) as caught:
        load_seed(root, check_policy=PluginHost(entry_points=False).check_policy_parameters)
    message = caught.value.message
    assert message.startswith(str(root / "seed.toml") + ": ")
    assert "\n" not in message
    return message.removeprefix(str(root / "seed.toml") + ": ")


def test_manifest_describes_the_seed(tmp_path: Path) -> None:
    seed = load_seed(make_seed(tmp_path))
    assert seed.name == "stats"
    assert seed.root == tmp_path.resolve()
    assert seed.files == (
        "stats/__init__.py",
        "stats/mean.py",
        "tests/__init__.py",
        "tests/test_mean.py",
    )
    assert seed.editable_paths == ("stats/*.py",)
    assert seed.editable_files == ("stats/__init__.py", "stats/mean.py")
    assert seed.test_files == ("tests/__init__.py", "tests/test_mean.py")
    assert seed.test_command[:3] == ("python", "-m", "unittest")
    assert seed.limits.max_files == 3
    assert dict(seed.policies) == {}


def test_manifest_file_itself_can_be_named(tmp_path: Path) -> None:
    assert load_seed(make_seed(tmp_path) / "seed.toml").name == "stats"


def test_default_files_skip_hidden_files_caches_symlinks_and_the_manifest(tmp_path: Path) -> None:
    manifest = MANIFEST.replace('files = ["stats/*.py", "tests/*.py"]\n', "")
    make_seed(
        tmp_path,
        manifest,
        {".env": "SECRET=1\n", ".git/config": "", "stats/__pycache__/mean.cpython-311.pyc": ""},
    )
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("not part of the seed\n")
    os.symlink(outside, tmp_path / "stats" / "linked.py")
    seed = load_seed(tmp_path)
    assert seed.files == (
        "stats/__init__.py",
        "stats/mean.py",
        "tests/__init__.py",
        "tests/test_mean.py",
    )


def test_symlink_named_as_a_file_is_refused(tmp_path: Path) -> None:
    make_seed(tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    secret.write_text("key\n")
    os.symlink(secret, tmp_path / "stats" / "leak.py")
    manifest = MANIFEST.replace('files = ["stats/*.py", "tests/*.py"]', 'files = ["stats/leak.py"]')
    assert problem(tmp_path, manifest) == (
        "line 3: files: 'stats/leak.py': is or passes through a symbolic link; "
        "seed files must be inside the seed folder"
    )


def test_a_symlink_loop_named_as_a_file_is_refused(tmp_path: Path) -> None:
    make_seed(tmp_path)
    os.symlink("loop.py", tmp_path / "stats" / "loop.py")
    manifest = MANIFEST.replace('files = ["stats/*.py", "tests/*.py"]', 'files = ["stats/loop.py"]')
    assert problem(tmp_path, manifest).startswith(
        "line 3: files: 'stats/loop.py': is or passes through a symbolic link"
    )


def test_a_file_name_with_a_control_character_is_refused(tmp_path: Path) -> None:
    # A newline or an escape sequence in a name would garble every listing that shows it.
    manifest = MANIFEST.replace('"stats/*.py", "tests/*.py"', '"**/*.py"')
    message = problem(tmp_path, manifest, {"stats/odd\nname.py": ""})
    assert message == (
        "line 3: files: 'stats/odd\\nname.py': the file name contains a control character; "
        "rename the file or leave it out of files"
    )


def test_a_pattern_matches_names_with_any_character_but_a_slash() -> None:
    assert patterns.matches("tests/odd\nname.py", "tests/**")
    assert patterns.matches("tests/odd\nname.py", "tests/*.py")


def special_manifest(root: Path, kind: str) -> Path:
    """A seed folder whose ``seed.toml`` is ``kind``: something no manifest should be."""
    root.mkdir(exist_ok=True)
    manifest = root / "seed.toml"
    if kind == "fifo":
        os.mkfifo(manifest)
    elif kind == "device":
        os.symlink("/dev/zero", manifest)
    elif kind == "huge":
        manifest.write_text(MANIFEST + f"# {'x' * 300_000}\n")
    elif kind == "deep":
        manifest.write_text(MANIFEST + "[policies.python-ast]\nallow = " + "[" * 3000 + "]" * 3000)
    else:
        manifest.write_text(MANIFEST + "[policies.python-ast]\nallow = " + "[" * 40 + "]" * 40)
    return root


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("fifo", "is not a regular file"),
        ("device", "is a symbolic link; the manifest must be a file of the seed folder"),
        ("huge", "larger than 262144 bytes"),
        ("deep", "values are nested too deeply"),
        ("nested", "values are nested too deeply"),
    ],
)
def test_a_manifest_that_is_no_small_file_is_refused_without_reading_it_all(
    tmp_path: Path, run_agent: Callable[..., AgentRun], kind: str, expected: str
) -> None:
    root = special_manifest(tmp_path / "seed", kind)

    # Through the CLI, so a manifest that blocks the reader fails the test instead of hanging it.
    shown = run_agent("seeds", "show", str(root), timeout=20)

    assert shown.returncode == 2, shown.stderr
    assert shown.stderr.strip().splitlines() == [
        f"agent: usage error: {root / 'seed.toml'}: {expected}"
    ]


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_manifest_linked_to_a_file_elsewhere_is_refused_and_nothing_of_it_shown(
    tmp_path: Path, run_agent: Callable[..., AgentRun], link: str
) -> None:
    # A link could hand the messages, and the planner, any file the caller can read.
    secret = tmp_path / "elsewhere.toml"
    secret.write_text(MANIFEST.replace("mean() divides by one too many", "SECRET-DESCRIPTION"))
    root = make_seed(tmp_path / "seed")
    (root / "seed.toml").unlink()
    if link == "symbolic":
        (root / "seed.toml").symlink_to(secret)
    else:
        os.link(secret, root / "seed.toml")

    shown = run_agent("seeds", "show", str(root), timeout=20)

    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert f"{link} link" in shown.stderr
    assert "SECRET-DESCRIPTION" not in shown.stdout + shown.stderr


def test_a_seed_folder_too_deep_or_too_large_to_walk_is_refused(tmp_path: Path) -> None:
    deep = make_seed(tmp_path / "deep")
    nested = deep.joinpath(*["d"] * 40)
    nested.mkdir(parents=True)
    (nested / "x.py").write_text("")
    with pytest.raises(ManifestError, match="folders nest more than 16 levels deep"):
        load_seed(deep)

    wide = make_seed(tmp_path / "wide")
    (wide / "data").mkdir()
    for index in range(2001):
        (wide / "data" / f"{index}.txt").write_text("")
    with pytest.raises(ManifestError, match="holds more than 2000 files and folders"):
        load_seed(wide)


def test_patterns_too_long_or_too_many_are_refused(tmp_path: Path) -> None:
    message = problem(
        tmp_path, MANIFEST.replace('tests = ["tests/**"]', 'tests = ["' + "**/" * 40 + 'x"]')
    )
    assert "more than 16 segments" in message
    many = ", ".join(f'"tests/t{index}.py"' for index in range(33))
    message = problem(tmp_path, MANIFEST.replace('tests = ["tests/**"]', f"tests = [{many}]"))
    assert "33 patterns; at most 32" in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ('editable = ["stats/*.py"]', 'editable = ["stats/*.py", "tests/*.py"]'),
            "line 5: editable: matches test files, which are never editable: "
            "tests/__init__.py, tests/test_mean.py",
        ),
        (
            ('editable = ["stats/*.py"]', 'editable = ["**/*.py"]'),
            "line 5: editable: matches test files, which are never editable: "
            "tests/__init__.py, tests/test_mean.py",
        ),
        (
            ('editable = ["stats/*.py"]', 'editable = ["stats/*.rs"]'),
            "line 5: editable: 'stats/*.rs' matches none of the seed's files",
        ),
        (
            ('editable = ["stats/*.py"]', 'editable = ["../stats/mean.py"]'),
            "line 5: editable: '../stats/mean.py': the pattern has an empty, '.' or '..' segment",
        ),
        (
            ('editable = ["stats/*.py"]', 'editable = "stats/mean.py"'),
            "line 5: editable: must be a non-empty list of non-empty strings",
        ),
        (
            ('tests = ["tests/**"]', 'tests = ["test_*.py"]'),
            "line 4: tests: 'test_*.py' matches none of the seed's files",
        ),
        (('tests = ["tests/**"]\n', ""), "missing required key 'tests'"),
        (('name = "stats"', 'name = "Stats Seed"'), "line 1: name: must be 1 to 64 of a-z"),
        (
            ('name = "stats"', 'name = "stats"\nnmae = "x"'),
            'line 2: nmae: unknown key (did you mean "name"?)',
        ),
        (
            ('name = "stats"', 'name = "stats"\ncolour = "x"'),
            "line 2: colour: unknown key (known: context, context_budget_bytes, default_prompt, ",
        ),
        (
            ('files = ["stats/*.py", "tests/*.py"]', 'files = ["stats/missing.py"]'),
            "line 3: files: 'stats/missing.py': no such file",
        ),
        (("test_command = [", "test_command = [] #"), "line 6: test_command: must be a non-empty"),
        (
            ('"-t", "."]', '"-t", ".\\u0000"]'),
            "line 6: test_command: an argument contains a NUL character",
        ),
        (
            ('name = "stats"', 'name = "stats'),
            "line 1, column 14: not valid TOML: Illegal character",
        ),
    ],
)
def test_invalid_manifest_is_rejected_with_its_line_and_problem(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    old, new = change
    assert old in MANIFEST
    message = problem(tmp_path, MANIFEST.replace(old, new, 1))
    assert message.startswith(expected), message


def test_conftest_is_a_test_file_even_when_the_manifest_does_not_say_so(tmp_path: Path) -> None:
    manifest = MANIFEST.replace('"stats/*.py", "tests/*.py"', '"**/*.py"').replace(
        'editable = ["stats/*.py"]', 'editable = ["stats/*.py", "conftest.py"]'
    )
    message = problem(tmp_path, manifest, {"conftest.py": "import pytest\n"})
    assert message == "line 5: editable: matches test files, which are never editable: conftest.py"


def test_limits_are_checked_by_name_and_type(tmp_path: Path) -> None:
    good = load_seed(make_seed(tmp_path, MANIFEST + "[limits]\nmax_files = 1\n"))
    assert good.limits.max_files == 1
    # A misspelt key is shown at its own line, with the key it most likely means.
    message = problem(tmp_path, MANIFEST + "\n[limits]\nmax_files = 1\nmax_bytes = 5\n")
    assert message == 'line 11: limits.max_bytes: unknown key (did you mean "max_total_bytes"?)'
    # A value off its bounds is shown at its own line.
    message = problem(tmp_path, MANIFEST + "\n[limits]\nmax_files = 0\nmax_total_bytes = 5\n")
    assert message == "line 10: limits.max_files: max_files = 0 is too small: it must be at least 1"


def test_policies_are_switched_on_with_their_parameters(tmp_path: Path) -> None:
    manifest = MANIFEST + '\n[policies.python-ast]\nallow = ["sys.exit"]\n'
    seed = load_seed(make_seed(tmp_path, manifest))
    assert dict(seed.policies["python-ast"]) == {"allow": ["sys.exit"]}
    active = PluginHost(entry_points=False).policies_for(seed)
    assert [p.name for p in active] == ["patch-contract", "python-ast"]


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            "[policies.no-such-policy]\n",
            "line 9: policies.no-such-policy: unknown policy 'no-such-policy'",
        ),
        (
            '[policies.python-ast]\nallow = ["json"]\n',
            "line 9: policies.python-ast: policy 'python-ast' refused its parameters: "
            "allow: 'json' is not forbidden",
        ),
        (
            "[policies.patch-contract]\nmax_files = 9\n",
            "line 9: policies.patch-contract: policy 'patch-contract' refused its parameters",
        ),
        ("[policies]\npython-ast = 1\n", "line 10: policies.python-ast: must be a table"),
    ],
)
def test_bad_policy_table_is_rejected_with_its_line(
    tmp_path: Path, table: str, expected: str
) -> None:
    message = problem(tmp_path, MANIFEST + "\n" + table)
    assert message.startswith(expected), message


def test_key_lines_skip_values_that_span_lines() -> None:
    text = textwrap.dedent(
        '''\
        description = """
        name = "not a key"
        """
        files = [
          "a.py",  # editable = ["x"]
        ]
        "quoted key" = 'x'
        [limits] # comment
        max_files = 2
        [policies."python-ast"]
        allow = ["sys.exit"]
        '''
    )
    lines = key_lines(text)
    assert ("name",) not in lines
    assert ("editable",) not in lines
    assert lines[("description",)] == 1
    assert lines[("files",)] == 4
    assert lines[("quoted key",)] == 7
    assert lines[("limits", "max_files")] == 9
    assert lines[("policies", "python-ast", "allow")] == 11


def test_seed_names_and_folders_are_told_apart() -> None:
    assert not looks_like_path("calculator")
    assert looks_like_path("./calculator")
    assert looks_like_path("seeds/stats")
    assert looks_like_path("seed.toml")


def test_editable_glob_only_lets_existing_non_test_files_through_the_contract(
    tmp_path: Path,
) -> None:
    seed = load_seed(make_seed(tmp_path))
    contract = PluginHost(entry_points=False).policy("patch-contract")

    def rules(path: str) -> list[str]:
        return [r.rule for r in contract.check(PatchPlan([PatchFile(path, FIXED)]), seed)]

    assert rules("stats/mean.py") == []
    assert rules("stats/__init__.py") == []
    assert rules("stats/*.py") == ["path-not-editable"]
    assert rules("stats/new.py") == ["path-not-editable"]
    assert rules("tests/test_mean.py") == ["path-not-editable"]
    assert rules("stats/../tests/test_mean.py") == ["path-segment", "path-not-editable"]
    assert rules("/stats/mean.py") == ["path-segment", "path-not-editable"]


def test_seed_project_refuses_an_editable_glob_that_matches_a_test() -> None:
    with pytest.raises(ValueError, match=r"editable paths match test files: test_app\.py"):
        SeedProject(
            name="app",
            description="",
            root=".",
            files=("app.py", "test_app.py"),
            editable_paths=("*.py",),
            test_command=("python", "-m", "unittest"),
            default_prompt="",
            test_paths=("test_*.py",),
        )


def test_folder_seed_runs_end_to_end(
    tmp_path: Path, run_agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    root = make_seed(tmp_path / "stats")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    fixed = write_plan({"files": [{"path": "stats/mean.py", "content": FIXED}]})
    run = run_agent("run", "--plan", str(fixed), "--seed", str(root), "--json")
    assert run.returncode == 0, run.stderr
    result = run.json()
    assert (result["seed"], result["tests_passed"]) == ("stats", True)
    assert "test_mean_of_three" in result["test_output"]
    wrong = write_plan({"files": [{"path": "stats/mean.py", "content": BUGGY + "# still off\n"}]})
    run = run_agent("run", "--plan", str(wrong), "--seed", str(root), "--json")
    assert run.returncode == 1, run.stderr
    assert run.json()["tests_passed"] is False
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_invalid_folder_seed_is_one_clear_line_and_exit_2(
    tmp_path: Path, run_agent: Callable[..., AgentRun], write_plan: Callable[[Any], Path]
) -> None:
    root = make_seed(
        tmp_path / "stats", MANIFEST.replace('editable = ["stats/*.py"]', 'editable = ["**"]')
    )
    plan = write_plan({"files": [{"path": "stats/mean.py", "content": FIXED}]})
    run = run_agent("run", "--plan", str(plan), "--seed", str(root))
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"agent: usage error: {root / 'seed.toml'}: line 5: editable: matches test files, "
        "which are never editable: tests/__init__.py, tests/test_mean.py"
    ]
    missing = run_agent("run", "--plan", str(plan), "--seed", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert "no such file (a folder seed needs a seed.toml)" in missing.stderr


def test_seeds_show_names_the_folder_and_what_may_change(
    tmp_path: Path, run_agent: Callable[..., AgentRun]
) -> None:
    root = make_seed(tmp_path / "stats")
    run = run_agent("seeds", "show", str(root), "--json")
    assert run.returncode == 0, run.stderr
    shown = json.loads(run.stdout)
    assert shown["source"] == f"folder {root.resolve()}"
    assert shown["editable_paths"] == ["stats/*.py"]
    assert shown["editable_files"] == ["stats/__init__.py", "stats/mean.py"]
    assert shown["test_files"] == ["tests/__init__.py", "tests/test_mean.py"]
    text = run_agent("seeds", "show", str(root))
    assert f"source:         folder {root.resolve()}" in text.stdout


def test_runtime_names_the_python_and_requirements_the_test_needs(tmp_path: Path) -> None:
    assert load_seed(make_seed(tmp_path)).runtime is None
    manifest = MANIFEST + '[runtime]\npython = "3.12"\nrequirements = ["pytest>=8"]\n'
    seed = load_seed(make_seed(tmp_path, manifest))
    assert seed.runtime == SeedRuntime(python="3.12", requirements=("pytest>=8",))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("python = 3.12", 'line 10: runtime.python: must be a version such as "3.12"'),
        ('python = "python3"', 'line 10: runtime.python: must be a version such as "3.12"'),
        (
            'requirements = "pytest"',
            "line 10: runtime.requirements: must be a list of non-empty strings",
        ),
        (
            'requirements = ["--index-url=http://example.invalid"]',
            "line 10: runtime.requirements: '--index-url=http://example.invalid' is an option, "
            "not a requirement",
        ),
        ('pip = ["x"]', "line 10: runtime.pip: unknown key (known: project, python, requirements)"),
    ],
)
def test_bad_runtime_is_rejected_with_its_line(tmp_path: Path, table: str, expected: str) -> None:
    assert problem(tmp_path, MANIFEST + f"\n[runtime]\n{table}\n") == expected


def test_planner_is_shown_the_files_an_editable_glob_expands_to(
    tmp_path: Path, provider: FakeProvider, run_agent: Callable[..., AgentRun]
) -> None:
    root = make_seed(tmp_path / "stats")
    provider.reply_plan(("stats/mean.py", FIXED))
    run = run_agent("run", "--seed", str(root), "--json")
    assert run.returncode == 0, run.stderr
    assert run.json()["tests_passed"] is True
    message = provider.requests[0].json()["messages"][1]["content"]
    project = json.loads(message.split("\n", 1)[1])
    assert project["editable_paths"] == ["stats/__init__.py", "stats/mean.py"]
    assert "Fix mean." in message


def test_a_manifest_full_of_escaped_quotes_is_read_in_one_pass() -> None:
    # Finding where a multi-line string ends once counted the backslashes before each
    # quote by slicing the text so far: 256 KB of \""" took over ten seconds.
    text = 'description = """' + '\\"""' * 60_000 + '"""\nname = "x"\n'

    started = time.perf_counter()
    lines = key_lines(text)

    assert time.perf_counter() - started < 2
    assert lines[("name",)] == 2


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("[limits]\nmemory_mb = " + "1" * 5000 + "\n", "an integer is outside TOML's 64-bit range"),
        (
            "[limits]\nmemory_mb = 0x" + "f" * 5000 + "\n",
            "line 10: limits.memory_mb: an integer outside TOML's 64-bit range",
        ),
        (
            "[limits]\nmemory_mb = 9223372036854775808\n",
            "line 10: limits.memory_mb: an integer outside TOML's 64-bit range",
        ),
        (
            '[policies.python-ast]\nforbid = ["a", 0x' + "f" * 17 + "]\n",
            "line 10: policies.python-ast.forbid: an integer outside TOML's 64-bit range",
        ),
    ],
    ids=["5000-digits", "hex-5000", "2-to-the-63", "in-a-list"],
)
def test_an_integer_outside_tomls_64_bit_range_is_refused_at_its_line(
    tmp_path: Path, table: str, expected: str
) -> None:
    assert problem(tmp_path, MANIFEST + "\n" + table) == expected


def test_seed_limits_refuse_an_integer_too_big_to_show() -> None:
    with pytest.raises(LimitError, match="memory_mb is an integer outside the 64-bit range"):
        SeedLimits(memory_mb=16**5000)

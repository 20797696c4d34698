"""What a planner sees of a real repository: the editable files, the context files that fit the
budget, a map of the rest, never a hidden test; and a prompt whose size is bounded and reported.

Each test builds a real git repository (a package of a few hundred modules, large files, a
file that does not parse) and a git seed folder naming it at a commit, with a private git
cache (``XDG_CACHE_HOME``).
"""

from __future__ import annotations

import json
import os
import subprocess
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import API_KEY, MODEL, AgentRun, FakeProvider

from sandboxed_coding_agent.core.model import (
    PatchFile,
    PatchPlan,
    PlannerOptions,
    PlanRequest,
    SandboxJob,
    SandboxOutcome,
    SeedProject,
)
from sandboxed_coding_agent.core.plans import context, contract, repository_map
from sandboxed_coding_agent.core.plans.context import file_cost, planner_context, sent_bytes
from sandboxed_coding_agent.core.records import planner_calls
from sandboxed_coding_agent.core.runs import orchestrator
from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.core.serialization import structure, to_json, to_jsonable
from sandboxed_coding_agent.plugins.openai_planner import OpenAICompatiblePlanner
from sandboxed_coding_agent.plugins.openai_planner.prompt import FIXED_BYTES, MAP_HEADING
from sandboxed_coding_agent.plugins.patch_contract import PatchContract

MODULES = 300
UTILS = 10
BUDGET = 20_000
#: Marks only the hidden tests hold: none may reach a planner, in any form.
HIDDEN_MARKS = ("test_secret", "secret_marker", "test_hidden", "hidden_marker")


def module_text(number: int) -> str:
    return (
        f'"""Module {number}."""\n\n\nclass Widget{number}:\n    size = {number}\n\n\n'
        f"def make_{number}():\n    return Widget{number}()\n"
    )


def util_text(number: int) -> str:
    padding = "".join(f"# padding line {line} of util {number}\n" for line in range(100))
    return f'"""Util {number}."""\n\n\ndef util_{number}(x):\n    return x + {number}\n\n{padding}'


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def commit_tree(root: Path, files: dict[str, str | bytes]) -> str:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            target.write_text(content, encoding="utf-8")
        else:
            target.write_bytes(content)
    git("init", "-q", ".", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "tree", cwd=root)
    return git("rev-parse", "HEAD", cwd=root)


@attrs.frozen
class Repository:
    path: Path
    commit: str


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Repository:
    files: dict[str, str | bytes] = {
        "README.md": "# big\n",
        "pkg/__init__.py": "",
        "pkg/sub/deep/leaf.py": "def leaf():\n    pass\n",
        "pkg/broken.py": "def broken(:\n    class NotSeen:\n",
        # Larger than the map parses: its path alone.
        "pkg/huge.py": "def huge_function():\n    pass\n" + "# " + "x" * 300_000 + "\n",
        "data/big.txt": "y" * 500_000,
        "data/blob.bin": bytes(range(256)) * 2000,
        # A hidden test of the tree itself, besides the one the seed folder adds.
        "tests/test_secret.py": "def test_secret_marker_tree():\n    assert True\n",
    }
    files.update({f"pkg/mod_{n}.py": module_text(n) for n in range(MODULES)})
    files.update({f"pkg/util_{n}.py": util_text(n) for n in range(UTILS)})
    root = tmp_path_factory.mktemp("repository")
    return Repository(root, commit_tree(root, files))


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


SeedMaker = Callable[..., SeedProject]


@pytest.fixture
def make_seed(repository: Repository, tmp_path: Path) -> SeedMaker:
    """A git seed folder for the repository, with a visible and a hidden test of its own."""
    counter = iter(range(1000))

    def make(
        *,
        editable: tuple[str, ...] = ("pkg/mod_0.py",),
        context_patterns: tuple[str, ...] = ("pkg/util*.py",),
        budget: int = BUDGET,
    ) -> SeedProject:
        folder = tmp_path / f"seed-{next(counter)}"
        (folder / "tests").mkdir(parents=True)
        (folder / "tests" / "test_visible.py").write_text(
            "import unittest\n\nfrom pkg.mod_0 import make_0\n\n\n"
            "class Visible(unittest.TestCase):\n    def test_make(self):\n"
            "        self.assertEqual(make_0().size, 0)\n"
        )
        (folder / "tests" / "test_hidden.py").write_text(
            "def test_hidden_marker_own():\n    assert True\n"
        )
        (folder / "seed.toml").write_text(
            f"""\
name = "big"
description = "a package of a few hundred modules"
editable = {json.dumps(list(editable))}
tests = ["tests/*.py"]
hidden_tests = ["tests/test_hidden.py", "tests/test_secret.py"]
test_command = ["python", "-m", "unittest", "discover", "-s", "tests", "-t", "."]
default_prompt = "fix it"
{f"context = {json.dumps(list(context_patterns))}" if context_patterns else ""}
context_budget_bytes = {budget}
[source]
git = {json.dumps(str(repository.path))}
commit = "{repository.commit}"
"""
        )
        return load_seed(folder)

    return make


def request_for(seed: SeedProject, **options: Any) -> PlanRequest:
    return orchestrator.plan_request(
        seed, seed.default_prompt, seed.read_files(), PlannerOptions(max_retries=0, **options)
    )


def map_lines(request: PlanRequest) -> list[str]:
    assert request.repository_map is not None
    return request.repository_map.splitlines()


def shown_count(seed: SeedProject) -> int:
    """How many files the map names: every one but the hidden tests."""
    return len(set(seed.files) - set(seed.hidden_files))


def names_by_path(lines: list[str]) -> dict[str, str]:
    return {path: names for path, _, names in (line.partition(": ") for line in lines)}


def assert_no_hidden_test(text: str) -> None:
    for mark in HIDDEN_MARKS:
        assert mark not in text


# --- what the request holds ---------------------------------------------------------------------


def test_request_holds_the_editable_file_then_context_files_in_order_within_the_budget(
    make_seed: SeedMaker, repository: Repository
) -> None:
    seed = make_seed()

    request = request_for(seed)

    paths = list(request.files)
    assert paths[0] == "pkg/mod_0.py"
    assert request.files["pkg/mod_0.py"] == module_text(0)
    shown = paths[1:]
    assert shown, "no context file was shown"
    # In pattern order, each whole, and the rest left out, in order too.
    assert shown + list(request.left_out) == [f"pkg/util_{n}.py" for n in range(UTILS)]
    assert all(request.files[f"pkg/util_{n}.py"] == util_text(n) for n in range(len(shown)))
    assert request.left_out, "every context file fit: the budget was not tested"
    assert request.left_out_count == len(request.left_out)
    # Files and map together, counted as they are sent, stay within the budget.
    assert request.repository_map is not None
    used = sum(file_cost(p, t) for p, t in request.files.items())
    assert used + sent_bytes(request.repository_map) <= BUDGET


def test_map_lists_every_path_and_each_python_files_top_level_names(
    make_seed: SeedMaker, repository: Repository
) -> None:
    seed = make_seed(budget=200_000)

    request = request_for(seed)

    lines = map_lines(request)
    assert lines[0].startswith(f"{shown_count(seed)} files")
    listed = {line.split(": ", 1)[0] for line in lines[1:]}
    expected = set(seed.files) - set(seed.hidden_files)
    assert listed == expected
    assert "pkg/mod_7.py: class Widget7, def make_7" in lines
    assert "pkg/util_3.py: def util_3" in lines
    assert "pkg/sub/deep/leaf.py: def leaf" in lines
    # Too large to parse, or not parsing: the path alone.
    assert "pkg/huge.py" in lines
    assert "huge_function" not in request.repository_map
    assert "pkg/broken.py" in lines
    assert "NotSeen" not in request.repository_map
    assert {"data/big.txt", "data/blob.bin"} <= set(lines)
    assert not any(line.startswith("Left out") for line in lines)
    assert request.left_out == ()


def test_map_that_does_not_fit_keeps_every_path_and_says_whose_names_it_left_out(
    make_seed: SeedMaker,
) -> None:
    seed = make_seed()
    whole = names_by_path(map_lines(request_for(make_seed(budget=200_000)))[1:])

    request = request_for(seed)

    lines = map_lines(request)
    cut = names_by_path(lines[1:-1])
    assert cut.keys() == whole.keys()  # every path
    assert cut["pkg/mod_1.py"] == "class Widget1, def make_1"  # names, in path order
    assert cut["pkg/mod_99.py"] == ""  # until they no longer fit
    assert cut["pkg/mod_0.py"] == ""  # a file shown whole needs none
    dropped = [p for p, names in whole.items() if names and not cut[p] and p not in request.files]
    named = sum(1 for names in whole.values() if names)
    assert lines[-1] == (
        f"Left out for room: the top-level classes and functions of {len(dropped)} "
        f"of the {named} Python files that have them."
    )


def test_map_that_cannot_hold_every_path_keeps_the_shallowest_and_says_how_many_it_left_out(
    make_seed: SeedMaker,
) -> None:
    seed = make_seed(budget=4_000)

    request = request_for(seed)

    lines = map_lines(request)
    assert "README.md" in lines
    assert "data/big.txt" in lines
    assert "pkg/sub/deep/leaf.py" not in lines
    # The files nearest the editable pkg/mod_0.py come first: the test that imports it
    # (with its names), then its package's other modules.
    named = [line for line in lines[1:-1] if ": " in line]
    assert named == ["tests/test_visible.py: class Visible"]
    assert "pkg/mod_1.py" in lines
    shown = len(lines) - 2
    total = shown_count(seed)
    assert lines[-1] == (
        f"Left out for room: {total - shown:,} of {total:,} paths (the most deeply nested "
        "of those away from the editable files) and the top-level names of all but the "
        "files nearest the editable ones."
    )
    assert list(request.files) == ["pkg/mod_0.py"]
    assert request.left_out_count == UTILS


def test_editable_files_over_the_budget_are_still_sent_whole_and_the_map_says_so(
    make_seed: SeedMaker,
) -> None:
    seed = make_seed(editable=("pkg/util_*.py",), context_patterns=("pkg/mod_1*.py",))

    files = seed.read_files()
    chosen = planner_context(seed, files)
    request = orchestrator.plan_request(seed, "fix it", files, context=chosen)

    assert list(request.files) == [f"pkg/util_{n}.py" for n in range(UTILS)]
    assert all(request.files[f"pkg/util_{n}.py"] == util_text(n) for n in range(UTILS))
    assert chosen.over_budget
    assert chosen.editable_bytes > BUDGET
    assert request.left_out[:3] == ("pkg/mod_1.py", "pkg/mod_10.py", "pkg/mod_100.py")
    assert request.repository_map == (
        f"Left out for room: the whole map ({shown_count(seed)} files); the editable files "
        f"alone take {chosen.editable_bytes:,} bytes of the {BUDGET:,}-byte budget.\n"
    )
    assert chosen.used_bytes <= chosen.editable_bytes + context.MAP_NOTE_BYTES
    assert "the editable files alone exceed the context budget" in chosen.describe()


@pytest.mark.parametrize("budget", [200_000, 1_000], ids=["room-for-all", "room-for-none"])
def test_hidden_tests_are_never_shown_even_when_context_patterns_name_them(
    make_seed: SeedMaker, provider: FakeProvider, tmp_path: Path, budget: int
) -> None:
    seed = make_seed(context_patterns=("tests/*.py", "pkg/util*.py"), budget=budget)
    assert set(seed.hidden_files) == {"tests/test_hidden.py", "tests/test_secret.py"}

    chosen = planner_context(seed, seed.read_files())
    request = request_for(seed)

    # Not shown, not in the map, not even named among the files left out for room.
    visible = "tests/test_visible.py"
    assert visible in (request.files if budget > BUDGET else request.left_out)
    for shown in (chosen.files, chosen.left_out, request.files, request.left_out):
        assert not set(seed.hidden_files) & set(shown)
    assert_no_hidden_test(to_json(request))
    # Nor in the prompt the provider receives.
    provider.reply_plan(("pkg/mod_0.py", module_text(0)))
    env = planner_env(provider, tmp_path)
    planner_calls.call_planner(OpenAICompatiblePlanner(environ=env), request, environ=env)
    (sent,) = provider.requests
    assert_no_hidden_test(sent.body.decode())


def test_folder_seed_without_context_patterns_is_shown_whole_as_before(tmp_path: Path) -> None:
    folder = tmp_path / "small"
    folder.mkdir()
    (folder / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "test_calc.py").write_text("from calc import add\n")
    (folder / "held_out_test.py").write_text("def test_hidden_marker(): pass\n")
    (folder / "seed.toml").write_text(
        'name = "small"\ndescription = "d"\neditable = ["calc.py"]\ntests = ["test_calc.py"]\n'
        'hidden_tests = ["held_out_test.py"]\ntest_command = ["python", "-m", "unittest"]\n'
        'default_prompt = "fix"\n'
    )
    seed = load_seed(folder)

    request = request_for(seed)

    assert dict(request.files) == {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "test_calc.py": "from calc import add\n",
    }
    assert (request.repository_map, request.left_out, request.left_out_count) == (None, (), 0)


def test_folder_seed_with_context_patterns_is_shown_in_part_with_a_map(tmp_path: Path) -> None:
    folder = tmp_path / "patterned"
    (folder / "lib").mkdir(parents=True)
    (folder / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "test_calc.py").write_text("from calc import add\n")
    (folder / "lib" / "shown.py").write_text("class Shown:\n    pass\n")
    (folder / "lib" / "unshown.py").write_text("def unshown():\n    pass\n")
    (folder / "seed.toml").write_text(
        'name = "patterned"\ndescription = "d"\neditable = ["calc.py"]\n'
        'tests = ["test_calc.py"]\ntest_command = ["python", "-m", "unittest"]\n'
        'default_prompt = "fix"\ncontext = ["lib/shown.py"]\n'
    )
    seed = load_seed(folder)

    request = request_for(seed)

    assert list(request.files) == ["calc.py", "lib/shown.py"]
    assert "lib/unshown.py: def unshown" in map_lines(request)
    assert "test_calc.py" in map_lines(request)


# --- the map is made once per commit, one file at a time ---------------------------------------


def test_map_is_made_once_per_commit_and_kept_in_the_git_cache(
    make_seed: SeedMaker, repository: Repository, private_cache: Path
) -> None:
    seed = make_seed(budget=200_000)
    said: list[str] = []

    planner_context(seed, seed.read_files(), progress=said.append)

    kept = private_cache / "sandboxed-coding-agent" / "git" / "maps" / f"{repository.commit}.txt"
    assert kept.is_file()
    assert said == [f"mapping the repository at commit {repository.commit[:12]} (once per commit)"]
    # A second run reads the kept map: a line changed there is what it shows.
    text = kept.read_text()
    kept.write_text(text.replace("pkg/mod_5.py\tclass Widget5", "pkg/mod_5.py\tclass Kept"))
    said.clear()
    again = planner_context(make_seed(budget=200_000), seed.read_files(), progress=said.append)
    assert said == []
    assert again.repository_map is not None
    assert "pkg/mod_5.py: class Kept, def make_5" in again.repository_map.splitlines()


def test_map_is_made_holding_one_file_at_a_time(tmp_path: Path) -> None:
    # 60 files of 200 KB (12 MB) that each parse: the map is made reading one at a time.
    body = '"""' + "z" * 200_000 + '"""\n\n\ndef f():\n    pass\n'
    root = tmp_path / "wide"
    root.mkdir()
    commit = commit_tree(root, {f"m{n}.py": body for n in range(60)})
    from sandboxed_coding_agent.core.seeds import git_source

    source = git_source.resolve(str(root), commit)
    git_source.materialize(source)

    tracemalloc.start()
    try:
        kept = repository_map.tree_map(source)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert kept.read_text().count("\tdef f\t\n") == 60
    assert peak < 4 * 1024 * 1024, f"{peak:,} bytes held at once"


# --- the prompt: bounded, sent, recorded and reported -------------------------------------------


def planner_env(provider: FakeProvider, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CODING_AGENT_BASE_URL": provider.base_url,
        "CODING_AGENT_MODEL": MODEL,
        "CODING_AGENT_API_KEY": API_KEY,
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }


def bound(instruction: str) -> int:
    """Budget, instruction and the prompt's fixed text: what a request body may hold."""
    return BUDGET + sent_bytes(instruction) + sent_bytes(MODEL) + FIXED_BYTES


@pytest.mark.parametrize("structured", [False, True], ids=["json-object", "json-schema"])
def test_real_planner_sends_a_prompt_within_its_bound_and_records_its_size(
    make_seed: SeedMaker, provider: FakeProvider, tmp_path: Path, structured: bool
) -> None:
    seed = make_seed()
    request = request_for(seed, structured_output=structured)
    provider.reply_plan(("pkg/mod_0.py", module_text(0)))
    env = planner_env(provider, tmp_path)

    result = planner_calls.call_planner(OpenAICompatiblePlanner(environ=env), request, environ=env)

    (sent,) = provider.requests
    assert len(sent.body) <= bound(seed.default_prompt)
    messages = sent.json()["messages"]
    user = messages[1]["content"]
    project = json.loads(user.split("\n", 1)[1].split("\n\n" + MAP_HEADING)[0])
    assert [f["path"] for f in project["files"]] == list(request.files)
    heading, _, shown_map = user.partition(MAP_HEADING)[2].partition("\n")
    assert f"{request.left_out_count} more files meant to be shown did not fit." in heading
    assert shown_map == request.repository_map
    # The size is the prompt's as sent, in the planner's record.
    prompt = sum(len(m["content"].encode()) for m in messages)
    record = planner_calls.read_record(result.planner_task_id, env)
    assert record.details["request"]["prompt_bytes"] == prompt
    assert record.details["request"]["body_bytes"] == len(sent.body)
    assert record.context == planner_calls.RequestContext(
        files=len(request.files),
        map_bytes=len(shown_map.encode()),
        left_out=request.left_out,
        left_out_count=request.left_out_count,
    )


def test_agent_logs_shows_the_prompt_size_and_the_context_files_left_out(
    make_seed: SeedMaker,
    provider: FakeProvider,
    agent_env: dict[str, str],
    run_agent: Callable[..., AgentRun],
) -> None:
    request = request_for(make_seed())
    provider.reply_plan(("pkg/mod_0.py", module_text(0)))

    result = planner_calls.call_planner(
        OpenAICompatiblePlanner(environ=agent_env), request, environ=agent_env
    )
    shown = run_agent("logs", result.planner_task_id)

    assert shown.returncode == 0, shown.stderr
    prompt = planner_calls.read_record(result.planner_task_id, agent_env).details["request"]
    assert f"(prompt {prompt['prompt_bytes']:,})" in shown.stdout
    more = request.left_out_count - 5
    assert (
        f"{request.left_out_count} context files left out: "
        f"{', '.join(request.left_out[:5])} and {more} more"
    ) in shown.stdout


class PassingRunner:
    """Answers every job at once; the verdict is not what these tests look at."""

    name = "instant"
    description = "answers at once"

    def __init__(self) -> None:
        self.jobs: list[SandboxJob] = []

    def run_test(self, job: SandboxJob) -> SandboxOutcome:
        self.jobs.append(job)
        return SandboxOutcome(runner=self.name, sandbox_id="sbx-1", exit_code=0, output="")


def test_run_reports_the_prompt_size_and_what_was_left_out(
    make_seed: SeedMaker, provider: FakeProvider, tmp_path: Path
) -> None:
    seed = make_seed()
    provider.reply_plan(("pkg/mod_0.py", module_text(0)))
    env = planner_env(provider, tmp_path)
    said: list[str] = []

    orchestrator.run(
        seed,
        runner=PassingRunner(),
        policies=[],
        planner=OpenAICompatiblePlanner(environ=env),
        planner_options=PlannerOptions(max_retries=0),
        progress=said.append,
        environ=env,
    )

    (sent,) = provider.requests
    prompt = sum(len(m["content"].encode()) for m in sent.json()["messages"])
    left_out = len(request_for(seed).left_out)
    assert f"prompt: {prompt:,} bytes; {left_out} context files left out" in said
    (described,) = [line for line in said if line.startswith("planner context:")]
    assert f"of {BUDGET:,} bytes; {left_out} context files left out" in described
    assert len(sent.body) <= bound(seed.default_prompt)


def test_remote_planner_gets_the_map_and_what_was_left_out_as_plain_data(
    make_seed: SeedMaker, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandboxed_coding_agent.plugins.lazycloud.handler import plan_patch

    request = request_for(make_seed())
    wire = json.loads(json.dumps(to_jsonable(request)))
    assert structure(wire, PlanRequest) == request
    monkeypatch.setenv("CODING_AGENT_BASE_URL", provider.base_url)
    monkeypatch.setenv("CODING_AGENT_MODEL", MODEL)
    monkeypatch.setenv("CODING_AGENT_API_KEY", API_KEY)
    provider.reply_plan(("pkg/mod_0.py", module_text(0)))

    answer = plan_patch(wire)  # the deployed function's body, as LazyCloud calls it

    assert "result" in answer, answer
    (sent,) = provider.requests
    user = sent.json()["messages"][1]["content"]
    assert request.repository_map is not None
    assert request.repository_map in user
    assert f"{request.left_out_count} more files meant to be shown" in user


# --- many editable files, few replaced ----------------------------------------------------------


def test_plan_replaces_at_most_max_files_even_when_hundreds_are_editable(
    make_seed: SeedMaker,
) -> None:
    seed = make_seed(editable=("pkg/mod_*.py",), context_patterns=())
    assert len(seed.editable_files) == MODULES
    four = PatchPlan([PatchFile(f"pkg/mod_{n}.py", module_text(n)) for n in range(4)])

    rejections = orchestrator.check_plan(four, seed, [PatchContract()])

    assert [r.rule for r in rejections] == ["file-count"]
    assert seed.limits.max_files == 3
    three = PatchPlan(four.files[:3])
    assert orchestrator.check_plan(three, seed, [PatchContract()]) == []
    assert contract.check_plan(three, editable_paths=seed.editable_files, limits=seed.limits) == []


# --- the map near the editable files -------------------------------------------------------------


def test_imports_are_read_with_relative_ones_resolved_and_a_src_folder_left_out() -> None:
    code = (
        b"import os.path\nfrom . import sibling\nfrom ..util.helpers import helper\n"
        b"from app.models import user as u\n\ndef run():\n    import json\n"
    )

    found = repository_map.read_python(code, "src/app/core/engine.py")

    assert found.names == "def run"
    assert found.imports == (
        "os.path",
        "app.core",
        "app.core.sibling",
        "app.util.helpers",
        "app.util.helpers.helper",
        "app.models",
        "app.models.user",
        "json",
    )
    assert repository_map.module_names("src/app/core/__init__.py") == ["src.app.core", "app.core"]
    assert repository_map.module_names("docs/conf-old.py") == []


def test_nearest_are_what_an_editable_file_imports_then_its_importers_then_its_package() -> None:
    entries = [
        ("src/app/cli/main.py", ("app.core.engine",)),
        ("src/app/core/engine.py", ("app.util.helpers", "app.util.helpers.helper")),
        ("src/app/core/other.py", ()),
        ("src/app/util/helpers.py", ()),
        ("src/app/bulk/far.py", ("os",)),
    ]

    near = repository_map.near_files(["src/app/core/engine.py"], entries)

    assert near == ["src/app/util/helpers.py", "src/app/cli/main.py", "src/app/core/other.py"]


def test_a_cut_map_of_a_large_repository_gives_the_names_of_the_files_near_the_editable_one(
    tmp_path: Path,
) -> None:
    files: dict[str, str | bytes] = {
        "README.md": "# app\n",
        "src/app/__init__.py": "",
        "src/app/core/__init__.py": "",
        "src/app/core/engine.py": "from ..util.helpers import helper\n\n\ndef run():\n"
        "    return helper()\n",
        "src/app/util/__init__.py": "",
        "src/app/util/helpers.py": "def helper():\n    return 1\n\n\nclass Helper:\n    pass\n",
        "src/app/cli/main.py": "from app.core.engine import run\n\n\ndef main():\n    run()\n",
    }
    files.update({f"src/app/bulk/far_{n}.py": f"def far_{n}():\n    pass\n" for n in range(600)})
    root = tmp_path / "app"
    root.mkdir()
    commit = commit_tree(root, files)
    folder = tmp_path / "seed"
    folder.mkdir()
    (folder / "test_engine.py").write_text("def test_run():\n    pass\n")
    (folder / "seed.toml").write_text(
        'name = "app"\ndescription = "a large app"\neditable = ["src/app/core/engine.py"]\n'
        'tests = ["test_engine.py"]\ntest_command = ["python", "-m", "pytest"]\n'
        'default_prompt = "fix it"\ncontext_budget_bytes = 6000\n'
        f'[source]\ngit = {json.dumps(str(root))}\ncommit = "{commit}"\n'
    )
    seed = load_seed(folder)

    lines = map_lines(request_for(seed))

    assert "src/app/util/helpers.py: def helper, class Helper" in lines
    assert "src/app/cli/main.py: def main" in lines
    assert "README.md" in lines
    assert not any(line.startswith("src/app/bulk/") and ": " in line for line in lines)
    assert lines[-1].startswith("Left out for room: ")


def test_mapping_a_repository_stops_parsing_when_its_cpu_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsing can take time that grows with the square of a file's size (nested f-strings):
    past the map's budget, files are in the map by their paths alone."""
    root = tmp_path / "slow"
    root.mkdir()
    commit = commit_tree(root, {f"m{n}.py": f"def f{n}():\n    pass\n" for n in range(5)})
    from sandboxed_coding_agent.core.seeds import git_source

    source = git_source.resolve(str(root), commit)
    monkeypatch.setattr(repository_map, "MAP_PARSE_SECONDS", 0.0)

    kept = repository_map.tree_map(source)

    lines = kept.read_text().splitlines()[1:]
    assert lines == [f"m{n}.py\t\t" for n in range(5)]

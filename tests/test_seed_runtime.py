"""A seed whose test needs pytest: its runtime is prepared once with uv and runs offline in the
sandbox.

The runtimes live under a temporary ``XDG_CACHE_HOME`` shared by this module;
uv keeps using the machine's own package cache, so installing is quick.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from conftest import wait_until

from sandboxed_coding_agent.core.errors import SandboxError
from sandboxed_coding_agent.core.model import (
    PatchFile,
    PatchPlan,
    RunResult,
    SeedProject,
    SeedRuntime,
)
from sandboxed_coding_agent.core.runs import orchestrator
from sandboxed_coding_agent.core.seeds.manifest import load_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import host_site_folders
from sandboxed_coding_agent.plugins.local_sandbox.runtime import (
    cache_root,
    installer_environment,
    prepare_runtime,
    runtime_key,
)

BROKEN = "def mean(values):\n    return sum(values) / (len(values) + 1)\n"
FIXED = "def mean(values):\n    return sum(values) / len(values)\n"
TEST = """\
import os
import sys

import pytest

from stats import mean


@pytest.mark.parametrize(("values", "expected"), [([1, 2, 3], 2), ([4], 4)])
def test_mean(values, expected):
    assert mean(values) == expected


def test_runs_in_the_prepared_runtime_and_cannot_change_it():
    assert pytest.__file__.startswith(sys.prefix)
    assert "sandboxed-coding-agent/runtimes" in sys.prefix
    with pytest.raises(OSError):
        open(os.path.join(sys.prefix, "planted"), "w")
"""
RUNTIME = SeedRuntime(requirements=("pytest",))


@pytest.fixture(scope="module")
def runtime_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private ``XDG_CACHE_HOME`` for this module's runtimes; uv keeps its own cache."""
    uv_cache = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    cache = tmp_path_factory.mktemp("xdg-cache")
    saved = {name: os.environ.get(name) for name in ("XDG_CACHE_HOME", "UV_CACHE_DIR")}
    os.environ["XDG_CACHE_HOME"] = str(cache)
    os.environ["UV_CACHE_DIR"] = uv_cache
    try:
        yield cache
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def pytest_seed(tmp_path_factory: pytest.TempPathFactory) -> SeedProject:
    root = tmp_path_factory.mktemp("stats-seed")
    (root / "stats.py").write_text(BROKEN)
    (root / "test_stats.py").write_text(TEST)
    return SeedProject(
        name="stats",
        description="mean() divides by one too many; its pytest test says so",
        root=root,
        files=("stats.py", "test_stats.py"),
        editable_paths=("stats.py",),
        test_command=("pytest", "-q", "-p", "no:cacheprovider"),
        default_prompt="Fix mean().",
        runtime=RUNTIME,
    )


def run(seed: SeedProject, content: str, progress: list[str] | None = None) -> RunResult:
    lines = progress if progress is not None else []
    return orchestrator.run(
        seed,
        runner=LocalSandbox(),
        policies=[],
        plan=PatchPlan(files=[PatchFile("stats.py", content)]),
        progress=lines.append,
    )


def test_a_pytest_seed_runs_offline_in_the_sandbox_after_one_preparation(
    runtime_cache: Path, pytest_seed: SeedProject
) -> None:
    first: list[str] = []
    second: list[str] = []

    passed = run(pytest_seed, FIXED, first)
    again = run(pytest_seed, FIXED, second)

    assert passed.tests_passed, passed.test_output
    assert "3 passed" in passed.test_output
    assert any(line.startswith("preparing the seed runtime") for line in first)
    assert any("uv:" in line and "pytest" in line for line in first)
    assert again.tests_passed
    assert not any("preparing" in line for line in second)
    root = runtime_cache / "sandboxed-coding-agent" / "runtimes" / runtime_key(RUNTIME)
    assert (root / "bin" / "pytest").exists()


def test_a_failing_pytest_seed_fails_the_run(runtime_cache: Path, pytest_seed: SeedProject) -> None:
    result = run(pytest_seed, BROKEN)

    assert not result.tests_passed
    assert result.test_exit_code == 1
    assert "2 failed, 1 passed" in result.test_output


def test_the_installer_never_sees_the_callers_secrets(
    runtime_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `uv` first on PATH that writes down its environment, then runs the real one.
    real_uv = subprocess.run(
        ["sh", "-c", "command -v uv"], capture_output=True, text=True, check=True
    ).stdout.strip()
    seen = tmp_path / "uv-environment.jsonl"
    spy = tmp_path / "bin" / "uv"
    spy.parent.mkdir()
    spy.write_text(
        "#!/bin/sh\n"
        f"python3 -c 'import json, os; print(json.dumps(dict(os.environ)))' >> {seen}\n"
        f'exec {real_uv} "$@"\n'
    )
    spy.chmod(spy.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{spy.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("CODING_AGENT_API_KEY", "sk-never-to-the-installer")
    monkeypatch.setenv("CALLER_SECRET", "also-not")

    prepare_runtime(SeedRuntime(requirements=("iniconfig",)))

    environments = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(environments) == 2  # uv venv, uv pip install
    for environment in environments:
        assert "sk-never-to-the-installer" not in json.dumps(environment)
        assert "CALLER_SECRET" not in environment
        assert environment["XDG_CACHE_HOME"] == str(runtime_cache)


def test_a_runtime_that_cannot_be_built_is_a_sandbox_error_and_leaves_nothing(
    runtime_cache: Path, pytest_seed: SeedProject
) -> None:
    impossible = SeedRuntime(requirements=("pytest>=999999",))

    with pytest.raises(SandboxError, match="could not prepare the seed runtime") as raised:
        run(attrs.evolve(pytest_seed, runtime=impossible), FIXED)

    assert "pytest>=999999" in raised.value.message
    assert not (cache_root() / runtime_key(impossible)).exists()


def test_runtimes_are_keyed_by_python_and_requirements() -> None:
    assert runtime_key(SeedRuntime(requirements=("pytest",))) == runtime_key(RUNTIME)
    assert runtime_key(SeedRuntime(requirements=("pytest", "attrs"))) != runtime_key(RUNTIME)
    assert runtime_key(SeedRuntime("3.12", ("pytest",))) != runtime_key(RUNTIME)


@pytest.mark.parametrize(
    ("python", "requirements"),
    [
        ("4", ()),
        ("3.x", ()),
        (None, ("--index-url=https://example.invalid/simple",)),
        (None, ("-e /home",)),
        (None, ("",)),
        # Anything but a name from the index: a local path or a URL uv would fetch or build.
        (None, ("evil @ file:///home/user/project",)),
        (None, ("evil @ https://example.invalid/evil-1.0-py3-none-any.whl",)),
        (None, ("/home/user/project",)),
        (None, ("./evil-1.0.tar.gz",)),
        (None, ("git+https://example.invalid/evil",)),
        (None, ("pytest --index-url https://example.invalid/simple",)),
    ],
)
def test_a_runtime_that_is_not_a_version_and_requirements_is_refused(
    python: str | None, requirements: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError, match=r"python|requirements"):
        SeedRuntime(python, requirements)


def test_the_installer_environment_keeps_only_what_an_installer_needs() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "UV_INDEX_URL": "https://index.example/simple",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
        "CODING_AGENT_API_KEY": "sk-1",
        "UV_CODING_AGENT_API_KEY": "sk-2",
        "AWS_SECRET_ACCESS_KEY": "aws",
    }

    assert installer_environment(environ) == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "UV_INDEX_URL": "https://index.example/simple",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
    }


# --- a hostile seed's runtime -------------------------------------------------------------------
#
# A seed folder someone downloaded names the requirements, and whoever published them chose
# their content: building the runtime must run none of it on the host, and the folder's own
# files must not steer the installer.


def wheel(folder: Path, name: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of ``name`` 1.0 holding ``files``."""
    dist_info = f"{name}-1.0.dist-info"
    files = {
        **files,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{path},sha256={digest(text.encode())},{len(text.encode())}"
        for path, text in files.items()
    ]
    files[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def sdist(folder: Path, name: str, backend: str) -> Path:
    """A source distribution of ``name`` 1.0 whose in-tree build backend is ``backend``."""
    members = {
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        "pyproject.toml": (
            '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        ),
        "backend.py": backend,
    }
    path = folder / f"{name}-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for member, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-1.0/{member}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of distributions that uv takes as its only source, as a user may configure it."""
    folder = tmp_path / "distributions"
    folder.mkdir()
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(folder))
    return folder


def test_building_a_runtime_runs_no_code_of_its_packages_on_the_host(
    runtime_cache: Path, local_index: Path, tmp_path: Path
) -> None:
    # A .pth file in site-packages runs whenever that environment's Python starts with its site.
    ran = tmp_path / "ran-on-the-host"
    hook = f"import os; os.makedirs({str(ran)!r}, exist_ok=True)\n"
    wheel(local_index, "sca_pth_hook", {"sca_pth_hook.pth": hook, "sca_pth_hook/__init__.py": ""})

    prepared = prepare_runtime(SeedRuntime(requirements=("sca-pth-hook",)))

    assert not ran.exists()
    assert (prepared.root / "lib").is_dir()


def test_a_runtime_is_built_from_wheels_only(
    runtime_cache: Path, local_index: Path, tmp_path: Path
) -> None:
    # Building a source distribution runs its build backend, which its author wrote.
    ran = tmp_path / "ran-on-the-host"
    sdist(local_index, "sca_sdist_only", f"import os\nos.makedirs({str(ran)!r}, exist_ok=True)\n")
    runtime = SeedRuntime(requirements=("sca-sdist-only",))

    with pytest.raises(SandboxError, match="could not prepare the seed runtime"):
        prepare_runtime(runtime)

    assert not ran.exists()
    assert not (cache_root() / runtime_key(runtime)).exists()


def test_the_installer_ignores_configuration_in_the_folder_the_agent_runs_in(
    runtime_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `cd downloaded-seed && agent run --seed .`: the seed's uv.toml must not steer uv.
    planted = tmp_path / "planted"
    seed = tmp_path / "downloaded-seed"
    seed.mkdir()
    (seed / "uv.toml").write_text(f"[pip]\ntarget = {str(planted)!r}\n")
    monkeypatch.chdir(seed)

    # A runtime no other test of this module builds, so uv really runs.
    prepared = prepare_runtime(SeedRuntime(requirements=("iniconfig>=1",)))

    assert not planted.exists()
    assert list(prepared.root.glob("lib/python*/site-packages/iniconfig/__init__.py"))


def test_a_build_killed_halfway_is_never_taken_for_a_ready_runtime(
    runtime_cache: Path, local_index: Path, tmp_path: Path
) -> None:
    # A wheel may put any file in the environment's folder: one that looks like the agent's
    # record of a finished runtime must not count, even when the agent is killed before it
    # writes its own over it.
    host_folder = tmp_path / "host-folder"
    host_folder.mkdir()
    planted = json.dumps({"python": "/bin/sh", "read_only": [str(host_folder)]})
    in_the_environment = ".sandboxed-coding-agent-runtime.json"
    modules = {f"sca_planted/m{i}.py": "value = 1\n" * 100 for i in range(1500)}
    data = {f"sca_planted-1.0.data/data/{in_the_environment}": planted}
    wheel(local_index, "sca_planted", {**modules, **data})
    runtime = SeedRuntime(requirements=("sca-planted",))
    root = cache_root() / runtime_key(runtime)
    build = subprocess.Popen([sys.executable, "-c", BUILD, "sca-planted"], start_new_session=True)
    try:
        assert wait_until(lambda: (root / in_the_environment).exists(), timeout=60)
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait()

    prepared = prepare_runtime(runtime)

    assert str(host_folder) not in prepared.read_only
    assert prepared.python == str(root / "bin" / "python")


BUILD = """
import sys
from sandboxed_coding_agent.core.model import SeedRuntime
from sandboxed_coding_agent.plugins.local_sandbox.runtime import prepare_runtime
prepare_runtime(SeedRuntime(requirements=tuple(sys.argv[1:])))
"""


def test_a_package_with_a_module_that_does_not_compile_still_installs(
    runtime_cache: Path, local_index: Path
) -> None:
    # Packages ship such modules (for other Python versions); importing them fails, not the build.
    wheel(local_index, "sca_uncompilable", {"sca_uncompilable/__init__.py": "def (\n"})

    prepared = prepare_runtime(SeedRuntime(requirements=("sca-uncompilable",)))

    assert list(prepared.root.glob("lib/python*/site-packages/sca_uncompilable/__init__.py"))


def test_a_runtime_seed_cannot_import_what_the_agents_interpreter_has_installed(
    runtime_cache: Path, pytest_seed: SeedProject
) -> None:
    folder = next((Path(f) for f in host_site_folders() if os.access(f, os.W_OK)), None)
    if folder is None:
        pytest.skip("this user may not write the interpreter's site folder to plant a package")
    name = f"sca_host_only_{os.getpid()}"
    (folder / f"{name}.py").write_text("PLANTED = True\n")
    (folder / f"{name}.pth").write_text(f"import os; os.environ['{name.upper()}'] = 'ran'\n")
    probe = (
        f"import os\nassert '{name.upper()}' not in os.environ, 'a host .pth file ran'\n"
        f"try:\n    import {name}\nexcept ImportError:\n    pass\n"
        "else:\n    raise AssertionError('a host package was imported')\n"
    )
    try:
        result = run(pytest_seed, probe + FIXED)
    finally:
        (folder / f"{name}.py").unlink()
        (folder / f"{name}.pth").unlink()

    assert result.tests_passed, result.test_output


def test_a_runtime_seeds_test_finds_the_hosts_package_folders_empty(
    runtime_cache: Path, pytest_seed: SeedProject
) -> None:
    # Folders with something in them on the host: each must list empty inside.
    folders = [f for f in host_site_folders() if os.listdir(f)]
    if not folders:
        pytest.skip("no package folder on this machine holds anything")
    probe = (
        "import os, sys\n"
        f"for folder in {folders!r}:\n"
        "    assert not os.path.isdir(folder) or not os.listdir(folder), folder\n"
        "    sys.path.append(folder)\n"
    )

    result = run(pytest_seed, probe + FIXED)

    assert result.tests_passed, result.test_output


PYTEST_HACKS = {
    "a skip": "import pytest\ndef mean(values):\n    pytest.skip('later')\n",
    "an expected failure": "import pytest\ndef mean(values):\n    pytest.xfail('later')\n",
    "pytest.exit with 0": (
        "import pytest\ndef mean(values):\n    pytest.exit('done', returncode=0)\n"
    ),
    "unittest's stop signal": (
        "from unittest import case\ndef mean(values):\n    raise case._ShouldStop\n"
    ),
    "os._exit at import": "import os\nos._exit(0)\n",
    "SystemExit at import": "raise SystemExit(0)\n",
}


@pytest.mark.parametrize("name", sorted(PYTEST_HACKS))
def test_no_reward_hack_passes_a_pytest_seed(
    name: str, runtime_cache: Path, pytest_seed: SeedProject
) -> None:
    result = run(pytest_seed, PYTEST_HACKS[name])

    assert not result.tests_passed, result.test_output
    assert result.test_report is not None
    assert result.test_report.framework == "pytest"


def test_a_pytest_seed_reports_each_test(runtime_cache: Path, pytest_seed: SeedProject) -> None:
    result = run(pytest_seed, FIXED)

    assert result.test_report is not None
    assert result.test_report.status == "complete"
    assert {test.outcome for test in result.test_report.tests} == {"passed"}
    assert len(result.test_report.tests) == 3
    assert all(test.id.startswith("test_stats.py::") for test in result.test_report.tests)


# --- the project under test in the runtime ------------------------------------------------------
#
# `[runtime] project = true`: the project's own dependencies (its pyproject.toml) are installed
# in the runtime, and its folder is on the sandbox's sys.path, so its tests import the patched
# files from the sandbox's project folder. The project itself never runs on the host.

PROJECT_DEPENDENCY = {"sca_project_dep/__init__.py": "FACTOR = 3\n"}
BROKEN_PACKAGE = (
    "from sca_project_dep import FACTOR\n\n\ndef scaled(value):\n    return value * FACTOR + 1\n"
)
FIXED_PACKAGE = (
    "from sca_project_dep import FACTOR\n\n\ndef scaled(value):\n    return value * FACTOR\n"
)
#: A project's sitecustomize.py, which site would import at start were the project folder on
#: sys.path then: before the harness.
PROJECT_SITECUSTOMIZE = "import os\nos.environ['SCA_PROJECT_SITECUSTOMIZE'] = __file__\n"
PROJECT_TEST = """\
import os
import sys
import unittest

import calc
import sca_project_dep


class ScaledTest(unittest.TestCase):
    def test_scaled_by_the_dependencys_factor(self):
        self.assertEqual(calc.scaled(2), 2 * sca_project_dep.FACTOR)

    def test_imports_the_package_from_the_sandboxs_project_folder(self):
        self.assertEqual(calc.__file__, {package!r})
        self.assertTrue(sca_project_dep.__file__.startswith(sys.prefix))

    def test_no_sitecustomize_of_the_project_ran(self):
        self.assertNotIn("SCA_PROJECT_SITECUSTOMIZE", os.environ)


if __name__ == "__main__":
    unittest.main()
"""
#: How each layout's test runs: neither puts the package's folder on sys.path itself.
LAYOUTS = {
    # unittest discovery puts tests/ and the working folder on sys.path, not src/.
    "src": ("src/calc/__init__.py", ["python", "-m", "unittest", "discover", "-s", "tests"]),
    # A script's own folder is first on sys.path, not the working folder.
    "flat": ("calc/__init__.py", ["python", "tests/test_calc.py"]),
}


def project_seed(
    folder: Path,
    layout: str,
    dependencies: tuple[str, ...] = ("sca-project-dep",),
    *,
    pyproject: str = "",
    extra: dict[str, str] | None = None,
) -> SeedProject:
    """A folder seed of a package ``calc`` in ``layout`` whose pyproject.toml names
    ``dependencies``, with ``[runtime] project = true``; loaded as the agent loads it."""
    package, command = LAYOUTS[layout]
    files = {
        package: BROKEN_PACKAGE,
        str(Path(package).parent.parent / "sitecustomize.py"): PROJECT_SITECUSTOMIZE,
        "tests/test_calc.py": PROJECT_TEST.format(package=f"/workspace/{package}"),
        "pyproject.toml": (
            f'[project]\nname = "calc"\nversion = "1.0"\ndependencies = {list(dependencies)!r}\n'
            + pyproject
        ),
        "seed.toml": (
            f'name = "calc-{layout}"\ndescription = "scaled() adds one"\n'
            f'tests = ["tests/test_calc.py"]\neditable = ["{package}"]\n'
            f"test_command = {command!r}\n"
            'default_prompt = "Fix scaled()."\n\n[runtime]\nproject = true\n'
        ),
        **(extra or {}),
    }
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return load_seed(folder)


def run_project(seed: SeedProject, layout: str, content: str) -> RunResult:
    package, _ = LAYOUTS[layout]
    return orchestrator.run(
        seed,
        runner=LocalSandbox(),
        policies=[],
        plan=PatchPlan(files=[PatchFile(package, content)]),
        progress=lambda line: None,
    )


@pytest.fixture
def project_index(local_index: Path) -> Path:
    """The local index with the project's dependency in it."""
    wheel(local_index, "sca_project_dep", PROJECT_DEPENDENCY)
    return local_index


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_projects_test_imports_its_dependency_and_its_patched_package(
    layout: str, runtime_cache: Path, project_index: Path, tmp_path: Path
) -> None:
    seed = project_seed(tmp_path / "seed", layout)

    fixed = run_project(seed, layout, FIXED_PACKAGE)
    broken = run_project(seed, layout, BROKEN_PACKAGE)

    assert seed.runtime is not None
    assert seed.runtime.project_requirements == ("sca-project-dep",)
    assert fixed.tests_passed, fixed.test_output
    assert fixed.test_report is not None
    assert len(fixed.test_report.tests) == 3
    assert not broken.tests_passed
    assert broken.test_exit_code == 1
    assert "FAILED (failures=1)" in broken.test_output, broken.test_output
    assert "test_scaled_by_the_dependencys_factor" in broken.test_output


def test_a_projects_runtime_is_keyed_by_its_dependencies(tmp_path: Path) -> None:
    def key(name: str, dependencies: tuple[str, ...]) -> str:
        seed = project_seed(tmp_path / name, "src", dependencies)
        assert seed.runtime is not None
        return runtime_key(seed.runtime)

    first = key("first", ("sca-project-dep",))

    assert key("same", ("sca-project-dep",)) == first
    assert key("pinned", ("sca-project-dep>=1",)) != first
    assert key("more", ("sca-project-dep", "iniconfig")) != first
    # Whether the project is on the path is part of the key, and so is where a package is listed.
    assert runtime_key(SeedRuntime(requirements=("sca-project-dep",))) != first
    assert runtime_key(SeedRuntime(requirements=("sca-project-dep",), project=True)) != first


def test_nothing_of_the_project_runs_on_the_host(
    runtime_cache: Path, project_index: Path, tmp_path: Path
) -> None:
    # Building or installing the project would run its build backend or its setup.py.
    ran = tmp_path / "ran-on-the-host"
    code = f"import os\nos.makedirs({str(ran)!r}, exist_ok=True)\n"
    backend = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    seed = project_seed(
        tmp_path / "seed",
        "src",
        pyproject=backend,
        extra={"backend.py": code, "setup.py": code},
    )

    result = run_project(seed, "src", FIXED_PACKAGE)

    assert result.tests_passed, result.test_output
    assert not ran.exists()


#: A test that reads the project's metadata and loads its plugin through its entry point.
METADATA_TEST = """\
import importlib.metadata
import unittest


class MetadataTest(unittest.TestCase):
    def test_the_projects_version_is_its_own(self):
        self.assertEqual(importlib.metadata.version("calc"), "1.0")

    def test_its_plugin_loads_through_its_entry_point(self):
        (point,) = importlib.metadata.entry_points(group="calc.plugins")
        self.assertEqual(point.load()(2), 6)

    def test_its_requirements_are_in_its_metadata(self):
        self.assertEqual(importlib.metadata.requires("calc"), ["sca-project-dep"])
"""
#: The same project declared each way a project may be: none of it is ever run on the host.
DECLARATIONS = {
    "pyproject.toml": {
        "pyproject.toml": (
            '[project]\nname = "calc"\nversion = "1.0"\ndependencies = ["sca-project-dep"]\n'
            '[project.entry-points."calc.plugins"]\nscaled = "calc:scaled"\n'
        ),
    },
    "setup.cfg": {
        "setup.cfg": (
            "[metadata]\nname = calc\nversion = 1.0\n\n[options]\n"
            "install_requires =\n    sca-project-dep\n\n"
            "[options.entry_points]\ncalc.plugins =\n    scaled = calc:scaled\n"
        ),
        "setup.py": "import os\nos.makedirs({ran!r})\nfrom setuptools import setup\nsetup()\n",
    },
    "setup.py": {
        "setup.py": (
            "import os\nos.makedirs({ran!r})\nfrom setuptools import setup\n"
            "REQUIRES = ['sca-project-dep']\n"
            "setup(name='calc', version='1.0', install_requires=REQUIRES,"
            " package_dir={{'': 'src'}},"
            " entry_points={{'calc.plugins': ['scaled = calc:scaled']}})\n"
        ),
    },
}


@pytest.mark.parametrize("declared_in", sorted(DECLARATIONS))
def test_a_projects_metadata_and_entry_points_are_installed_as_an_editable_install_leaves_them(
    declared_in: str, runtime_cache: Path, project_index: Path, tmp_path: Path
) -> None:
    ran = tmp_path / "ran-on-the-host"
    folder = tmp_path / "seed"
    package = "src/calc/__init__.py"
    files = {
        package: BROKEN_PACKAGE,
        "tests/test_metadata.py": METADATA_TEST,
        "seed.toml": (
            'name = "calc-metadata"\ndescription = "scaled() adds one"\n'
            f'tests = ["tests/test_metadata.py"]\neditable = ["{package}"]\n'
            'test_command = ["python", "-m", "unittest", "discover", "-s", "tests"]\n'
            'default_prompt = "Fix scaled()."\n\n[runtime]\nproject = true\n'
        ),
        **{path: text.format(ran=str(ran)) for path, text in DECLARATIONS[declared_in].items()},
    }
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    seed = load_seed(folder)

    fixed = run_project(seed, "src", FIXED_PACKAGE)
    broken = run_project(seed, "src", BROKEN_PACKAGE)

    assert seed.runtime is not None
    assert seed.runtime.project_metadata is not None
    assert seed.runtime.project_metadata.source == declared_in
    assert seed.runtime.project_requirements == ("sca-project-dep",)
    assert fixed.tests_passed, fixed.test_output
    assert not broken.tests_passed
    assert "test_its_plugin_loads_through_its_entry_point" in broken.test_output
    assert not ran.exists()


def test_a_project_named_as_one_of_its_requirements_is_told_so(
    runtime_cache: Path, project_index: Path, tmp_path: Path
) -> None:
    seed = project_seed(
        tmp_path / "seed",
        "src",
        extra={
            "pyproject.toml": (
                '[project]\nname = "sca_project_dep"\nversion = "1.0"\n'
                'dependencies = ["sca-project-dep"]\n'
            )
        },
    )

    with pytest.raises(SandboxError, match=r"named sca_project_dep 1\.0, as a requirement"):
        run_project(seed, "src", FIXED_PACKAGE)

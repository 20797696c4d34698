"""A seed without a runtime sees the interpreter's standard library, nothing installed beside it.

The agent's own interpreter may have packages installed globally (and ``.pth``
files that run at every start). A sandbox result must not depend on them: the
same seed and plan must pass or fail alike on every machine.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from conftest import AgentRun

from sandboxed_coding_agent.core.model import SandboxJob, SandboxOutcome
from sandboxed_coding_agent.plugins.calculator_seed import calculator_seed
from sandboxed_coding_agent.plugins.local_sandbox import LocalSandbox
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import host_site_folders

CORRECT_ADD = "\n\ndef add(left, right):\n    return left + right\n"


def run_in_process(body: str) -> SandboxOutcome:
    seed = calculator_seed()
    files = seed.read_files()
    files["calculator.py"] = (body + CORRECT_ADD).encode()
    job = SandboxJob(
        seed=seed.name,
        files=files,
        test_command=seed.test_command,
        limits=attrs.evolve(seed.limits, test_timeout_seconds=30),
    )
    return LocalSandbox().run_test(job)


def writable_site_folder() -> Path | None:
    return next((Path(f) for f in host_site_folders() if os.access(f, os.W_OK)), None)


@pytest.fixture
def planted() -> Iterator[tuple[str, str]]:
    """A module and a ``.pth`` file planted in the agent's interpreter's global site folder.

    The ``.pth`` file sets a variable in every Python that starts with that
    folder on its path; the module can be imported only from there.
    """
    folder = writable_site_folder()
    if folder is None:
        pytest.skip("this user may not write the interpreter's site folder to plant a package")
    name = f"sca_host_only_{uuid.uuid4().hex[:12]}"
    module = folder / f"{name}.py"
    pth = folder / f"{name}.pth"
    module.write_text("PLANTED = True\n")
    pth.write_text(f"import os; os.environ['{name.upper()}'] = 'ran'\n")
    try:
        yield name, name.upper()
    finally:
        module.unlink(missing_ok=True)
        pth.unlink(missing_ok=True)


def test_a_package_installed_only_in_the_agents_interpreter_cannot_be_imported(
    planted: tuple[str, str],
) -> None:
    module, _ = planted

    outcome = run_in_process(
        f"try:\n    import {module}\n    print('IMPORTED')\n"
        "except ImportError as error:\n    print('REFUSED', type(error).__name__)\n"
    )

    assert outcome.tests_passed, outcome.output
    assert "REFUSED ModuleNotFoundError" in outcome.output
    assert "IMPORTED" not in outcome.output


def test_a_pth_file_of_the_agents_interpreter_does_not_run_in_the_sandbox(
    planted: tuple[str, str],
) -> None:
    _, variable = planted

    outcome = run_in_process(f"import os\nprint('PTH', os.environ.get('{variable}'))\n")

    assert outcome.tests_passed, outcome.output
    assert "PTH None" in outcome.output


def test_whatever_the_interpreter_has_installed_a_stdlib_seed_sees_none_of_it() -> None:
    # Every top-level name of the interpreter's site folders, planted or not, is absent.
    names = sorted(
        {
            entry.name.removesuffix(".py")
            for folder in host_site_folders()
            for entry in Path(folder).iterdir()
            if entry.name.removesuffix(".py").isidentifier() and entry.name != "__pycache__"
        }
    )
    if not names:
        pytest.skip("the interpreter has nothing installed in its site folders")

    outcome = run_in_process(
        "import importlib.util, sys\n"
        f"found = [n for n in {names!r} if n not in sys.stdlib_module_names"
        " and importlib.util.find_spec(n) is not None]\n"
        "print('FOUND', found)\n"
    )

    assert outcome.tests_passed, outcome.output
    assert "FOUND []" in outcome.output


def test_a_subprocess_of_the_test_sees_the_standard_library_only_too() -> None:
    folders = host_site_folders()

    child = f"import os; print('SEEN', [os.listdir(f) for f in {folders!r} if os.path.isdir(f)])"

    outcome = run_in_process(
        "import subprocess, sys\n"
        f"print(subprocess.run([sys.executable, '-c', {child!r}], capture_output=True,"
        " text=True).stdout)\n"
    )

    assert outcome.tests_passed, outcome.output
    seen = next(line for line in outcome.output.splitlines() if line.startswith("SEEN"))
    assert seen == f"SEEN {[[] for _ in folders]}"


def test_doctor_lists_nothing_a_stdlib_seed_could_import_beyond_the_standard_library(
    run_agent: Callable[..., AgentRun],
) -> None:
    run = run_agent("doctor", "--json")

    finding = next(f for f in run.json()["findings"] if f["item"] == "stdlib seeds")
    assert finding["ok"] is True, finding
    assert finding["detail"].endswith("the standard library and its own files only")


def test_a_test_that_adds_the_systems_package_folders_to_its_path_finds_them_empty() -> None:
    system = [str(f) for f in Path("/usr").glob("lib/python3*/dist-packages")]
    system += [str(f) for f in Path("/usr").glob("local/lib/python3*/*-packages")]
    if not system:
        pytest.skip("this system keeps no Python packages under /usr")

    outcome = run_in_process(
        f"import os\nprint('SYSTEM', [os.listdir(f) for f in {sorted(system)!r}])\n"
    )

    assert outcome.tests_passed, outcome.output
    assert f"SYSTEM {[[] for _ in system]}" in outcome.output

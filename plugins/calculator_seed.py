"""The built-in calculator seed: ``add`` is deliberately broken, its test says so."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import SeedProject
from sandboxed_coding_agent.core.verdicts.output_tests import OutputTest


def calculator_seed() -> SeedProject:
    # The package's folder, found without importlib.resources (slow to import for a path).
    spec = importlib.util.find_spec("sandboxed_coding_agent.seed_projects")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    root = Path(next(iter(spec.submodule_search_locations)), "calculator")
    return SeedProject(
        name="calculator",
        description="A one-function calculator whose add() subtracts; its unittest expects 5.",
        root=root,
        files=("calculator.py", "check_calculator.py"),
        editable_paths=("calculator.py",),
        test_paths=("check_calculator.py",),
        test_command=("python", "-m", "unittest", "-v", "check_calculator"),
        default_prompt="Fix calculator.add so the test passes. Change only calculator.py.",
        # Compared by the agent outside the sandbox: a value that claims to equal
        # everything passes no assertEqual here, and the hidden one's value never enters it.
        output_tests=(
            OutputTest(name="add-2-3", call="calculator:add", args="[2, 3]", expect="5"),
            OutputTest(
                name="add-hidden", hidden=True, call="calculator:add", args="[-7, 19]", expect="12"
            ),
        ),
    )


@hookimpl
def register_seeds(register: Callable[[SeedProject], None]) -> None:
    register(calculator_seed())

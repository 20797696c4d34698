"""The hooks of the agent-policy-example plugin: one seed project and one policy.

The agent imports this module through the entry point in ``pyproject.toml``
and calls each function marked with ``hookimpl`` once, with a ``register``
callback to call for every thing the plugin adds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import SeedProject
from sandboxed_coding_agent.core.protocols import PatchPolicy
from sandboxed_coding_agent.core.seeds.manifest import load_seed

from .small_diff import SmallDiff

SEEDS = Path(__file__).parent / "seeds"


@hookimpl
def register_seeds(register: Callable[[SeedProject], None]) -> None:
    # The seed is a folder with a seed.toml, shipped as package data.
    register(load_seed(SEEDS / "roman"))


@hookimpl
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    register(SmallDiff())

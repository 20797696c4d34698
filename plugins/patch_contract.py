"""The patch contract as a policy, so the orchestrator checks every plan again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from sandboxed_coding_agent.core.errors import Rejection
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import PatchPlan, SeedLimits, SeedProject
from sandboxed_coding_agent.core.plans import contract
from sandboxed_coding_agent.core.protocols import PatchPolicy


@attrs.frozen
class PatchContract:
    """Paths, file count, size and text rules every plan must keep (see ``core.plans.contract``)."""

    name: str = contract.POLICY
    description: str = contract.describe(SeedLimits()) + " unless the seed's [limits] say otherwise"
    # Nothing may switch the contract off: every other rule relies on it.
    activation: str = "always"

    def configure(self, parameters: Mapping[str, Any]) -> PatchContract:
        raise ValueError("the patch contract takes no parameters; set the seed's limits instead")

    def check(self, plan: PatchPlan, seed: SeedProject) -> list[Rejection]:
        compared = [entry.path for entry in plan.files if contract.needs_original(entry.path)]
        return contract.check_plan(
            plan,
            editable_paths=seed.editable_files,
            limits=seed.limits,
            allow=seed.guard_allow,
            originals=seed.read_tree_files(compared) if compared else {},
        )


@hookimpl
def register_policies(register: Callable[[PatchPolicy], None]) -> None:
    register(PatchContract())

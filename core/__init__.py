"""sandboxed-coding-agent's core: the host, the data model and what every plugin relies on.

The modules here are what a plugin codes against: ``errors``, ``model`` and
``serialization`` (the data every part exchanges), ``hookspecs``, ``protocols``,
``plugins``, ``testing``, ``commands`` and ``output`` (the plugin host and its helpers),
and ``provider`` (the OpenAI-compatible provider's settings). The rest is in packages,
one concern each, from the bottom up: ``seeds``, ``plans``, ``verdicts``, ``records``,
``runs``, ``batches``, then ``swebench``, ``report`` and ``cli``; ``harness`` is what
runs inside the sandbox; ``api`` holds the modules of the package ``sandboxed_coding_agent``
itself (the Python API), which nothing here imports. CONTRIBUTING.md has the map.

Modules that were directly in ``core/`` before it was split keep their import paths
(``sandboxed_coding_agent.core.contract`` is ``sandboxed_coding_agent.core.plans.contract``,
the same module): :data:`MOVED` says where each lives now.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: The distribution's version, as pyproject.toml states it (a test keeps them equal): read
#: here rather than through importlib.metadata, whose import alone costs the CLI's start
#: more than any command's own work.
__version__ = "0.1.0"

#: Where each module that was directly in ``core/`` lives now, relative to this package.
#: ``core.seeds`` and ``core.records`` became packages that still hold their old names.
MOVED = {
    "batch": "batches.batch",
    "batch_environment": "batches.environment",
    "batch_results": "batches.results",
    "batch_tasks": "batches.tasks",
    "budget": "plans.budget",
    "context": "plans.context",
    "contract": "plans.contract",
    "diffs": "plans.diffs",
    "doctor": "runs.doctor",
    "edit_text": "plans.edit_text",
    "edits": "plans.edits",
    "events": "runs.events",
    "evidence": "verdicts.evidence",
    "git_command": "seeds.git_command",
    "git_fetch": "seeds.git_fetch",
    "git_source": "seeds.git_source",
    "git_tree": "seeds.git_tree",
    "grading": "verdicts.grading",
    "manifest": "seeds.manifest",
    "manifest_errors": "seeds.manifest_errors",
    "manifest_reader": "seeds.manifest_reader",
    "orchestrator": "runs.orchestrator",
    "output_tests": "verdicts.output_tests",
    "patterns": "seeds.patterns",
    "plan_requests": "plans.plan_requests",
    "planning": "plans.planning",
    "policy_checks": "plans.policy_checks",
    "policy_parameters": "plans.policy_parameters",
    "project_metadata": "seeds.project_metadata",
    "record_text": "records.planner_call_text",
    "replay": "runs.replay",
    "repository_map": "plans.repository_map",
    "retention": "records.retention",
    "run_history": "records.run_history",
    "run_record_files": "records.run_record_files",
    "run_record_layout": "records.run_record_layout",
    "run_recording": "runs.recording",
    "run_records": "records.run_records",
    "search": "runs.attempts",
    "seed_files": "seeds.seed_files",
    "seed_folder": "seeds.seed_folder",
    "seed_runtime": "seeds.runtime",
    "shards": "batches.shards",
    "task_pool": "runs.task_pool",
    "trusted_tests": "verdicts.trusted_tests",
    "udiff": "plans.udiff",
    "verdict": "verdicts.verdict",
}


class _MovedModules:
    """Finds a module by its old name and hands back the module itself, under its new one.

    A meta path finder: ``import sandboxed_coding_agent.core.contract`` (or ``from ... import
    contract``) gets the very module object ``core.plans.contract`` is, so a plugin that
    patches or compares it sees one module, not two copies.
    """

    prefix = __name__ + "."

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if not name.startswith(self.prefix) or name[len(self.prefix) :] not in MOVED:
            return None
        # Duck-typed as a loader: importlib.abc would cost the CLI's start its import.
        return ModuleSpec(name, cast("Loader", self))

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        # The import system takes what sys.modules holds under the name once this returns.
        moved = MOVED[module.__name__[len(self.prefix) :]]
        sys.modules[module.__name__] = importlib.import_module(f"{__name__}.{moved}")


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())

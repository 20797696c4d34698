"""Seeds: what a seed project is, and every way one is read, fetched and prepared.

Holds the seed itself (:mod:`.project`: :class:`SeedProject`, its limits and runtime),
folder seeds and their ``seed.toml`` (:mod:`.manifest`, :mod:`.manifest_reader`,
:mod:`.manifest_errors`, :mod:`.seed_folder`, :mod:`.seed_files`, :mod:`.patterns`),
git seeds (:mod:`.git_source`, :mod:`.git_fetch`, :mod:`.git_tree`, :mod:`.git_command`),
what a Python project says about itself (:mod:`.project_metadata`) and the runtimes made
for seeds (:mod:`.runtime`).

May import: ``core.errors``, ``core.model``, ``core.serialization``, ``core.protocols``,
and of the packages ``verdicts`` (the evidence and output-test declarations a seed holds)
and ``plans`` (the contract's bounds and the policies' parameters a manifest sets);
nothing of ``runs`` or above.

The names of :mod:`.project` are here too, where they were before ``core`` had packages.
"""

from .project import ALWAYS_TEST_PATHS as ALWAYS_TEST_PATHS
from .project import LIMIT_CEILINGS as LIMIT_CEILINGS
from .project import TEST_INFRASTRUCTURE as TEST_INFRASTRUCTURE
from .project import LimitError as LimitError
from .project import SeedLimits as SeedLimits
from .project import SeedProject as SeedProject
from .project import SeedRuntime as SeedRuntime

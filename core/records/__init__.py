"""Records: what is kept of every run and planner call, so a run can be read and re-tested.

Holds the planner-call records (:mod:`.planner_calls`, shown by :mod:`.planner_call_text`),
the run records (:mod:`.run_records`: the classes in :mod:`.run_record_layout`, the files in
:mod:`.run_record_files`), past runs
(:mod:`.run_history`), how long records are kept (:mod:`.retention`) and how a run's
change is written into a folder (:mod:`.applying`).

May import: ``core.errors``, ``core.model``, ``core.serialization``, ``core.protocols``,
``core.plugins``, ``core.provider``, and the packages ``seeds``, ``plans`` and ``verdicts``;
nothing of ``runs`` or above.

The names of :mod:`.planner_calls` are here too, where they were before ``core`` had
packages.
"""

from .planner_calls import MAX_EXCERPT_CHARS as MAX_EXCERPT_CHARS
from .planner_calls import PlannerRecord as PlannerRecord
from .planner_calls import ProviderAttempt as ProviderAttempt
from .planner_calls import ProviderRequestInfo as ProviderRequestInfo
from .planner_calls import RequestContext as RequestContext
from .planner_calls import UnreadableRecord as UnreadableRecord
from .planner_calls import call_planner as call_planner
from .planner_calls import excerpt as excerpt
from .planner_calls import provider_details as provider_details
from .planner_calls import read_record as read_record
from .planner_calls import reported_request as reported_request
from .planner_calls import write_record as write_record

"""Plans: what a planner is asked and shown, what it may answer, and how an answer is checked.

Holds the plan and planner-call types (:mod:`.planning`), the request and feedback a planner
is sent (:mod:`.plan_requests`), what it is shown of a seed (:mod:`.context`,
:mod:`.repository_map`), the patch contract (:mod:`.contract`), the edit formats and diffs
(:mod:`.edits`, :mod:`.udiff`, :mod:`.edit_text`, :mod:`.diffs`) and the policies' checks and
parameters (:mod:`.policy_checks`, :mod:`.policy_parameters`).

May import: ``core.errors``, ``core.model``, ``core.serialization``, ``core.protocols``, and
the packages ``seeds`` (a plan is bounded by its seed) and ``records`` (each planner call
is recorded); nothing of ``runs`` or above.
"""

"""Batches: many runs from a file of tasks, one results line each.

Holds the batch run (:mod:`.batch`), its tasks file (:mod:`.tasks`), its results file
(:mod:`.results`), where and how it ran (:mod:`.environment`), shards of a tasks file
for several machines (:mod:`.shards`), and a batch run on the nodes of a Ray cluster
(:mod:`.on_ray`), its seed folders sent there by content (:mod:`.seed_bundles`).

May import everything below it: ``core``'s modules and the packages ``seeds``, ``plans``,
``verdicts``, ``records`` and ``runs``.
"""

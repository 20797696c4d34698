"""Batches: many runs from a file of tasks, one results line each.

Holds the batch run (:mod:`.batch`), its tasks file (:mod:`.tasks`), its results file
(:mod:`.results`), where and how it ran (:mod:`.environment`) and shards of a tasks file
for several machines (:mod:`.shards`).

May import everything below it: ``core``'s modules and the packages ``seeds``, ``plans``,
``verdicts``, ``records`` and ``runs``.
"""

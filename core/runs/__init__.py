"""Runs: one run from plan to verdict, and what it may spend.

Holds the run itself (:mod:`.orchestrator`), its candidates and attempts
(:mod:`.attempts`), budgets (:mod:`.budget`), the events it reports (:mod:`.events`),
the pool that runs several things at once (:mod:`.task_pool`), replay of a recorded run
(:mod:`.replay`) and whether this machine can run at all (:mod:`.doctor`).

May import everything below it: ``core``'s modules and the packages ``seeds``, ``plans``,
``verdicts`` and ``records``.
"""

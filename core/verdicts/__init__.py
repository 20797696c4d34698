"""Verdicts: what a test run proved, and on what evidence.

Holds the evidence the harness reports (:mod:`.evidence`), the harness set up for a sandbox
and its signed report read back (:mod:`.verdict`), grading test by test (:mod:`.grading`),
output tests compared outside the sandbox (:mod:`.output_tests`) and the trusted list of
tests a verdict needs (:mod:`.trusted_tests`). What runs inside the sandbox is
``core.harness``.

May import: ``core.errors``, ``core.model``, ``core.serialization``, ``core.protocols``,
``core.harness``, and the packages ``seeds`` and ``records`` (the trusted list is cached
beside the records); nothing of ``runs`` or above.
"""

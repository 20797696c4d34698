"""``agent doctor``: whether this machine has what a run needs, each item OK or how to fix it.

Plugins add checks through the ``register_checks`` hook: the local sandbox
checks bwrap, the namespaces, the limits it can enforce and uv; the
OpenAI-compatible planner checks its variables; the LazyCloud backend checks
that its pinned client imports. A check runs for real (it
starts a sandbox rather than read a configuration file) and must never show a
secret.

``agent doctor`` exits 0 when every *required* item is OK and
:data:`EXIT_NOT_READY` otherwise; an item that is not required (a limit this
machine cannot enforce, uv for seeds that declare a runtime) is a warning.
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Finding
from .protocols import Check

#: ``agent doctor``'s exit code when a required item is not OK (that of a configuration error).
EXIT_NOT_READY = 2


#: Checks of the agent's own installation, run before the plugins' checks.
INSTALLATION_CHECKS: tuple[Check, ...] = ()


def run_checks(checks: Iterable[tuple[str, Check]]) -> list[Finding]:
    """Run every check, in order; a check that fails to run is a failed item naming its plugin.

    :param checks: (plugin name, check) pairs.
    """
    findings: list[Finding] = []
    for plugin, check in checks:
        try:
            findings.extend(check.run())
        except Exception as error:  # a broken check must not hide the others
            findings.append(
                Finding(
                    check.name,
                    ok=False,
                    detail=f"the check failed: {type(error).__name__}: {error}",
                    fix=f"report this to the authors of plugin {plugin!r}",
                )
            )
    return findings


def ready(findings: Iterable[Finding]) -> bool:
    """Whether every required item is OK."""
    return all(f.ok or not f.required for f in findings)

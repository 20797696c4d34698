"""``agent doctor``: whether this machine has what a run needs, each item OK or how to fix it.

Plugins add checks through the ``register_checks`` hook: the local sandbox
checks bwrap, the namespaces, the limits it can enforce and uv; the
OpenAI-compatible planner checks its variables; the LazyCloud backend checks
that its pinned client imports. A check runs for real (it
starts a sandbox rather than read a configuration file) and must never show a
secret.

A run uses one planner (or none, with ``--plan FILE``) and one runner, which
:class:`~sandboxed_coding_agent.core.protocols.DoctorContext` names. The checks
of a plugin that registers planners or runners, none of them in use, still run,
but what they find wrong is information: a user of another planner is not told
to set this one up.

``agent doctor`` exits 0 when every *required* item is OK and
:data:`EXIT_NOT_READY` otherwise; an item that is not required (a limit this
machine cannot enforce, uv for seeds that declare a runtime, a planner not in
use) is a warning. Unless ``--planner`` names it, the default planner's items are
warnings too (:func:`for_model_runs`): a machine without a provider is ready for plan
files, and is told what model runs need.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import attrs

from ..model import Finding
from ..protocols import Check, DoctorContext

if TYPE_CHECKING:
    from ..plugins import PluginHost

#: ``agent doctor``'s exit code when a required item is not OK (that of a configuration error).
EXIT_NOT_READY = 2


#: Checks of the agent's own installation, run before the plugins' checks.
INSTALLATION_CHECKS: tuple[Check, ...] = ()


def run_checks(
    checks: Iterable[tuple[str, Check]],
    context: DoctorContext | None = None,
    *,
    not_in_use: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Run every check, in order; a check that fails to run is a failed item naming its plugin.

    :param checks: (plugin name, check) pairs.
    :param context: given to each check whose ``run`` takes a ``context`` parameter.
    :param not_in_use: plugins whose planners and runners are all out of use, each
        with what they are (:func:`plugins_not_in_use`): their checks' problems are
        information, not required.
    """
    findings: list[Finding] = []
    for plugin, check in checks:
        try:
            found = list(_run(check, context))
        except Exception as error:  # a broken check must not hide the others
            found = [
                Finding(
                    check.name,
                    ok=False,
                    detail=f"the check failed: {type(error).__name__}: {error}",
                    fix=f"report this to the authors of plugin {plugin!r}",
                )
            ]
        unused = (not_in_use or {}).get(plugin)
        if unused is not None:
            found = [_information(finding, unused) for finding in found]
        findings.extend(found)
    return findings


def plugins_not_in_use(host: PluginHost, context: DoctorContext) -> dict[str, str]:
    """The plugins that register planners or runners, none of them the one ``context``
    names, each with what it registers (``planner 'openai'``)."""
    provides: dict[str, list[str]] = {}
    in_use: set[str] = set()
    for kind, registry, chosen in (
        ("planner", host.planners, context.planner),
        ("runner", host.runners, context.runner),
    ):
        for name, registered in registry.items():
            provides.setdefault(registered.plugin, []).append(f"{kind} {name!r}")
            if name == chosen:
                in_use.add(registered.plugin)
    return {
        plugin: " and ".join(things) for plugin, things in provides.items() if plugin not in in_use
    }


def planner_plugin(host: PluginHost, context: DoctorContext) -> str | None:
    """The plugin of the planner ``context`` names, unless it also registers the runner in
    use (its items could not then be told apart) or no planner is in use."""
    if context.planner is None or context.planner not in host.planners:
        return None
    plugin = host.planners[context.planner].plugin
    runner = host.runners.get(context.runner)
    return None if runner is not None and runner.plugin == plugin else plugin


def for_model_runs(finding: Finding, planner: str) -> Finding:
    """``finding`` of the default planner, which only runs that ask a model need: a problem
    is a warning, since plan files (``agent run --plan``) run without it."""
    if finding.ok:
        return finding
    return attrs.evolve(
        finding,
        required=False,
        detail=f"{finding.detail} (needed for model runs with planner {planner!r}, "
        "not for plan files)",
    )


def _run(check: Check, context: DoctorContext | None) -> Iterable[Finding]:
    if context is not None and _takes_context(check):
        return check.run(context=context)  # type: ignore[call-arg]
    return check.run()


def _takes_context(check: Check) -> bool:
    try:
        return "context" in inspect.signature(check.run).parameters
    except (TypeError, ValueError):  # no signature to read: called the documented way
        return False


def _information(finding: Finding, unused: str) -> Finding:
    if finding.ok:
        return finding
    return attrs.evolve(
        finding, required=False, detail=f"{finding.detail} (not needed: {unused} not in use)"
    )


def ready(findings: Iterable[Finding]) -> bool:
    """Whether every required item is OK."""
    return all(f.ok or not f.required for f in findings)

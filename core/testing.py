"""Testing a plugin: load it as the agent does, then ask its policies, seeds, planners and runners.

For the tests of an extension author, with any test runner: load the plugin's
module (or its installed distribution), check that it loaded without a
problem, then check plans against its policies and run its seeds' tests
through a runner, exactly as ``agent validate`` and ``agent run --plan`` would::

    import agent_policy_example
    from sandboxed_coding_agent.core.testing import load_plugin, patch

    plugin = load_plugin(agent_policy_example)          # raises if it did not load cleanly
    seed = plugin.seed("roman")
    rewrite = patch(("roman.py", "def to_roman(number):\\n    pass\\n" * 6))

    rejections = plugin.check_plan(rewrite, seed)        # every policy that applies to the seed
    assert [r.rule for r in rejections] == ["too-many-lines"]

    result = plugin.run_plan(seed, patch(("roman.py", fixed_text)))
    assert result.tests_passed

The plugin is loaded beside the built-in plugins (so the calculator seed, the
patch contract and the local sandbox are there, as for a user) and nothing else
installed, so a test sees exactly its plugin. Everything goes through the
agent's own plugin host; nothing is imitated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import metadata
from types import ModuleType
from typing import Any

from .errors import Rejection
from .model import PatchFile, PatchPlan, RunResult, SeedLimits, SeedProject
from .plugins import ENTRY_POINT_GROUP, PluginHost
from .protocols import Check, PatchPolicy, Planner, Runner
from .runs import orchestrator
from .seeds import manifest

__all__ = [
    "LoadedPlugin",
    "PluginProblem",
    "check_sessions",
    "load_distribution",
    "load_plugin",
    "patch",
]


class PluginProblem(AssertionError):
    """The plugin did not load cleanly; the message has every line the agent would print."""


def load_plugin(
    plugin: ModuleType | object, *, name: str | None = None, strict: bool = True
) -> LoadedPlugin:
    """Load ``plugin`` (the module with the hook implementations) as the agent would.

    :param plugin: the module an entry point would name (or any object with hook
        functions).
    :param name: the plugin's name, as an entry point would give it; the module's
        name by default.
    :param strict: raise :class:`PluginProblem` when the agent reports a problem
        (a misspelt hook, an object that does not fit, a hook that raises); with
        ``False``, read them from :attr:`LoadedPlugin.problems`.
    """
    name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    return _loaded(PluginHost(entry_points=False, plugins={name: plugin}), (name,), strict)


def load_distribution(distribution: str, *, strict: bool = True) -> LoadedPlugin:
    """Load the plugins an installed distribution declares (its entry points in the
    ``sandboxed_coding_agent`` group), as the agent would, and no other.

    :param distribution: its name, as installed (``agent-policy-example``).
    :param strict: as for :func:`load_plugin`; a plugin that cannot be imported is a problem.
    :raises PluginProblem: the distribution is not installed or declares no plugin
        (whatever ``strict`` says).
    """
    try:
        found = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise PluginProblem(f"no distribution {distribution!r} is installed") from None
    entry_points = [e for e in found.entry_points if e.group == ENTRY_POINT_GROUP]
    if not entry_points:
        raise PluginProblem(
            f"{distribution!r} declares no entry point in the group {ENTRY_POINT_GROUP!r}"
        )
    modules: dict[str, object] = {}
    problems = []
    for entry_point in entry_points:
        try:
            with manifest.reading_plugin_seeds():
                modules[entry_point.name] = entry_point.load()
        except Exception as error:
            problems.append(
                f"plugin {entry_point.name!r} could not be loaded: {type(error).__name__}: {error}"
            )
    loaded = _loaded(PluginHost(entry_points=False, plugins=modules), tuple(modules), False)
    loaded.problems[:0] = problems
    if strict and loaded.problems:
        raise PluginProblem("\n".join(loaded.problems))
    return loaded


def _loaded(host: PluginHost, names: Sequence[str], strict: bool) -> LoadedPlugin:
    loaded = LoadedPlugin(host, tuple(names))
    if strict and loaded.problems:
        raise PluginProblem("\n".join(loaded.problems))
    return loaded


def patch(*files: tuple[str, str]) -> PatchPlan:
    """A plan replacing each ``(path, text)``."""
    replaced = tuple(PatchFile(path, text) for path, text in files)
    return PatchPlan(replaced)


class LoadedPlugin:
    """A plugin loaded by the agent's own host, beside the built-in plugins.

    :ivar host: the ``PluginHost`` (of ``sandboxed_coding_agent.core.plugins``)
        holding it and the built-in plugins (not an API: it may change).
    :ivar names: the plugin names loaded (one per entry point).
    :ivar problems: what the agent would print about the plugins, one line each.
    """

    def __init__(self, host: PluginHost, names: tuple[str, ...]) -> None:
        self.host = host
        self.names = names
        self.problems: list[str] = list(host.problems)

    def _own(self, registry: Mapping[str, Any]) -> dict[str, Any]:
        return {name: r.item for name, r in registry.items() if r.plugin in self.names}

    @property
    def policies(self) -> dict[str, PatchPolicy]:
        """The policies the plugin registered, by name, as registered (not configured)."""
        return self._own(self.host.policies)

    @property
    def seeds(self) -> dict[str, SeedProject]:
        """The seeds the plugin registered, by name."""
        return self._own(self.host.seeds)

    @property
    def planners(self) -> dict[str, Planner]:
        """The planners the plugin registered, by name."""
        return self._own(self.host.planners)

    @property
    def runners(self) -> dict[str, Runner]:
        """The runners the plugin registered, by name."""
        return self._own(self.host.runners)

    @property
    def checks(self) -> dict[str, Check]:
        """The ``agent doctor`` checks the plugin registered, by name."""
        return self._own(self.host.checks)

    def seed(self, name: str) -> SeedProject:
        """Any seed the agent knows here (the plugin's, a built-in one, or a folder's path).

        :raises UsageError: there is none by that name.
        """
        return self.host.seed(name)

    def policies_for(
        self,
        seed: SeedProject,
        *,
        policies: Sequence[str] = (),
        parameters: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[PatchPolicy]:
        """The policies that check plans for ``seed``, configured, as for ``agent run``.

        :param policies: more policies to switch on, as ``--policy NAME`` does.
        :param parameters: parameters by policy, on top of the seed's, as
            ``--policy-param NAME.KEY=VALUE`` gives them (each policy named is switched on).
        :raises UsageError: an unknown policy, or parameters a policy refuses (the
            message the user would see).
        """
        return self.host.policies_for(seed, switch_on=policies, parameters=parameters)

    def check_plan(
        self,
        plan: PatchPlan,
        seed: SeedProject,
        *,
        policies: Sequence[str] = (),
        parameters: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[Rejection]:
        """Every reason the policies that apply to ``seed`` give for refusing ``plan``.

        As ``agent validate`` checks it: the patch contract, then every policy the
        seed, ``policies`` and ``parameters`` switch on (see :meth:`policies_for`); a
        policy that raises gives a ``policy-failed`` rejection. An empty list accepts it.
        """
        chosen = self.policies_for(seed, policies=policies, parameters=parameters)
        return orchestrator.check_plan(plan, seed, chosen)

    def run_plan(
        self,
        seed: SeedProject,
        plan: PatchPlan,
        *,
        runner: str = "local",
        policies: Sequence[str] = (),
        parameters: Mapping[str, Mapping[str, Any]] | None = None,
        limits: SeedLimits | None = None,
    ) -> RunResult:
        """Check ``plan`` and test it in a new sandbox of ``runner``, as ``agent run
        --plan`` does (the seed's runtime is prepared first, if it has one).

        :param runner: the runner's name: the plugin's, or the built-in ``local``.
        :param limits: instead of the seed's limits.
        :returns: the result; ``result.tests_passed`` is the verdict.
        :raises PlanRejected: a policy refused the plan.
        :raises SandboxError: the sandbox failed for a reason other than the test.
        """
        chosen = self.policies_for(seed, policies=policies, parameters=parameters)
        picked = self.host.runner(runner)
        return orchestrator.run(seed, runner=picked, policies=chosen, plan=plan, limits=limits)


def check_sessions(runner: Runner, seed: SeedProject) -> None:
    """Check that ``runner`` offers sessions as the runner contract says (see
    :meth:`~sandboxed_coding_agent.core.protocols.Runner.run_test`), on ``seed``: one
    with at least one editable and one test file. Each check runs real commands in the
    runner's sandboxes (a dozen, one of them stopped at a 2-second limit).

    :raises AssertionError: naming the first rule the runner breaks.
    :raises SessionError: the runner offers no sessions at all.
    """
    from .runs.sessions import Session

    editable, test = seed.editable_files[0], seed.test_files[0]
    session = Session(runner, seed, command_seconds=30)
    shown = session.run(f"cat {editable}")
    original = seed.read_files()[editable].decode("utf-8", errors="replace")
    _require(shown.exit_code == 0 and original.strip() in shown.output, "cat shows the file")
    made = session.run(
        f"echo '# changed' >> {editable} && echo kept > scratch.txt && "
        "export SESSION_MARK=1 && cd / && (sleep 300 &) && echo started"
    )
    _require(made.exit_code == 0 and "started" in made.output, "a command runs with bash -c")
    after = session.run(
        "tail -n 1 " + editable + "; cat scratch.txt; echo mark=${SESSION_MARK:-none}; pwd; "
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
    )
    _require("# changed" in after.output and "kept" in after.output, "files carry over")
    _require("mark=none" in after.output, "no variable carries over from one command")
    _require("sleep 300" not in after.output, "no process outlives its command")
    _require(after.output.splitlines()[3:4] != ["/"], "each command starts in the project folder")
    refused = session.run(f"echo x >> {test}; echo status=$?")
    _require("status=0" not in refused.output, "test files are read-only")
    offline = session.run("(exec 3<>/dev/tcp/1.1.1.1/53) 2>/dev/null; echo status=$?")
    _require("status=0" not in offline.output, "a session has no network")
    slow = session.run(f"echo '# late' >> {editable}; sleep 60", seconds=2)
    _require(slow.timed_out and slow.exit_code is None, "a command past its time is stopped")
    changes = session.changes()
    changed = changes.get(editable) or b""
    _require(b"# changed" in changed and b"# late" in changed, "the session's changes are kept")
    _require(changes.get("scratch.txt") == b"kept\n", "a file made in a session is a change")
    _require(test not in changes, "a test file is never among the changes")


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise AssertionError(f"the runner breaks the session contract: {rule}")

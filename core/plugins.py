"""The plugin host: one pluggy manager, the built-in plugins, and entry-point plugins.

Built-in plugins are registered through the same hooks as third-party ones,
so a third-party plugin can do anything a built-in one can.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Generic, TypeVar

import attrs
import pluggy

from . import hookspecs
from .errors import UsageError
from .model import SeedProject
from .protocols import PatchPolicy, Planner, Runner

ENTRY_POINT_GROUP = "sandboxed_coding_agent"
DISABLE_ENV = "SANDBOXED_CODING_AGENT_DISABLE_PLUGINS"

DEFAULT_PLUGINS = (
    "sandboxed_coding_agent.plugins.calculator_seed",
    "sandboxed_coding_agent.plugins.patch_contract",
    "sandboxed_coding_agent.plugins.openai_planner",
    "sandboxed_coding_agent.plugins.local_sandbox",
)

OWN_DISTRIBUTION = "sandboxed-coding-agent"

T = TypeVar("T")


def _own_version() -> str:
    try:
        return metadata.version(OWN_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


@attrs.frozen
class Registered(Generic[T]):
    """Something a plugin registered, and which plugin it was."""

    item: T
    plugin: str


@attrs.frozen
class PluginInfo:
    """What ``agent plugins list`` shows about one plugin."""

    name: str
    kinds: tuple[str, ...]
    distribution: str
    version: str
    location: str


_KINDS = {
    "register_seeds": "seed",
    "register_planners": "planner",
    "register_policies": "policy",
    "register_runners": "runner",
}


class PluginHost:
    """Loads plugins once and holds what they registered, by kind and name.

    A plugin that fails to import, to register, or to run its hook is left
    out and described in :attr:`problems`; the rest keep working.
    """

    def __init__(self, *, disabled: Iterable[str] = (), entry_points: bool = True) -> None:
        self.manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
        self.manager.add_hookspecs(hookspecs)
        self.problems: list[str] = []
        self._origin: dict[str, tuple[str, str]] = {}
        for name in disabled:
            self.manager.set_blocked(name)
        for module_name in DEFAULT_PLUGINS:
            self._register(importlib.import_module(module_name), module_name.rsplit(".", 1)[1])
            self._origin[module_name.rsplit(".", 1)[1]] = (OWN_DISTRIBUTION, _own_version())
        if entry_points:
            self._load_entry_points()
        self.seeds: dict[str, Registered[SeedProject]] = self._collect("register_seeds")
        self.planners: dict[str, Registered[Planner]] = self._collect("register_planners")
        self.policies: dict[str, Registered[PatchPolicy]] = self._collect("register_policies")
        self.runners: dict[str, Registered[Runner]] = self._collect("register_runners")

    def _register(self, plugin: object, name: str) -> None:
        if self.manager.is_blocked(name):
            return
        try:
            self.manager.register(plugin, name=name)
        except pluggy.PluginValidationError as error:
            self.problems.append(f"plugin {name!r} does not match the hooks: {error}")

    def _load_entry_points(self) -> None:
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = entry_point.dist
            origin = (dist.name, dist.version) if dist is not None else ("unknown", "")
            if self.manager.is_blocked(entry_point.name):
                continue
            try:
                plugin = entry_point.load()
            except Exception as error:  # a broken plugin must not break the CLI
                self.problems.append(
                    f"plugin {entry_point.name!r} from {origin[0]} could not be loaded: "
                    f"{type(error).__name__}: {error}"
                )
                continue
            self._origin[entry_point.name] = origin
            self._register(plugin, entry_point.name)

    def _collect(self, hook_name: str) -> dict[str, Registered[T]]:
        kind = _KINDS[hook_name]
        found: dict[str, Registered[T]] = {}
        caller = getattr(self.manager.hook, hook_name)
        # Call each implementation on its own so one failing plugin cannot hide the others.
        for impl in reversed(caller.get_hookimpls()):

            def register(item: T, _plugin: str = impl.plugin_name) -> None:
                name = getattr(item, "name", None)
                if not isinstance(name, str) or not name:
                    self.problems.append(f"plugin {_plugin!r} registered a {kind} with no name")
                elif name in found:
                    self.problems.append(
                        f"plugin {_plugin!r} registered {kind} {name!r}, which plugin "
                        f"{found[name].plugin!r} already provides; it was ignored"
                    )
                else:
                    found[name] = Registered(item, _plugin)

            try:
                impl.function(register)
            except Exception as error:  # a broken plugin must not break the CLI
                self.problems.append(
                    f"plugin {impl.plugin_name!r} failed in {hook_name}: "
                    f"{type(error).__name__}: {error}"
                )
        return found

    def seed(self, name: str) -> SeedProject:
        return _pick(self.seeds, name, "seed", "agent seeds list").item

    def planner(self, name: str) -> Planner:
        return _pick(self.planners, name, "planner", "agent plugins list").item

    def runner(self, name: str) -> Runner:
        return _pick(self.runners, name, "runner", "agent plugins list").item

    def all_policies(self) -> list[PatchPolicy]:
        return [registered.item for registered in self.policies.values()]

    def plugin_infos(self) -> list[PluginInfo]:
        kinds: dict[str, list[str]] = {}
        for kind, registry in (
            ("seed", self.seeds),
            ("planner", self.planners),
            ("policy", self.policies),
            ("runner", self.runners),
        ):
            for registered in registry.values():
                kinds.setdefault(registered.plugin, [])
                if kind not in kinds[registered.plugin]:
                    kinds[registered.plugin].append(kind)
        infos = []
        for name, plugin in self.manager.list_name_plugin():
            distribution, version = self._origin.get(name, ("unknown", ""))
            location = str(getattr(plugin, "__file__", None) or getattr(plugin, "__name__", plugin))
            infos.append(
                PluginInfo(name, tuple(kinds.get(name, ())), distribution, version, location)
            )
        return infos


def _pick(registry: dict[str, Registered[T]], name: str, kind: str, hint: str) -> Registered[T]:
    try:
        return registry[name]
    except KeyError:
        known = ", ".join(sorted(registry)) or "none"
        raise UsageError(f"unknown {kind} {name!r} (known: {known}; see `{hint}`)") from None


def disabled_from_environment(environ: Callable[[str], str | None] = os.environ.get) -> list[str]:
    """Plugin names listed in ``SANDBOXED_CODING_AGENT_DISABLE_PLUGINS`` (comma-separated)."""
    value = environ(DISABLE_ENV) or ""
    return [name.strip() for name in value.split(",") if name.strip()]

"""The plugin host: one pluggy manager, the built-in plugins, and entry-point plugins.

Built-in plugins are registered through the same hooks as third-party ones,
so a third-party plugin can do anything a built-in one can. Built-ins are
registered first and keep their names: a third-party plugin cannot replace the
patch contract or a built-in seed by registering the same name.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs
import pluggy

from . import __version__, hookspecs
from .errors import UsageError
from .model import SeedProject
from .plans import contract, policy_parameters
from .protocols import Check, CommandGroup, PatchPolicy, Planner, PolicyParameter, Runner
from .seeds import manifest, seed_files
from .serialization import describe_structure_error

ENTRY_POINT_GROUP = "sandboxed_coding_agent"
DISABLE_ENV = "SANDBOXED_CODING_AGENT_DISABLE_PLUGINS"

DEFAULT_PLUGINS = (
    "sandboxed_coding_agent.plugins.calculator_seed",
    "sandboxed_coding_agent.plugins.patch_contract",
    "sandboxed_coding_agent.plugins.python_ast_policy",
    "sandboxed_coding_agent.plugins.openai_planner",
    "sandboxed_coding_agent.plugins.local_sandbox",
    "sandboxed_coding_agent.plugins.lazycloud",
)
#: Plugins nobody may disable: every other rule relies on the patch contract.
REQUIRED_PLUGINS = frozenset({"patch_contract"})
ACTIVATIONS = ("always", "on", "off")

OWN_DISTRIBUTION = "sandboxed-coding-agent"

T = TypeVar("T")


@attrs.frozen
class Registered(Generic[T]):
    """Something a plugin registered, and which plugin it was.

    :ivar description: the item's description (or a command's help), read once as
        it was registered: listings show this, never the plugin's object.
    """

    item: T
    plugin: str
    description: str = ""


#: The longest description of a plugin's item that listings and records keep.
MAX_DESCRIPTION_CHARS = 1000

#: What a plugin registers for users to type: lower case words joined by hyphens.
CONVENTIONAL_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


@attrs.frozen
class Provided:
    """One thing a plugin registered, as ``agent plugins list`` shows it.

    :ivar kind: ``seed``, ``planner``, ``policy``, ``runner``, ``check`` or ``command``.
    """

    kind: str
    name: str
    description: str


@attrs.frozen
class PluginInfo:
    """What ``agent plugins list`` shows about one plugin.

    :ivar status: ``loaded``, ``disabled`` or ``broken``; :attr:`problem` says why it is broken.
    :ivar provides: everything it registered, in registration order, with descriptions.
    """

    name: str
    kinds: tuple[str, ...]
    distribution: str
    version: str
    location: str
    status: str = "loaded"
    problem: str | None = None
    provides: tuple[Provided, ...] = ()

    @property
    def naming_problems(self) -> list[str]:
        """Names that break the convention (see :mod:`~sandboxed_coding_agent.core.hookspecs`)."""
        problems = []
        if not self.name.isidentifier():
            problems.append(
                f"the plugin's name {self.name!r} is not a Python identifier "
                f"(by convention {_identifier(self.name)!r})"
            )
        for item in self.provides:
            if not CONVENTIONAL_NAME.fullmatch(item.name):
                problems.append(
                    f"{item.kind} {item.name!r} is not lower case words joined by '-' "
                    f"(by convention {_hyphenated(item.name)!r})"
                )
        return problems


@attrs.frozen
class _Origin:
    distribution: str
    version: str
    location: str


_KINDS: dict[str, tuple[str, type]] = {
    "register_seeds": ("seed", SeedProject),
    "register_planners": ("planner", Planner),
    "register_policies": ("policy", PatchPolicy),
    "register_runners": ("runner", Runner),
    "register_checks": ("check", Check),
    "register_commands": ("command", CommandGroup),
}


class PluginHost:
    """Loads plugins once and holds what they registered, by kind and name.

    A plugin that fails to import, does not match the hooks, raises in a hook
    or registers something malformed is left out (wholly or that one thing)
    and described, one line each, in :attr:`problems`; the rest keep working.

    :param disabled: plugin names not to load (``SANDBOXED_CODING_AGENT_DISABLE_PLUGINS``).
    :param entry_points: whether to load third-party plugins at all.
    :param plugins: more plugins by name, registered after the built-in ones, for a
        program that embeds the agent (the way ``pytest.main(plugins=...)`` takes them).
    :raises UsageError: when asked to disable a plugin nobody may disable.
    """

    def __init__(
        self,
        *,
        disabled: Iterable[str] = (),
        entry_points: bool = True,
        plugins: Mapping[str, object] | None = None,
    ) -> None:
        self.manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
        self.manager.add_hookspecs(hookspecs)
        self.problems: list[str] = []
        self._origins: dict[str, _Origin] = {}
        self._broken: dict[str, str] = {}
        self._order: list[str] = []
        disabled = [name for name in dict.fromkeys(disabled) if name]
        required = sorted(REQUIRED_PLUGINS.intersection(disabled))
        if required:
            raise UsageError(
                f"plugin {required[0]!r} cannot be disabled: it provides the patch contract, "
                "which every plan must keep"
            )
        for name in disabled:
            self.manager.set_blocked(name)
        own = __version__
        for module_name in DEFAULT_PLUGINS:
            module = importlib.import_module(module_name)
            name = module_name.rsplit(".", 1)[1]
            self._origins[name] = _Origin(OWN_DISTRIBUTION, own, str(module.__file__))
            self._register(module, name)
        for name, plugin in (plugins or {}).items():
            location = str(getattr(plugin, "__file__", None) or repr(plugin))
            self._origins[name] = _Origin("given to PluginHost", "", location)
            self._register(plugin, name)
        if entry_points:
            self._load_entry_points()
        for name in disabled:
            if name not in self._origins:
                self.problems.append(
                    f"plugin {name!r} was asked to be disabled but is not installed"
                )
        self.seeds: dict[str, Registered[SeedProject]] = self._collect("register_seeds")
        self.planners: dict[str, Registered[Planner]] = self._collect("register_planners")
        self.policies: dict[str, Registered[PatchPolicy]] = self._collect("register_policies")
        self.runners: dict[str, Registered[Runner]] = self._collect("register_runners")
        self.checks: dict[str, Registered[Check]] = self._collect("register_checks")
        self.commands: dict[str, Registered[CommandGroup]] = self._collect("register_commands")
        if self.policies.get(contract.POLICY, Registered(None, "")).plugin != "patch_contract":
            raise UsageError("the patch contract is missing; reinstall sandboxed-coding-agent")

    def describe(self, plugin: str) -> str:
        """``plugin 'NAME' (DISTRIBUTION VERSION)``, for messages."""
        origin = self._origins.get(plugin)
        if origin is None:
            return f"plugin {plugin!r}"
        return f"plugin {plugin!r} ({origin.distribution} {origin.version})".replace(" )", ")")

    def _problem(self, plugin: str, message: str) -> None:
        line = f"{self.describe(plugin)} {_one_line(message)}"
        self.problems.append(line)
        self._broken.setdefault(plugin, _one_line(message))

    def _register(self, plugin: object, name: str) -> None:
        if self.manager.is_blocked(name):
            return
        try:
            self.manager.register(plugin, name=name)
        except pluggy.PluginValidationError as error:
            detail = str(error).split("\n", 1)[-1]
            self._problem(name, f"does not match the hooks and was not loaded: {detail}")
            return
        except ValueError as error:
            self._problem(name, f"was not loaded: {error}")
            return
        unknown = sorted(
            caller.name
            for caller in self.manager.get_hookcallers(plugin) or ()
            if not caller.has_spec()
        )
        if unknown:
            self.manager.unregister(name=name)
            known = ", ".join(sorted(_KINDS))
            self._problem(
                name,
                f"implements unknown hook(s) {', '.join(unknown)} and was not loaded "
                f"({_did_you_mean(unknown)}known: {known})",
            )
            return
        self._order.append(name)
        # pluggy ignores a function without the marker: say so, or the plugin
        # would just register nothing and nobody would know why.
        marked = {caller.name for caller in self.manager.get_hookcallers(plugin) or ()}
        unmarked = [
            attribute
            for attribute in dir(plugin)
            if attribute.startswith("register_")
            and attribute not in marked
            and (attribute in _KINDS or _close_hook(attribute))
            and callable(getattr(plugin, attribute, None))
        ]
        if unmarked:
            self._problem(
                name,
                f"defines {', '.join(unmarked)} without @hookimpl, so the agent never calls "
                f"it ({_did_you_mean(unmarked)}mark each hook with "
                "sandboxed_coding_agent.core.hookspecs.hookimpl)",
            )

    def _load_entry_points(self) -> None:
        if not _entry_points_declared():
            return
        from importlib import metadata

        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            name, dist = entry_point.name, entry_point.dist
            origin = _Origin(
                dist.name if dist is not None else "unknown distribution",
                dist.version if dist is not None else "",
                entry_point.value,
            )
            known = self._origins.get(name)
            if known is not None:
                # The same distribution seen twice on sys.path is no problem; a clash is.
                if (known.distribution, known.version) != (origin.distribution, origin.version):
                    self.problems.append(
                        f"plugin {name!r} ({origin.distribution} {origin.version}) was ignored: "
                        f"{self.describe(name)} already uses that name"
                    )
                continue
            self._origins[name] = origin
            if self.manager.is_blocked(name):
                continue
            try:
                # A folder seed the plugin reads as it is imported is its own, as in
                # register_seeds.
                with manifest.reading_plugin_seeds():
                    plugin = entry_point.load()
            except (Exception, SystemExit) as error:  # a broken plugin must not break the CLI
                self._problem(name, f"could not be loaded: {type(error).__name__}: {error}")
                continue
            location = getattr(sys.modules.get(entry_point.module), "__file__", None)
            if location:
                self._origins[name] = attrs.evolve(origin, location=str(location))
            self._register(plugin, name)

    def _collect(self, hook_name: str) -> dict[str, Registered[Any]]:
        kind, protocol = _KINDS[hook_name]
        found: dict[str, Registered[Any]] = {}
        caller = getattr(self.manager.hook, hook_name)
        by_plugin = {impl.plugin_name: impl for impl in caller.get_hookimpls()}
        # Registration order, built-ins first, so the first to claim a name keeps it;
        # and each plugin on its own, so one failing plugin cannot hide the others.
        for plugin in self._order:
            impl = by_plugin.get(plugin)
            if impl is None:
                continue

            def register(item: object, _plugin: str = plugin) -> None:
                name = getattr(item, "name", None)
                if isinstance(name, str):  # a str subclass's own __str__ is never called
                    name = str.__str__(name)
                problem = _item_problem(item, kind, protocol)
                if problem:
                    self._problem(_plugin, f"registered {problem}; it was ignored")
                elif not isinstance(name, str) or not name:
                    self._problem(_plugin, f"registered a {kind} with no name; it was ignored")
                elif name in found:
                    self._problem(
                        _plugin,
                        f"registered {kind} {name!r}, which {self.describe(found[name].plugin)} "
                        "already provides; it was ignored",
                    )
                else:
                    found[name] = Registered(item, _plugin, description_of(item))

            try:
                # A folder seed a plugin reads with load_seed is part of the installed
                # package (whose files installers hard-link), not a folder of unknown origin.
                with manifest.reading_plugin_seeds():
                    returned = impl.function(**{argument: register for argument in impl.argnames})
            except (Exception, SystemExit) as error:  # a broken plugin must not break the CLI
                self._problem(plugin, f"failed in {hook_name}: {type(error).__name__}: {error}")
                continue
            if returned is not None:
                self._problem(
                    plugin,
                    f"{hook_name} returned {type(returned).__name__} instead of calling "
                    f"register() once per {kind}; what it returned was ignored",
                )
        return found

    def seed(self, name: str) -> SeedProject:
        """The registered seed called ``name``, or the folder seed at ``name`` if it is a path.

        :raises UsageError: no such seed, or the folder's ``seed.toml`` is invalid.
        """
        if manifest.looks_like_path(name):
            # A folder named on the command line may come from anyone (a downloaded tarball).
            seed = manifest.load_seed(
                name, check_policy=self.check_policy_parameters, untrusted=True
            )
            if not contract.is_utf8(str(seed.root)):
                # Its run record, results and messages hold the folder's path as text.
                raise UsageError(
                    f"the seed folder {seed_files.shown_name(str(seed.root))} has a path that "
                    "is not valid UTF-8, so a run on it could not be recorded; rename the "
                    "folder (or the folder above it whose name is not UTF-8)"
                )
            return seed
        return _pick(self.seeds, name, "seed", "agent seeds list").item

    def seed_source(self, name: str) -> str:
        """Where a seed comes from: a built-in plugin, a third-party plugin, or a folder."""
        if manifest.looks_like_path(name):
            return f"folder {self.seed(name).root}"
        plugin = _pick(self.seeds, name, "seed", "agent seeds list").plugin
        kind = (
            "built-in" if self._origins[plugin].distribution == OWN_DISTRIBUTION else "third-party"
        )
        return f"{kind} {self.describe(plugin)}"

    def planner(self, name: str) -> Planner:
        return _pick(self.planners, name, "planner", "agent planners list").item

    def runner(self, name: str) -> Runner:
        return _pick(self.runners, name, "runner", "agent runners list").item

    def policy(self, name: str) -> PatchPolicy:
        return _pick(self.policies, name, "policy", "agent policies list").item

    def check_policy_parameters(self, name: str, parameters: Mapping[str, Any]) -> None:
        """Raise :class:`UsageError` unless policy ``name`` exists and accepts ``parameters``."""
        self._configured(self.policy(name), parameters)

    def _configured(self, policy: PatchPolicy, parameters: Mapping[str, Any]) -> PatchPolicy:
        # Numbers, and for a policy that declares its parameters unknown keys, types and
        # required ones, checked here so no policy has to.
        policy_parameters.check(policy.name, declared_parameters(policy), parameters)
        if not parameters:
            return policy
        try:
            configured = policy.configure(parameters)
        except (Exception, SystemExit) as error:  # sys.exit() in a plugin must not end the CLI
            raise UsageError(
                f"policy {policy.name!r} refused its parameters: {_reason(error)}"
            ) from None
        if _item_problem(configured, "policy", PatchPolicy):
            raise UsageError(f"policy {policy.name!r}: configure() did not return a policy")
        return configured

    def policies_for(
        self,
        seed: SeedProject,
        *,
        switch_on: Sequence[str] = (),
        switch_off: Sequence[str] = (),
        parameters: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> list[PatchPolicy]:
        """The policies that check plans for ``seed``, configured with its parameters.

        ``always`` policies, ``on`` policies unless switched off, and ``off``
        policies the seed, ``switch_on`` or ``parameters`` names, unless
        ``switch_off`` names them: the user's ``--no-policy`` wins over the seed.

        :param parameters: the user's parameters by policy
            (``--policy-param NAME.KEY=VALUE``), on top of the seed's, key by key;
            each policy named is switched on.
        :raises UsageError: an unknown policy, a policy both switched on and off,
            an ``always`` policy switched off, or parameters a policy refuses.
        """
        given = dict(parameters or {})
        switch_on = [*switch_on, *(name for name in given if name not in switch_on)]
        for name in (*switch_on, *switch_off, *seed.policies):
            self.policy(name)
        both = sorted(set(switch_on) & set(switch_off))
        if both:
            how = "given parameters and switched off" if both[0] in given else "switched on and off"
            raise UsageError(f"policy {both[0]!r} is both {how}")
        for name in switch_off:
            if self.policies[name].item.activation == "always":
                raise UsageError(f"policy {name!r} cannot be switched off")
        chosen: list[PatchPolicy] = []
        all_parameters = policy_parameters.merged(seed.policies, given)
        for name, registered in self.policies.items():
            policy = registered.item
            wanted = name in switch_on or name in seed.policies or policy.activation == "on"
            if policy.activation == "always" or (wanted and name not in switch_off):
                chosen.append(self._configured(policy, all_parameters.get(name, {})))
        return chosen

    def plugin_infos(self) -> list[PluginInfo]:
        kinds: dict[str, list[str]] = {}
        provided: dict[str, list[Provided]] = {}
        for kind, registry in (
            ("seed", self.seeds),
            ("planner", self.planners),
            ("policy", self.policies),
            ("runner", self.runners),
            ("check", self.checks),
            ("command", self.commands),
        ):
            for name, registered in registry.items():
                kinds.setdefault(registered.plugin, [])
                if kind not in kinds[registered.plugin]:
                    kinds[registered.plugin].append(kind)
                provided.setdefault(registered.plugin, []).append(
                    Provided(kind, name, registered.description)
                )
        infos = []
        for name, origin in self._origins.items():
            if self.manager.is_blocked(name):
                status, problem = "disabled", None
            elif name in self._broken and name not in self._order:
                status, problem = "broken", self._broken[name]
            else:
                status, problem = "loaded", self._broken.get(name)
            infos.append(
                PluginInfo(
                    name=name,
                    kinds=tuple(kinds.get(name, ())),
                    distribution=origin.distribution,
                    version=origin.version,
                    location=origin.location,
                    status=status,
                    problem=problem,
                    provides=tuple(provided.get(name, ())),
                )
            )
        return infos


def description_of(item: object) -> str:
    """What a plugin's ``item`` says of itself (its ``description``, or a command's
    ``help``), as plain text whatever the plugin holds there.

    Listings and run records show plugins that are not in use, so nothing one of them
    holds may end a command: a value that is not text is shown as ``str()`` gives it,
    one that raises when read or shown says so instead, and a long one is cut at
    :data:`MAX_DESCRIPTION_CHARS`.
    """
    try:
        about = getattr(item, "description", None)
        if about is None:
            about = getattr(item, "help", None)
        if about is None:
            return ""
        # str.__str__ copies a str subclass without calling what the subclass overrides.
        text = str.__str__(about) if isinstance(about, str) else str(about)
    except (Exception, SystemExit) as error:
        return f"<unavailable: reading it raised {type(error).__name__}>"
    # A description is one line of a listing, not a place to keep megabytes.
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[:MAX_DESCRIPTION_CHARS] + "..."


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name).lower() or "_"


def _hyphenated(name: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()))


def declared_parameters(policy: object) -> tuple[PolicyParameter, ...] | None:
    """The parameters ``policy`` declares, or ``None`` when it declares none (see
    :class:`~sandboxed_coding_agent.core.protocols.ParameterizedPolicy`)."""
    declared = getattr(policy, "parameters", None)
    return None if declared is None else tuple(declared)


def _item_problem(item: object, kind: str, expected: type) -> str | None:
    """What is wrong with something a plugin registered, or ``None``."""
    if isinstance(item, type):
        # A class has the attributes a protocol asks for, but its methods are unbound.
        return (
            f"the class {item.__name__} instead of an instance of it "
            f"(register {item.__name__}(), not {item.__name__})"
        )
    if not isinstance(item, expected):
        members = [m for m in vars(expected) if not m.startswith("_")]
        missing = [m for m in members if not hasattr(item, m)] if _is_protocol(expected) else []
        detail = f"missing {', '.join(missing)}" if missing else f"got {type(item).__name__}"
        return f"a {kind} that is not a {expected.__name__} ({detail})"
    activation = getattr(item, "activation", None)
    if kind == "policy" and activation not in ACTIVATIONS:
        return (
            f"policy {getattr(item, 'name', '?')!r} with activation {activation!r} "
            f"(use one of {', '.join(ACTIVATIONS)})"
        )
    declared = getattr(item, "parameters", None) if kind == "policy" else None
    problem = None if declared is None else policy_parameters.declaration_problem(declared)
    if problem is not None:
        return f"policy {getattr(item, 'name', '?')!r} whose {problem}"
    return None


def _close_hook(name: str) -> str | None:
    """The hook ``name`` is probably a misspelling of, if any."""
    close = difflib.get_close_matches(name, _KINDS, n=1, cutoff=0.85)
    return close[0] if close else None


def _did_you_mean(names: Sequence[str]) -> str:
    """``did you mean X? `` for the first of ``names`` that misspells a hook, else nothing."""
    for name in names:
        close = _close_hook(name)
        if close is not None and close != name:
            return f"did you mean {close}? "
    return ""


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _reason(error: BaseException) -> str:
    """A configure() failure as the user should read it."""
    import cattrs

    if isinstance(error, SystemExit):
        return f"configure() called sys.exit({error.code!r})"
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(describe_structure_error(error, root="parameters"))
    if isinstance(error, (ValueError, TypeError)):
        return _one_line(str(error))
    return f"{type(error).__name__}: {_one_line(str(error))}"


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _entry_points_declared(path: Sequence[str] | None = None) -> bool:
    """Whether a distribution on ``path`` (``sys.path``) may declare a plugin entry point.

    Answered by reading the ``entry_points.txt`` of each installed distribution
    for the group's name, without importing :mod:`importlib.metadata`, whose
    import costs more than everything else ``agent --help`` does. Conservative:
    a path entry that is not a folder (a zip file) answers yes, and the real
    lookup then decides.
    """
    header = f"[{ENTRY_POINT_GROUP}]".encode()
    for folder in sys.path if path is None else path:
        try:
            entries = os.scandir(folder or ".")
        except NotADirectoryError:
            return True
        except OSError:
            continue
        with entries:
            for entry in entries:
                if not entry.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(entry.path, "entry_points.txt"), "rb") as declared:
                        if header in (line.strip() for line in declared):
                            return True
                except OSError:
                    continue
    return False


def _pick(registry: Mapping[str, Registered[T]], name: str, kind: str, hint: str) -> Registered[T]:
    try:
        return registry[name]
    except KeyError:
        known = ", ".join(sorted(registry)) or "none"
        raise UsageError(f"unknown {kind} {name!r} (known: {known}; see `{hint}`)") from None


def builtin_planner(plugin: str, planner: str) -> Planner:
    """The planner ``planner`` of the built-in plugin ``plugin``, loaded on its own.

    For a plugin that runs another built-in plugin's planner where the agent's
    other plugins are not installed, such as in a remote function holding only
    ``core`` and that plugin (a plugin never imports another one). No other
    plugin is imported and no entry point is read.

    :param plugin: the built-in plugin's name, as ``agent plugins list`` shows it
        (``openai_planner``).
    :param planner: the name the planner registers (``openai``).
    :raises LookupError: no such built-in plugin, or it registers no such planner.
    """
    modules = {module.rsplit(".", 1)[1]: module for module in DEFAULT_PLUGINS}
    if plugin not in modules:
        raise LookupError(f"no built-in plugin {plugin!r} (known: {', '.join(sorted(modules))})")
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    manager.register(importlib.import_module(modules[plugin]), name=plugin)
    found: list[Planner] = []
    manager.hook.register_planners(register=found.append)
    for item in found:
        if isinstance(item, Planner) and item.name == planner:
            return item
    raise LookupError(f"the built-in plugin {plugin!r} registers no planner {planner!r}")


def disabled_from_environment(environ: Callable[[str], str | None] = os.environ.get) -> list[str]:
    """Plugin names listed in ``SANDBOXED_CODING_AGENT_DISABLE_PLUGINS`` (comma-separated)."""
    value = environ(DISABLE_ENV) or ""
    return [name.strip() for name in value.split(",") if name.strip()]

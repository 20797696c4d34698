"""``agent planners``: the planners ``agent run --planner NAME`` can select."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .options import DEFAULT_PLANNER, DebugOption, JsonOption, group
from .terminal import echo, load_plugins, one_line, print_json, reporting

if TYPE_CHECKING:
    from ..plugins import PluginHost, Registered

app = group("Planners a run can use (agent run --planner NAME).")


@app.command("list")
def planners_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List planners: name, description, plugin and distribution; which is the default."""
    with reporting(as_json, debug):
        host = load_plugins()
        show(host, host.planners, DEFAULT_PLANNER, "--planner", as_json)


def rows(
    host: PluginHost, registry: Mapping[str, Registered[Any]], default: str
) -> list[dict[str, Any]]:
    """One row per planner or runner, as ``--json`` prints it."""
    plugins = {info.name: info for info in host.plugin_infos()}
    found = []
    for name, registered in registry.items():
        info = plugins[registered.plugin]
        found.append(
            {
                "name": name,
                "description": registered.description,
                "default": name == default,
                "plugin": registered.plugin,
                "distribution": info.distribution,
                "version": info.version,
            }
        )
    return found


def show(
    host: PluginHost,
    registry: Mapping[str, Registered[Any]],
    default: str,
    option: str,
    as_json: bool,
) -> None:
    """Print the planners or runners of ``registry``: JSON, or two lines each."""
    listed = rows(host, registry, default)
    if as_json:
        print_json(listed, indent=2)
        return
    for row in listed:
        chosen = "default; " if row["default"] else ""
        echo(one_line(f"{row['name']}  ({chosen}{host.describe(row['plugin'])})"))
        echo(f"  {one_line(row['description'])}")
    echo(f"\nSelect one with: agent run {option} NAME")

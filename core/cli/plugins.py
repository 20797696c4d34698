"""``agent plugins``: the installed plugins."""

from __future__ import annotations

from .options import DebugOption, JsonOption, group
from .terminal import echo, load_plugins, one_line, print_json, reporting

app = group("Installed plugins.")


@app.command("list")
def plugins_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List plugins: what they provide, their distribution and version, where they loaded from.

    Each planner, runner and policy is shown with its description; a name that
    breaks the naming convention (plugins with underscores, what they register
    in lower case words joined by hyphens) gets a note.
    """
    from ..serialization import to_jsonable

    with reporting(as_json, debug):
        host = load_plugins()
        infos = host.plugin_infos()
        if as_json:
            print_json(to_jsonable(infos), indent=2)
            return
        for info in infos:
            source = f"{info.distribution} {info.version}".strip()
            provides = ", ".join(info.kinds) or "nothing registered"
            status = "" if info.status == "loaded" else f" {info.status.upper()}"
            echo(one_line(f"{info.name}  [{provides}]{status}"))
            echo(f"  from {one_line(f'{source}: {info.location}')}")
            for item in info.provides:
                if item.kind in ("planner", "runner", "policy"):
                    echo(f"  {item.kind} {one_line(f'{item.name}: {item.description}')}")
            if info.problem:
                echo(f"  problem: {one_line(info.problem)}")
            for problem in info.naming_problems:
                echo(f"  note: {one_line(problem)}")

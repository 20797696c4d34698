"""``agent policies``: the policies that check plans before a sandbox."""

from __future__ import annotations

from .options import DebugOption, JsonOption, group
from .terminal import echo, load_plugins, print_json, reporting

app = group("Policies that check plans before a sandbox.")


@app.command("list")
def policies_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List policies: name, when they run (always, on or off by default), plugin."""
    with reporting(as_json, debug):
        host = load_plugins()
        rows = [
            {
                "name": name,
                "activation": registered.item.activation,
                "plugin": registered.plugin,
                "description": registered.item.description,
            }
            for name, registered in host.policies.items()
        ]
        if as_json:
            print_json(rows, indent=2)
            return
        when = {"always": "always on", "on": "on by default", "off": "off by default"}
        for row in rows:
            echo(f"{row['name']}  ({when[row['activation']]}; {host.describe(row['plugin'])})")
            echo(f"  {row['description']}")

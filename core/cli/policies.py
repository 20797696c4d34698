"""``agent policies``: the policies that check plans before a sandbox."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from .options import DebugOption, JsonOption, group
from .terminal import echo, load_plugins, one_line, print_json, reporting

app = group("Policies that check plans before a sandbox.")


ListSeedOption = Annotated[
    str | None,
    typer.Option(
        "--seed",
        metavar="NAME|FOLDER",
        help="Show the patch contract with this seed's limits (its [limits] in seed.toml) "
        "instead of the defaults.",
    ),
]


@app.command("list")
def policies_list(
    seed: ListSeedOption = None, as_json: JsonOption = False, debug: DebugOption = False
) -> None:
    """List policies: name, when they run (always, on or off by default), plugin, parameters."""
    from ..plans import contract
    from ..plugins import declared_parameters

    with reporting(as_json, debug):
        host = load_plugins()
        limits = None if seed is None else host.seed(seed).limits
        rows: list[dict[str, Any]] = []
        for name, registered in host.policies.items():
            declared = declared_parameters(registered.item)
            description = registered.description
            if limits is not None and name == contract.POLICY:
                description = f"{contract.describe(limits)} (the seed's limits)"
            rows.append(
                {
                    "name": name,
                    "activation": registered.item.activation,
                    "plugin": registered.plugin,
                    "description": description,
                    # None: the policy does not declare them (its configure checks them).
                    "parameters": None
                    if declared is None
                    else [
                        {
                            "name": parameter.name,
                            "type": parameter.type,
                            "default": _jsonable(parameter.default),
                            "required": parameter.required,
                            "description": parameter.description,
                        }
                        for parameter in declared
                    ],
                }
            )
        if as_json:
            print_json(rows, indent=2)
            return
        when = {"always": "always on", "on": "on by default", "off": "off by default"}
        for row in rows:
            echo(
                one_line(
                    f"{row['name']}  ({when[row['activation']]}; {host.describe(row['plugin'])})"
                )
            )
            echo(f"  {one_line(row['description'])}")
            if row["parameters"]:
                echo(f"  parameters (--policy-param {row['name']}.KEY=VALUE):")
                _print_parameters(row["parameters"])


def _jsonable(value: object) -> Any:
    """A declared default as JSON data (a TOML date or time as its text)."""
    return json.loads(json.dumps(value, default=str))


def _print_parameters(parameters: list[dict[str, Any]]) -> None:
    name_width = max(len(p["name"]) for p in parameters)
    type_width = max(len(p["type"]) for p in parameters)
    for parameter in parameters:
        notes = []
        if parameter["required"]:
            notes.append("required")
        elif parameter["default"] is not None:
            default = json.dumps(parameter["default"], ensure_ascii=False, default=str)
            notes.append(f"default {default}")
        note = f" ({'; '.join(notes)})" if notes else ""
        echo(
            one_line(
                f"    {parameter['name']:<{name_width}}  {parameter['type']:<{type_width}}  "
                f"{parameter['description']}{note}"
            )
        )

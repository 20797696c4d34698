"""``agent runners``: the runners (sandboxes) ``agent run --runner NAME`` can select."""

from __future__ import annotations

from .options import DEFAULT_RUNNER, DebugOption, JsonOption, group
from .planners import show
from .terminal import load_plugins, reporting

app = group("Runners, the sandboxes, a run can use (agent run --runner NAME).")


@app.command("list")
def runners_list(as_json: JsonOption = False, debug: DebugOption = False) -> None:
    """List runners: name, description (where and how the test runs), plugin and distribution."""
    with reporting(as_json, debug):
        host = load_plugins()
        show(host, host.runners, DEFAULT_RUNNER, "--runner", as_json)

"""What the LazyCloud backend is called in a workspace: fixed, so every command finds it."""

from __future__ import annotations

#: The LazyCloud app that owns the planner function and the sandbox definition.
APP_SLUG = "sandboxed_coding_agent"
#: The deployed planner function.
FUNCTION_NAME = "plan-patch"
#: The sandbox definition each test run creates one sandbox from.
SANDBOX_NAME = "test-patch"
#: The module and function the deployed planner runs (see :mod:`.handler`).
HANDLER_MODULE = "sandboxed_coding_agent.plugins.lazycloud.handler"
HANDLER_FUNCTION = "plan_patch"
#: Lowers every wait of the backend (seconds), for a control plane that should answer fast.
TIMEOUT_ENV = "SANDBOXED_CODING_AGENT_LAZYCLOUD_TIMEOUT"

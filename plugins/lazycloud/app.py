"""The LazyCloud app: the ``plan-patch`` function, the ``test-patch`` sandbox, their images.

Declaring them imports the SDK (pydantic, httpx), so this module is imported
only by the commands, the planner and the runner when they run.

Sizing follows the guide the backend comes from: the planner gets 0.5 CPU,
256 MiB, 120 s and one attempt (a retried call would ask the provider, and
bill its tokens, twice); a sandbox gets 1 CPU and 512 MiB, no network at all
(``block_network=True`` and no allow list), no secrets, no environment and no
ports. Neither image is written by hand: both come from the SDK's
:class:`lazycloud.Image` builder.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import metadata
from typing import TYPE_CHECKING, Any

from sandboxed_coding_agent.core.model import SeedRuntime
from sandboxed_coding_agent.core.provider import PROVIDER_SECRET_NAMES

from .names import APP_SLUG, FUNCTION_NAME, SANDBOX_NAME

if TYPE_CHECKING:
    from lazycloud import App, Image, Sandbox

FUNCTION_CPU = 0.5
FUNCTION_MEMORY_MIB = 256
FUNCTION_TIMEOUT_SECONDS = 120
SANDBOX_CPU = 1
SANDBOX_MEMORY_MIB = 512
#: A sandbox whose termination failed (the control plane unreachable) stops
#: itself after this long idle, instead of the SDK's ten minutes.
SANDBOX_KEEP_WARM_SECONDS = 120
#: What ``core`` and the planner import besides the standard library, at the
#: versions this agent runs with, so the remote planner runs what was tested.
FUNCTION_DISTRIBUTIONS = ("attrs", "cattrs", "pluggy", "httpx")


def agent_python() -> str:
    """This interpreter's ``major.minor``: the remote planner's, and a plain seed's."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def function_image() -> Image:
    """The planner function's image: this Python, and the planner's libraries pinned."""
    from lazycloud import Image

    packages = [f"{name}=={metadata.version(name)}" for name in FUNCTION_DISTRIBUTIONS]
    return Image(python_version=f"python{agent_python()}", python_packages=packages)


def sandbox_image(runtime: SeedRuntime | None) -> Image:
    """A test sandbox's image: the seed's Python and requirements, nothing else.

    A seed without a runtime gets the agent's Python and its standard library
    only, as in the local sandbox.
    """
    from lazycloud import Image

    python = (runtime.python if runtime else None) or agent_python()
    requirements = list(runtime.requirements) if runtime else []
    return Image(python_version=f"python{python}", python_packages=requirements)


def planner_app(plan_patch: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> App:
    """The app holding the ``plan-patch`` function.

    :param plan_patch: the handler to deploy; by default :func:`.handler.plan_patch`
        (a deploy passes the copy staged in its source root).
    """
    from lazycloud import App

    from . import handler

    app = App(APP_SLUG)
    function = app.function(
        plan_patch or handler.plan_patch,
        name=FUNCTION_NAME,
        image=function_image(),
        cpu=FUNCTION_CPU,
        memory=FUNCTION_MEMORY_MIB,
        timeout_seconds=FUNCTION_TIMEOUT_SECONDS,
        retries=0,
        secrets=list(PROVIDER_SECRET_NAMES),
    )
    function.terminal = None  # the agent says what happens; the SDK's progress stays quiet
    return app


def test_patch_sandbox(runtime: SeedRuntime | None) -> Sandbox:
    """The ``test-patch`` sandbox definition for a seed with ``runtime``."""
    from lazycloud import App

    return App(APP_SLUG).sandbox(
        name=SANDBOX_NAME,
        image=sandbox_image(runtime),
        cpu=SANDBOX_CPU,
        memory=SANDBOX_MEMORY_MIB,
        keep_warm_seconds=SANDBOX_KEEP_WARM_SECONDS,
        block_network=True,
        allow_list=None,
        secrets=None,
        env=None,
        ports=None,
    )

"""Seed runtimes for the local sandbox: :mod:`sandboxed_coding_agent.core.seeds.runtime`
builds them; this says which folders a sandbox needs of one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import attrs

from sandboxed_coding_agent.core.model import SeedRuntime
from sandboxed_coding_agent.core.seeds import runtime as seed_runtime
from sandboxed_coding_agent.core.seeds.runtime import (
    cache_root,
    installer_environment,
    python_spec,
    runtime_key,
)

from .bwrap import installation_folders, runtime_site_folders

__all__ = [
    "LocalRuntime",
    "cache_root",
    "installer_environment",
    "prepare_runtime",
    "python_spec",
    "runtime_key",
]


def _silent(_: str) -> None:
    pass


@attrs.frozen
class LocalRuntime:
    """A prepared runtime as the sandbox binds it.

    :ivar root: the virtual environment.
    :ivar python: its interpreter, which a leading ``python`` in a test command means.
    :ivar bin_dir: its scripts, first on the test's ``PATH``.
    :ivar read_only: the folders the sandbox needs: the environment and what its
        interpreter needs of its installation.
    :ivar hide: the global package folders the sandbox sees empty.
    """

    root: Path
    python: str
    bin_dir: str
    read_only: tuple[str, ...]
    hide: tuple[str, ...] = ()


def prepare_runtime(
    runtime: SeedRuntime, progress: Callable[[str], None] = _silent
) -> LocalRuntime:
    """The runtime's environment, built with uv the first time (see
    :func:`~sandboxed_coding_agent.core.seeds.runtime.prepare_runtime`), and its folders.

    :raises SandboxError: uv is missing or fails.
    """
    prepared = seed_runtime.prepare_runtime(runtime, progress)
    real = os.path.realpath(prepared.python)
    needed = installation_folders(real, prepared.base_prefixes)
    return LocalRuntime(
        root=prepared.root,
        python=prepared.python,
        bin_dir=prepared.bin_dir,
        read_only=tuple(sorted({str(prepared.root), *needed})),
        hide=tuple(runtime_site_folders(prepared.base_prefixes, str(prepared.root))),
    )

"""The deploy's source root: a folder of the plugin's own holding only what the planner imports.

The SDK uploads its source root as a zip and writes a ``.lazycloudignore`` into
it when there is none, so the source root is never the user's current folder
or this checkout: it is a temporary folder holding ``core``, the built-in
planner's package and this plugin's handler, laid out as the installed
package is, with an ignore file of its own.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from sandboxed_coding_agent.core.plugins import DEFAULT_PLUGINS

from .names import HANDLER_FUNCTION, HANDLER_MODULE

PACKAGE = "sandboxed_coding_agent"
#: The built-in plugin whose planner the handler runs.
PLANNER_PLUGIN = "openai_planner"
#: This plugin's files the handler needs (its package's __init__ imports names.py).
OWN_FILES = ("__init__.py", "names.py", "handler.py")
IGNORE_FILE = ".lazycloudignore"
IGNORE_PATTERNS = ("__pycache__/", "*.pyc", IGNORE_FILE)


def _package_folder(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"cannot find the package {module}")
    return Path(next(iter(spec.submodule_search_locations)))


def _copy_python(source: Path, target: Path, names: Iterator[str] | tuple[str, ...]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(source / name, target / name)


def stage_source(root: Path) -> list[str]:
    """Fill the empty folder ``root`` with the planner function's code; the files, relative.

    :returns: every file written, ``/``-separated, relative to ``root``.
    """
    modules = {module.rsplit(".", 1)[1]: module for module in DEFAULT_PLUGINS}
    core = _package_folder(f"{PACKAGE}.core")
    plugins = _package_folder(f"{PACKAGE}.plugins")
    planner = _package_folder(modules[PLANNER_PLUGIN])
    own = Path(__file__).parent
    package = root / PACKAGE
    _copy_python(core, package / "core", tuple(sorted(p.name for p in core.glob("*.py"))))
    _copy_python(plugins, package / "plugins", ("__init__.py",))
    planner_files = tuple(sorted(p.name for p in planner.glob("*.py")))
    _copy_python(planner, package / "plugins" / PLANNER_PLUGIN, planner_files)
    _copy_python(own, package / "plugins" / own.name, OWN_FILES)
    (root / IGNORE_FILE).write_text("\n".join(IGNORE_PATTERNS) + "\n", encoding="utf-8")
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and path.name != IGNORE_FILE
    )


@contextmanager
def staged_handler(root: Path) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    """The handler as loaded from the staged copy in ``root``, for the time of a deploy.

    The SDK finds a handler's file through ``sys.modules`` and requires it to
    lie inside the source root; the installed handler lies elsewhere, so while
    the deploy runs, the staged copy stands in for it under the same name.
    """
    path = root / Path(*HANDLER_MODULE.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(HANDLER_MODULE, path)
    if spec is None or spec.loader is None:
        raise LookupError(f"cannot load the staged handler {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    saved: ModuleType | None = sys.modules.get(HANDLER_MODULE)
    sys.modules[HANDLER_MODULE] = module
    try:
        yield getattr(module, HANDLER_FUNCTION)
    finally:
        if saved is None:
            sys.modules.pop(HANDLER_MODULE, None)
        else:
            sys.modules[HANDLER_MODULE] = saved

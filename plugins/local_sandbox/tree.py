"""A git seed's tree in the sandbox: bound read-only, at a cost that does not grow with its size.

The tree at a commit is checked out once in the agent's cache
(:func:`~sandboxed_coding_agent.core.seeds.git_source.materialize`). A sandbox does not
receive copies of its files: the entries of the tree's top folder are bound
read-only into the workspace (a tmpfs), one ``--ro-bind`` each. Only the folders
on the way to a file the job carries (the seed's own files and the editable ones,
which the sandbox gets as copies on top of the tree) are made as folders of the
workspace instead, their other entries bound one by one, so that those files can
be written there. The number of mounts thus follows the width of the tree's top
folder and of the folders holding carried files, never the number of files.

Everything of the tree is read-only to the test: it can be read and imported, not
changed, renamed or removed; the test can still write new files at the
workspace's top and in the folders of carried files, and in ``/tmp``. A symbolic
link of the tree stays a link (made with ``--symlink``), which resolves inside
the sandbox, never on the host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from sandboxed_coding_agent.core.errors import SandboxError

from .bwrap import workspace_path

#: Most bind mounts of a tree in one sandbox (each is one argument triple for ``bwrap``).
MAX_TREE_MOUNTS = 5000
#: Most bytes those arguments may take: they go on one command line, which the kernel
#: bounds (``ARG_MAX``, 2 MiB on most machines, environment included).
MAX_TREE_ARGUMENT_BYTES = 1024 * 1024


def _folders_of(paths: Iterable[str]) -> set[str]:
    """Every folder (relative, ``""`` for the top) that holds one of ``paths``."""
    folders = {""}
    for path in paths:
        parts = PurePosixPath(path).parts[:-1]
        for depth in range(1, len(parts) + 1):
            folders.add("/".join(parts[:depth]))
    return folders


def tree_mounts(tree: Path, carried: Iterable[str], hidden: Iterable[str] = ()) -> list[str]:
    """``bwrap`` arguments putting ``tree`` into the workspace read-only around ``carried``.

    :param tree: the checked-out tree on the host (read-only, in the agent's cache).
    :param carried: the job's files (relative paths): each is left out of the binds
        for the job's own copy to go there.
    :param hidden: files of the tree (relative paths) left out of the binds, with nothing
        in their place.
    :raises SandboxError: the binds would exceed :data:`MAX_TREE_MOUNTS` or
        :data:`MAX_TREE_ARGUMENT_BYTES`, or a carried file would be under a link or a
        file of the tree (bwrap would write it through the link, wherever that leads).
    """
    skip = {*carried, *hidden}
    opened = _folders_of(skip)
    budget = min(MAX_TREE_ARGUMENT_BYTES, os.sysconf("SC_ARG_MAX") // 2)
    size = 0
    arguments: list[str] = []
    pending = [""]
    while pending:
        folder = pending.pop()
        host = tree / folder if folder else tree
        try:
            entries = sorted(os.scandir(host), key=lambda entry: entry.name)
        except FileNotFoundError:
            continue  # a folder only the carried files have: bwrap makes it for them
        for entry in entries:
            relative = f"{folder}/{entry.name}" if folder else entry.name
            if relative in skip:
                continue
            inside = workspace_path(relative)
            if relative in opened and not entry.is_dir(follow_symlinks=False):
                under = min(path for path in skip if path.startswith(relative + "/"))
                raise SandboxError(
                    f"{under}: the tree has a symbolic link or a file at {relative}, "
                    "where the seed's file needs a folder"
                )
            added = len(arguments)
            if entry.is_symlink():
                arguments += ["--symlink", os.readlink(entry.path), inside]
            elif entry.is_dir(follow_symlinks=False) and relative in opened:
                arguments += ["--dir", inside]
                pending.append(relative)
            elif entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
                arguments += ["--ro-bind", entry.path, inside]
            if len(arguments) > 3 * MAX_TREE_MOUNTS:
                raise SandboxError(
                    f"the tree needs more than {MAX_TREE_MOUNTS} mounts around the seed's "
                    "own and editable files; fewer files in wide folders would do"
                )
            size += sum(len(os.fsencode(argument)) + 1 for argument in arguments[added:])
            if size > budget:
                raise SandboxError(
                    f"the tree's mounts around the seed's own and editable files need more "
                    f"than {budget} bytes of mount arguments (long names in wide folders); "
                    "fewer or shorter names in those folders would do"
                )
    return arguments

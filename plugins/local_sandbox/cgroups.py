"""A control group per sandbox, where the machine lets this process make one.

Resource limits (rlimits) are per process and a root caller is exempt from the
process-count one, so the process count and the memory of the sandbox as a
whole need a control group: ``pids.max`` stops a fork loop at the limit, and a
memory limit covers what ``RLIMIT_AS`` does not (pages of the sandbox's tmpfs
mounts). Both cgroup v1 (a ``pids`` and a ``memory`` hierarchy, as on this
project's build machine) and v2 (one unified hierarchy) are handled.

Each sandbox gets a group named ``sandboxed-coding-agent-<agent pid>-<sandbox id>``
under this process's own group, so the limits of whatever runs the agent keep
applying. The group is removed when the sandbox ends; one left behind by an
agent that was killed outright is removed by the next run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

from .process import kill_if

PREFIX = "sandboxed-coding-agent-"
CGROUP_ROOT = Path("/sys/fs/cgroup")


@attrs.frozen
class Counters:
    """What the kernel counted in a sandbox's groups: refused forks and OOM kills."""

    refused_forks: int = 0
    oom_kills: int = 0


@attrs.frozen
class Controller:
    """Where this process may create a child group for one controller.

    :ivar name: ``pids`` or ``memory``.
    :ivar parent: the folder of this process's own group in that controller's hierarchy.
    :ivar version: 1 or 2.
    """

    name: str
    parent: Path
    version: int


def _own_groups() -> dict[str, str]:
    """This process's group path per v1 controller, and ``""`` for the v2 hierarchy."""
    groups: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _mounts() -> dict[str, Path]:
    """Mount points of the cgroup hierarchies, by v1 controller, and ``""`` for v2."""
    mounts: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        mount_point = Path(fields[0].split()[4])
        fstype, _source, options = [*fields[1].split(), "", ""][:3]
        if fstype == "cgroup2":
            mounts.setdefault("", mount_point)
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in ("pids", "memory"):
                    mounts.setdefault(option, mount_point)
    return mounts


def _v1_controller(name: str, mounts: dict[str, Path], own: dict[str, str]) -> Controller | None:
    if name not in mounts or name not in own:
        return None
    parent = mounts[name] / own[name].lstrip("/")
    return Controller(name, parent, 1)


def _v2_controller(name: str, mounts: dict[str, Path], own: dict[str, str]) -> Controller | None:
    if "" not in mounts or "" not in own:
        return None
    parent = mounts[""] / own[""].lstrip("/")
    try:
        enabled = (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return Controller(name, parent, 2) if name in enabled else None


def controllers() -> dict[str, Controller]:
    """The ``pids`` and ``memory`` controllers this process could use, v1 first."""
    mounts, own = _mounts(), _own_groups()
    found: dict[str, Controller] = {}
    for name in ("pids", "memory"):
        controller = _v1_controller(name, mounts, own) or _v2_controller(name, mounts, own)
        if controller is not None:
            found[name] = controller
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(parent: Path) -> None:
    """Remove groups left by agents that no longer run (killed before they could clean up)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            owner = entry.name.removeprefix(PREFIX).split("-", 1)[0]
            if entry.name.startswith(PREFIX) and owner.isdigit() and not _alive(int(owner)):
                with contextlib.suppress(OSError):
                    entry.rmdir()


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _read_key(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


class SandboxGroups:
    """The groups of one sandbox: created with its limits, joined by the sandbox, then removed.

    ``problems`` says, per controller, why no group could be made; the sandbox
    then runs with rlimits alone for that resource.
    """

    def __init__(self, sandbox_id: str, *, max_processes: int, memory_bytes: int) -> None:
        self.groups: dict[str, Path] = {}
        self.problems: dict[str, str] = {}
        self._versions: dict[str, int] = {}
        available = controllers()
        wanted = {"pids": max_processes, "memory": memory_bytes}
        for name, limit in wanted.items():
            controller = available.get(name)
            if controller is None:
                self.problems[name] = f"no {name} controller is delegated to this process"
                continue
            try:
                self.groups[name] = self._create(controller, sandbox_id, limit)
                self._versions[name] = controller.version
            except OSError as error:
                self.problems[name] = f"cannot create a group under {controller.parent}: {error}"

    def _create(self, controller: Controller, sandbox_id: str, limit: int) -> Path:
        _remove_stale(controller.parent)
        group = controller.parent / f"{PREFIX}{os.getpid()}-{sandbox_id}"
        group.mkdir()
        try:
            if controller.name == "pids":
                _write(group / "pids.max", str(limit))
            elif controller.version == 1:
                _write(group / "memory.limit_in_bytes", str(limit))
                # No swap either: without it the limit would only move memory to disk.
                if (group / "memory.memsw.limit_in_bytes").exists():
                    _write(group / "memory.memsw.limit_in_bytes", str(limit))
            else:
                _write(group / "memory.max", str(limit))
                if (group / "memory.swap.max").exists():
                    _write(group / "memory.swap.max", "0")
        except OSError:
            group.rmdir()
            raise
        return group

    @property
    def procs_files(self) -> list[str]:
        """The files the sandbox's first process writes its PID to, to join every group."""
        return [str(group / "cgroup.procs") for group in self.groups.values()]

    def counters(self) -> Counters:
        refused = oom = 0
        if "pids" in self.groups:
            refused = _read_key(self.groups["pids"] / "pids.events", "max")
        if "memory" in self.groups:
            memory = self.groups["memory"]
            if self._versions["memory"] == 1:
                oom = _read_key(memory / "memory.oom_control", "oom_kill")
            else:
                oom = _read_key(memory / "memory.events", "oom_kill")
        return Counters(refused_forks=refused, oom_kills=oom)

    def _pids(self) -> Iterator[int]:
        for group in self.groups.values():
            with contextlib.suppress(OSError):
                for line in (group / "cgroup.procs").read_text().split():
                    yield int(line)

    def _in_a_group(self, pid: int) -> bool:
        """Whether ``pid`` is (still) in one of these groups, from its own ``/proc`` entry."""
        names = {"/" + group.name for group in self.groups.values()}
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return False
        return any(line.endswith(tuple(names)) for line in lines)

    def kill_and_remove(self, wait_seconds: float = 5.0) -> None:
        """Kill whatever is still in the groups, wait until they are empty, and remove them."""
        deadline = time.monotonic() + wait_seconds
        while True:
            pids = set(self._pids())
            for pid in pids:
                # A listed process may exit, be reaped and its PID be reused before the signal.
                kill_if(pid, self._in_a_group)
            if not pids or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        for group in list(self.groups.values()):
            for _ in range(100):
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY:
                        break
                    # A killed process leaves the group a moment after it is reaped.
                    time.sleep(0.01)
        self.groups.clear()

"""A control group per sandbox, where the machine lets this process make one.

Resource limits (rlimits) are per process and a root caller is exempt from the
process-count one, so the process count and the memory of the sandbox as a
whole need a control group: ``pids.max`` stops a fork loop at the limit, and a
memory limit counts the pages the sandbox holds, wherever they are (its tmpfs
mounts' among them), where ``RLIMIT_AS`` counts what one process maps, touched
or not. A sandbox whose memory group bounds it gets no ``RLIMIT_AS`` (see
:mod:`.limits`). Both cgroup v1 (a ``pids`` and a ``memory`` hierarchy, as on this
project's build machine) and v2 (one unified hierarchy) are handled.

Each sandbox gets a group named ``sandboxed-coding-agent-<agent pid>-<sandbox id>``
under this process's own group, so the limits of whatever runs the agent keep
applying. The group is removed when the sandbox ends; one left behind by an
agent that was killed outright is removed by the next run.

With v2, the controllers must be enabled for the children of that group, which
a group holding processes cannot do. An agent alone in a group delegated to it
first moves itself into a leaf group beside its sandboxes'; an agent sharing its
group with other processes makes no group, and says why (see
:func:`_give_to_children`). :class:`CgroupRoots` says where all of this is read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

from .kill import kill_if

PREFIX = "sandboxed-coding-agent-"
CGROUP_ROOT = Path("/sys/fs/cgroup")


@attrs.frozen
class CgroupRoots:
    """Where the kernel's view of control groups is read: the real files unless told otherwise.

    The hierarchies themselves are found through ``mountinfo``, so pointing these at
    fabricated files (as the tests do) moves every path this module touches.

    :ivar mountinfo: this process's mount table, naming where each hierarchy is mounted.
    :ivar self_cgroup: this process's group in each hierarchy.
    :ivar proc: the folder holding every process's ``<pid>/cgroup``.
    """

    mountinfo: Path = Path("/proc/self/mountinfo")
    self_cgroup: Path = Path("/proc/self/cgroup")
    proc: Path = Path("/proc")


HOST = CgroupRoots()


@attrs.frozen
class Counters:
    """What the kernel counted in a sandbox's groups: refused forks and OOM kills.

    Each is ``None`` where the sandbox had no group to count it (no ``pids``, no memory group).
    """

    refused_forks: int | None = None
    oom_kills: int | None = None


@attrs.frozen
class Controller:
    """Where this process may create a child group for one controller.

    :ivar name: ``pids`` or ``memory``.
    :ivar parent: the folder the sandboxes' groups are made in: this process's own group,
        or with v2, the group it left for a leaf of its own (see :func:`_give_to_children`).
    :ivar version: 1 or 2.
    :ivar enable: v2 only: the controller is delegated to ``parent`` but not yet given to
        its child groups, which the agent must do before it makes one.
    """

    name: str
    parent: Path
    version: int
    enable: bool = False


def _own_groups(roots: CgroupRoots) -> dict[str, str]:
    """This process's group path per v1 controller, and ``""`` for the v2 hierarchy."""
    groups: dict[str, str] = {}
    try:
        lines = roots.self_cgroup.read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


@attrs.frozen
class _Mount:
    point: Path
    #: The group of the hierarchy shown at ``point`` ("/" unless a subtree is mounted).
    root: str

    def folder(self, group: str) -> Path | None:
        """The folder of ``group`` (a path as ``/proc/self/cgroup`` gives it), if it is visible."""
        if self.root == "/":
            return self.point / group.lstrip("/")
        if group == self.root or group.startswith(self.root + "/"):
            return self.point / group[len(self.root) :].lstrip("/")
        return None


def _mounts(roots: CgroupRoots) -> dict[str, _Mount]:
    """Mounts of the cgroup hierarchies, by v1 controller, and ``""`` for v2."""
    mounts: dict[str, _Mount] = {}
    try:
        lines = roots.mountinfo.read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        _id, _parent, _device, root, point = fields[0].split()[:5]
        mount = _Mount(Path(point), root)
        fstype, _source, options = [*fields[1].split(), "", ""][:3]
        if fstype == "cgroup2":
            mounts.setdefault("", mount)
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in ("pids", "memory"):
                    mounts.setdefault(option, mount)
    return mounts


def _leaf_name() -> str:
    """The v2 group this process moves itself into, out of a delegated group."""
    return f"{PREFIX}{os.getpid()}-agent"


def _v1_controller(name: str, mounts: dict[str, _Mount], own: dict[str, str]) -> Controller | str:
    if name not in mounts or name not in own:
        return f"no cgroup v1 {name} hierarchy is mounted"
    parent = mounts[name].folder(own[name])
    if parent is None:
        return f"this process's {name} group {own[name]} is outside the mounted hierarchy"
    return Controller(name, parent, 1)


def _v2_controller(name: str, mounts: dict[str, _Mount], own: dict[str, str]) -> Controller | str:
    if "" not in mounts or "" not in own:
        return "no cgroup v2 hierarchy is mounted"
    parent = mounts[""].folder(own[""])
    if parent is None:
        return f"this process's cgroup v2 group {own['']} is outside the mounted hierarchy"
    if parent.name == _leaf_name():
        parent = parent.parent  # this process already left that group for its own leaf
    try:
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        delegated = (parent / "cgroup.controllers").read_text().split()
    except OSError as error:
        return f"cannot read the cgroup v2 group {parent}: {error}"
    if name in enabled:
        return Controller(name, parent, 2)
    if name in delegated:
        return Controller(name, parent, 2, enable=True)
    return f"the {name} controller is not delegated to the cgroup v2 group {parent}"


def _survey(roots: CgroupRoots) -> tuple[dict[str, Controller], dict[str, str]]:
    """The ``pids`` and ``memory`` controllers this process could use, v1 first; why not, for
    those it cannot."""
    mounts, own = _mounts(roots), _own_groups(roots)
    found: dict[str, Controller] = {}
    missing: dict[str, str] = {}
    for name in ("pids", "memory"):
        v1 = _v1_controller(name, mounts, own)
        v2 = v1 if isinstance(v1, Controller) else _v2_controller(name, mounts, own)
        if isinstance(v2, Controller):
            found[name] = v2
        else:
            missing[name] = f"{v1}, and {v2}"
    return found, missing


def controllers(*, roots: CgroupRoots = HOST) -> dict[str, Controller]:
    """The ``pids`` and ``memory`` controllers this process could use, v1 first."""
    return _survey(roots)[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _make_group(group: Path) -> None:
    group.mkdir()


def _remove_group(group: Path) -> None:
    group.rmdir()


def _remove_stale(parent: Path, proc: Path = Path("/proc")) -> None:
    """Remove groups left by agents that no longer run (killed before they could clean up).

    Whatever still runs in such a group is a sandbox whose agent is gone (a SIGKILL can
    land before bwrap's own parent-death signal is armed): it is killed first, each
    process only while ``proc`` shows it in that group, so that no process outlives its
    agent past the next run.
    """
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            owner = entry.name.removeprefix(PREFIX).split("-", 1)[0]
            if entry.name.startswith(PREFIX) and owner.isdigit() and not _alive(int(owner)):
                _kill_members(entry, proc)
                with contextlib.suppress(OSError):
                    _remove_group(entry)


def _kill_members(group: Path, proc: Path, wait_seconds: float = 2.0) -> None:
    """SIGKILL every process in ``group`` and wait (a little) until it is empty."""

    def in_group(pid: int) -> bool:
        try:
            lines = (proc / str(pid) / "cgroup").read_text().splitlines()
        except OSError:
            return False
        return any(line.endswith("/" + group.name) for line in lines)

    deadline = time.monotonic() + wait_seconds
    while pids := _members(group):
        for pid in pids:
            kill_if(pid, in_group)
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _members(group: Path) -> list[int]:
    """The processes in ``group``, from its ``cgroup.procs``."""
    with contextlib.suppress(OSError):
        return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]
    return []


def _give_to_children(controller: Controller) -> str | None:
    """Give ``controller`` to the child groups of its (v2) parent, or say why it cannot be.

    cgroup v2 lets no group but the root give a controller to its child groups while
    it holds processes itself ("no internal processes": the kernel answers EBUSY). A
    group delegated to the agent (``systemd-run --scope -p Delegate=yes``, a container
    whose first process is the agent) usually holds the agent alone: the agent then
    moves itself into a leaf group of its own, ``sandboxed-coding-agent-<pid>-agent``,
    and makes the sandboxes' groups beside it. It never moves another process, so a
    group shared with others (a login session's scope) is left as it is.
    """
    parent, pid = controller.parent, os.getpid()
    members = _members(parent)
    others = [member for member in members if member != pid]
    if others:
        shown = ", ".join(map(str, others[:5])) + (", ..." if len(others) > 5 else "")
        return (
            f"the cgroup v2 group {parent} holds other processes than the agent ({shown}), "
            "and a group that holds processes cannot give a controller to child groups"
        )
    if pid in members:
        leaf = parent / _leaf_name()
        with contextlib.suppress(FileExistsError):
            _make_group(leaf)
        _write(leaf / "cgroup.procs", str(pid))
    _write(parent / "cgroup.subtree_control", f"+{controller.name}")
    return None


def _read_key(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _has_swap(roots: CgroupRoots) -> bool:
    """Whether the machine has swap, from ``meminfo`` (``SwapTotal:  0 kB`` where it has none);
    yes, if that cannot be read."""
    try:
        lines = (roots.proc / "meminfo").read_text().splitlines()
    except OSError:
        return True
    for line in lines:
        name, _, value = line.partition(":")
        if name == "SwapTotal":
            return value.split()[:1] != ["0"]
    return True


class SandboxGroups:
    """The groups of one sandbox: created with its limits, joined by the sandbox, then removed.

    ``problems`` says, per controller, why no group could be made; the sandbox
    then runs with rlimits alone for that resource.
    """

    def __init__(
        self,
        sandbox_id: str,
        *,
        max_processes: int,
        memory_bytes: int,
        roots: CgroupRoots = HOST,
    ) -> None:
        self.groups: dict[str, Path] = {}
        self.problems: dict[str, str] = {}
        self._versions: dict[str, int] = {}
        self._swap_limited = False
        self._roots = roots
        available = controllers(roots=roots)
        wanted = {"pids": max_processes, "memory": memory_bytes}
        usable: dict[str, Controller] = {}
        for name in wanted:
            controller = available.get(name)
            if controller is None:
                self.problems[name] = _survey(roots)[1].get(
                    name, f"no {name} controller is delegated to this process"
                )
                continue
            try:
                # v2: every controller is given to the children before a group is made.
                refused = _give_to_children(controller) if controller.enable else None
            except OSError as error:
                refused = f"cannot enable {name} for the groups under {controller.parent}: {error}"
            if refused:
                self.problems[name] = refused
            else:
                usable[name] = controller
        for name, controller in usable.items():
            try:
                self.groups[name] = self._create(controller, sandbox_id, wanted[name])
                self._versions[name] = controller.version
            except OSError as error:
                self.problems[name] = f"cannot create a group under {controller.parent}: {error}"

    def _create(self, controller: Controller, sandbox_id: str, limit: int) -> Path:
        group = controller.parent / f"{PREFIX}{os.getpid()}-{sandbox_id}"
        # With v2 both controllers are in one hierarchy: one group holds both limits.
        shared = group in self.groups.values()
        if not shared:
            _remove_stale(controller.parent, self._roots.proc)
            _make_group(group)
        try:
            if controller.name == "pids":
                _write(group / "pids.max", str(limit))
            elif controller.version == 1:
                _write(group / "memory.limit_in_bytes", str(limit))
                # No swap either: without it the limit would only move memory to disk.
                if (group / "memory.memsw.limit_in_bytes").exists():
                    _write(group / "memory.memsw.limit_in_bytes", str(limit))
                    self._swap_limited = True
            else:
                _write(group / "memory.max", str(limit))
                if (group / "memory.swap.max").exists():
                    _write(group / "memory.swap.max", "0")
                    self._swap_limited = True
        except OSError:
            if not shared:
                _remove_group(group)
            raise
        return group

    @property
    def bounds_memory(self) -> bool:
        """Whether a memory group bounds all the sandbox holds, so that no rlimit needs to.

        Its swap must be limited too, or the machine have none: a group that does not
        count swap (cgroup v1 without ``memory.memsw.*``, booted with ``swapaccount=0``)
        bounds only what is resident, and would push the rest out to swap.
        """
        if "memory" not in self.groups:
            return False
        return self._swap_limited or not _has_swap(self._roots)

    @property
    def procs_files(self) -> list[str]:
        """The files a PID is written to, to move that process into every group."""
        return [str(group / "cgroup.procs") for group in self._distinct()]

    @property
    def join_files(self) -> list[str]:
        """The files a process writes ``0`` into to move itself into every group.

        With v1 that is each group's ``tasks``: a thread that moves itself takes
        no lock that every fork on the machine waits on, where a PID written to
        ``cgroup.procs`` takes one and waits for an RCU grace period (about 10 ms
        here, per sandbox). With v2 it is ``cgroup.procs``: a domain group takes
        whole processes only.
        """
        files: dict[Path, str] = {}  # one per group: with v2 both controllers share one
        for name, group in self.groups.items():
            files.setdefault(group, "tasks" if self._versions[name] == 1 else "cgroup.procs")
        return [str(group / file) for group, file in files.items()]

    def holds(self, pid: int) -> bool:
        """Whether ``pid`` is in every one of these groups, from its own ``/proc`` entry."""
        try:
            lines = (self._roots.proc / str(pid) / "cgroup").read_text().splitlines()
        except OSError:
            return False
        # Its group per v1 controller, and "" for the v2 hierarchy.
        paths: dict[str, str] = {}
        for line in lines:
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
        return all(
            paths.get(name if self._versions[name] == 1 else "", "").endswith("/" + group.name)
            for name, group in self.groups.items()
        )

    def _distinct(self) -> list[Path]:
        return list(dict.fromkeys(self.groups.values()))

    def counters(self) -> Counters:
        refused = oom = None
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
        for group in self._distinct():
            yield from _members(group)

    def _in_a_group(self, pid: int) -> bool:
        """Whether ``pid`` is (still) in one of these groups, from its own ``/proc`` entry."""
        names = {"/" + group.name for group in self.groups.values()}
        try:
            lines = (self._roots.proc / str(pid) / "cgroup").read_text().splitlines()
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
        for group in self._distinct():
            for _ in range(100):
                try:
                    _remove_group(group)
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY:
                        break
                    # A killed process leaves the group a moment after it is reaped.
                    time.sleep(0.01)
        self.groups.clear()

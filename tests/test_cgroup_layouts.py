"""The sandbox's control groups on each cgroup layout a machine may have, on fabricated trees.

This machine has cgroup v1; the others (v2 at a container's root, a delegated v2
scope, a login session's scope, hybrid layouts) are fabricated: plain folders with
the files the kernel would show, a mount table and a ``/proc/self/cgroup`` naming
them. :class:`FakeKernel` plays the kernel's part where a plain folder cannot: the
files a new group gets, moving a process between groups, the EBUSY of cgroup v2's
"no internal processes" rule and of removing a group that still holds processes.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from sandboxed_coding_agent.core.model import SeedLimits
from sandboxed_coding_agent.plugins.local_sandbox import cgroups, checks
from sandboxed_coding_agent.plugins.local_sandbox.bwrap import MIB
from sandboxed_coding_agent.plugins.local_sandbox.cgroups import (
    PREFIX,
    CgroupRoots,
    SandboxGroups,
    controllers,
)
from sandboxed_coding_agent.plugins.local_sandbox.limits import THREAD_STACK, address_space

V1_FILES = {
    "pids": {"pids.max": "max\n", "pids.events": "max 0\n"},
    "memory": {
        "memory.limit_in_bytes": "9223372036854771712\n",
        "memory.memsw.limit_in_bytes": "9223372036854771712\n",
        "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    },
}
V2_FILES = {
    "pids": {"pids.max": "max\n", "pids.events": "max 0\n"},
    "memory": {
        "memory.max": "max\n",
        "memory.swap.max": "max\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
    },
}
PID = os.getpid()
LEAF = f"{PREFIX}{PID}-agent"


def _members(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@attrs.define
class FakeKernel:
    """The kernel's side of a fabricated tree: what a plain folder does not do by itself."""

    base: Path
    #: Mount point -> version (1 or 2) and, for v1, the controllers of that hierarchy.
    hierarchies: dict[Path, tuple[int, tuple[str, ...]]] = attrs.Factory(dict)
    lines: list[str] = attrs.Factory(list)
    own: dict[str, str] = attrs.Factory(dict)
    plain_write: Callable[[Path, str], None] = lambda path, value: None

    @property
    def roots(self) -> CgroupRoots:
        return CgroupRoots(
            mountinfo=self.base / "mountinfo",
            self_cgroup=self.base / "self-cgroup",
            proc=self.base / "proc",
        )

    def mount_v1(self, name: str, group: str = "/", *, mount_root: str = "/") -> Path:
        """Mount v1's ``name`` hierarchy (its ``mount_root`` group only), the agent in ``group``."""
        point = self.base / name
        self.hierarchies[point] = (1, (name,))
        self.lines.append(
            f"{30 + len(self.lines)} 31 0:{40 + len(self.lines)} {mount_root} {point} rw,relatime "
            f"- cgroup cgroup rw,{name}"
        )
        self.own[name] = group
        return self._group(point, group.removeprefix(mount_root.rstrip("/")))

    def mount_v2(self, group: str = "/", *, enabled: str = "", point: str = "unified") -> Path:
        mount = self.base / point
        self.hierarchies[mount] = (2, ())
        self.lines.append(
            f"{30 + len(self.lines)} 31 0:{40 + len(self.lines)} / {mount} rw,relatime "
            "- cgroup2 cgroup2 rw"
        )
        self.own[""] = group
        folder = self._group(mount, group)
        for ancestor in [folder, *folder.parents]:
            (ancestor / "cgroup.controllers").write_text(enabled + "\n")
            (ancestor / "cgroup.subtree_control").write_text(enabled + "\n")
            if ancestor == mount:
                break
        return folder

    def _group(self, point: Path, group: str) -> Path:
        folder = point / group.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cgroup.procs").write_text(f"{PID}\n")
        return folder

    def boot(self, monkeypatch: pytest.MonkeyPatch) -> CgroupRoots:
        """Write the mount table and ``/proc/self/cgroup``, and take the kernel's part."""
        (self.base / "mountinfo").write_text(
            "22 1 0:21 / / rw - overlay overlay rw\n"
            "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
            + "".join(line + "\n" for line in self.lines)
        )
        self._write_self_cgroup()
        (self.base / "proc").mkdir()
        monkeypatch.setattr(cgroups, "_make_group", self.make_group)
        monkeypatch.setattr(cgroups, "_remove_group", self.remove_group)
        self.plain_write = cgroups._write  # for files the kernel just stores
        monkeypatch.setattr(cgroups, "_write", self.write)
        return self.roots

    def _write_self_cgroup(self) -> None:
        (self.base / "self-cgroup").write_text(
            "".join(
                f"{i if name else 0}:{name}:{group}\n"
                for i, (name, group) in enumerate(self.own.items(), start=1)
            )
        )

    def hierarchy(self, path: Path) -> Path:
        return next(point for point in self.hierarchies if path.is_relative_to(point))

    def make_group(self, group: Path) -> None:
        group.mkdir()  # FileExistsError as from the kernel
        version, names = self.hierarchies[self.hierarchy(group)]
        files = {"cgroup.procs": ""}
        if version == 1:
            for name in names:
                files |= V1_FILES[name]
        else:
            enabled = (group.parent / "cgroup.subtree_control").read_text().split()
            files |= {"cgroup.controllers": " ".join(enabled), "cgroup.subtree_control": ""}
            for name in enabled:
                files |= V2_FILES.get(name, {})
        for name, text in files.items():
            (group / name).write_text(text)

    def remove_group(self, group: Path) -> None:
        if not group.is_dir():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(group))
        busy = any(entry.is_dir() for entry in group.iterdir())
        if busy or any(_running(pid) for pid in _members(group)):
            raise OSError(errno.EBUSY, "Device or resource busy", str(group))
        shutil.rmtree(group)

    def write(self, path: Path, value: str) -> None:
        if not path.is_file():  # no file can be created in a cgroup file system
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        group = path.parent
        if path.name == "cgroup.procs":
            point = self.hierarchy(group)
            for procs in point.rglob("cgroup.procs"):
                procs.write_text(
                    "".join(f"{pid}\n" for pid in _members(procs.parent) if pid != int(value))
                )
            path.write_text("".join(f"{pid}\n" for pid in [*_members(group), int(value)]))
            if int(value) == PID and self.hierarchies[point][0] == 2:
                self.own[""] = "/" + str(group.relative_to(point)).removeprefix(".")
                self._write_self_cgroup()
        elif path.name == "cgroup.subtree_control":
            if _members(group):
                raise OSError(errno.EBUSY, "Device or resource busy", str(path))
            name = value.removeprefix("+")
            if name not in (group / "cgroup.controllers").read_text().split():
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
            enabled = path.read_text().split()
            path.write_text(" ".join(sorted({*enabled, name})) + "\n")
            for child in (entry for entry in group.iterdir() if entry.is_dir()):
                (child / "cgroup.controllers").write_text(path.read_text())
                for file, text in V2_FILES[name].items():
                    (child / file).write_text(text)
        else:
            self.plain_write(path, value)


Layout = Callable[[FakeKernel], None]


def v1(kernel: FakeKernel) -> None:
    """This machine: cgroup v1 with a pids and a memory hierarchy, the agent deeper in memory."""
    kernel.mount_v1("pids")
    kernel.mount_v1("memory", "/process_api/32d80b284cf9808b37518e726395d02c")


def v2_root(kernel: FakeKernel) -> None:
    """cgroup v2, the agent in the root group, where the controllers are enabled."""
    kernel.mount_v2("/", enabled="cpu memory pids", point="cgroup")


def v2_container_root(kernel: FakeKernel) -> None:
    """cgroup v2 in a container's own cgroup namespace, the agent alone at its root."""
    kernel.mount_v2("/", point="cgroup")
    (kernel.base / "cgroup" / "cgroup.controllers").write_text("cpu io memory pids\n")


def v2_delegated(kernel: FakeKernel) -> None:
    """cgroup v2, the agent alone in a scope with ``Delegate=yes`` (``systemd-run --scope``)."""
    scope = kernel.mount_v2(
        "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r8f1.scope",
        enabled="memory pids",
        point="cgroup",
    )
    (scope / "cgroup.subtree_control").write_text("\n")


def hybrid(kernel: FakeKernel) -> None:
    """systemd's hybrid layout: v1 controllers and an empty v2 hierarchy for tracking."""
    kernel.mount_v1("pids", "/user.slice")
    kernel.mount_v1("memory", "/user.slice")
    kernel.mount_v2("/user.slice/user-1000.slice/session-3.scope")


def hybrid_mixed(kernel: FakeKernel) -> None:
    """A hybrid layout whose pids controller is on v2 and memory controller on v1."""
    kernel.mount_v1("memory", "/user.slice")
    kernel.mount_v2("/", enabled="pids", point="unified")


LAYOUTS: dict[str, tuple[Layout, dict[str, tuple[str, int]]]] = {
    # Where each controller's sandbox groups are made, and with which version.
    "v1": (
        v1,
        {"pids": ("pids", 1), "memory": ("memory/process_api/32d80b284cf9808b37518e726395d02c", 1)},
    ),
    "v2-root": (v2_root, {"pids": ("cgroup", 2), "memory": ("cgroup", 2)}),
    "v2-container-root": (v2_container_root, {"pids": ("cgroup", 2), "memory": ("cgroup", 2)}),
    "v2-delegated": (
        v2_delegated,
        {
            name: (
                "cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-r8f1.scope",
                2,
            )
            for name in ("pids", "memory")
        },
    ),
    "hybrid": (hybrid, {"pids": ("pids/user.slice", 1), "memory": ("memory/user.slice", 1)}),
    "hybrid-mixed": (hybrid_mixed, {"pids": ("unified", 2), "memory": ("memory/user.slice", 1)}),
}


@pytest.fixture(params=list(LAYOUTS))
def layout(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]]:
    build, expected = LAYOUTS[request.param]
    kernel = FakeKernel(tmp_path)
    build(kernel)
    roots = kernel.boot(monkeypatch)
    return kernel, roots, {name: (tmp_path / where, v) for name, (where, v) in expected.items()}


def make(roots: CgroupRoots, sandbox_id: str = "sbx-1") -> SandboxGroups:
    return SandboxGroups(sandbox_id, max_processes=16, memory_bytes=300 * MIB, roots=roots)


def test_each_layout_gets_a_group_per_controller_with_its_limits(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
) -> None:
    _, roots, expected = layout

    groups = make(roots)

    assert groups.problems == {}
    assert {name: (c.parent, c.version) for name, c in controllers(roots=roots).items()} == (
        expected
    )
    name = f"{PREFIX}{PID}-sbx-1"
    assert groups.groups == {c: expected[c][0] / name for c in ("pids", "memory")}
    assert (groups.groups["pids"] / "pids.max").read_text() == "16"
    memory = groups.groups["memory"]
    if expected["memory"][1] == 1:
        assert (memory / "memory.limit_in_bytes").read_text() == str(300 * MIB)
        assert (memory / "memory.memsw.limit_in_bytes").read_text() == str(300 * MIB)
    else:
        assert (memory / "memory.max").read_text() == str(300 * MIB)
        assert (memory / "memory.swap.max").read_text() == "0"
    # One group per hierarchy: v2 holds both controllers in one, joined once.
    assert sorted(groups.procs_files) == sorted(
        {str(group / "cgroup.procs") for group in groups.groups.values()}
    )


def test_each_layout_reads_refused_forks_and_oom_kills_from_the_groups(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
) -> None:
    _, roots, expected = layout
    groups = make(roots)
    assert groups.counters() == cgroups.Counters(0, 0)

    (groups.groups["pids"] / "pids.events").write_text("max 3\n")
    events = "memory.oom_control" if expected["memory"][1] == 1 else "memory.events"
    (groups.groups["memory"] / events).write_text("oom 2\noom_kill 2\n")

    assert groups.counters() == cgroups.Counters(refused_forks=3, oom_kills=2)


def meminfo(roots: CgroupRoots, swap_kib: int) -> None:
    (roots.proc / "meminfo").write_text(
        "MemTotal:        8041540 kB\n"
        "SwapCached:            0 kB\n"
        f"SwapTotal:      {swap_kib:>8} kB\n"
    )


def test_each_layout_bounds_memory_with_its_group_where_swap_is_limited_too(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
) -> None:
    _, roots, _ = layout
    meminfo(roots, 2097148)

    assert make(roots).bounds_memory is True


@pytest.mark.parametrize(
    ("swap_kib", "bounded"), [(2097148, False), (0, True), (None, False)], ids=str
)
def test_each_layout_bounds_memory_with_a_group_that_cannot_limit_swap_only_without_swap(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
    monkeypatch: pytest.MonkeyPatch,
    swap_kib: int | None,
    bounded: bool,
) -> None:
    # A kernel without swap accounting (swapaccount=0) has no memsw or swap.max files.
    monkeypatch.delitem(V1_FILES["memory"], "memory.memsw.limit_in_bytes")
    monkeypatch.delitem(V2_FILES["memory"], "memory.swap.max")
    _, roots, _ = layout
    if swap_kib is not None:  # None: meminfo cannot be read, so swap is assumed
        meminfo(roots, swap_kib)

    groups = make(roots)

    assert "memory" in groups.groups
    assert groups.bounds_memory is bounded


def test_each_layout_removes_groups_of_agents_no_longer_running_and_keeps_the_others(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
) -> None:
    kernel, roots, expected = layout
    dead = subprocess.Popen(["true"])
    dead.wait()
    planted = {}
    for name, (parent, _) in expected.items():
        planted[name] = {
            "stale": parent / f"{PREFIX}{dead.pid}-sbx-old",
            "alive": parent / f"{PREFIX}{PID}-sbx-other",
            "foreign": parent / "someone-else",
        }
        for folder in planted[name].values():
            if not folder.exists():
                kernel.make_group(folder)

    make(roots)

    for name in expected:
        assert not planted[name]["stale"].exists()
        assert planted[name]["alive"].exists()
        assert planted[name]["foreign"].exists()


def test_each_layout_kills_what_a_dead_agent_left_running_before_removing_its_groups(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
) -> None:
    # A SIGKILL can land before bwrap arms its parent-death signal: a sandbox process then
    # outlives its agent, in the agent's group, until the next run kills it.
    kernel, roots, expected = layout
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = {
            name: parent / f"{PREFIX}{dead.pid}-sbx-old" for name, (parent, _) in expected.items()
        }
        for group in stale.values():
            if not group.exists():
                kernel.make_group(group)
            kernel.write(group / "cgroup.procs", str(left.pid))
        (roots.proc / str(left.pid)).mkdir()
        (roots.proc / str(left.pid) / "cgroup").write_text(
            "".join(f"{i}:x:/a/{group.name}\n" for i, group in enumerate(stale.values()))
        )

        make(roots)

        assert left.wait(timeout=5) == -9
        assert [group for group in stale.values() if group.exists()] == []
    finally:
        left.kill()
        left.wait()


def test_each_layout_kills_what_is_left_in_the_groups_and_removes_them(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
) -> None:
    kernel, roots, _ = layout
    groups = make(roots)
    member = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for group in groups.groups.values():
            kernel.write(group / "cgroup.procs", str(member.pid))
        (roots.proc / str(member.pid)).mkdir()
        (roots.proc / str(member.pid) / "cgroup").write_text(
            "".join(f"{i}:x:/a/{group.name}\n" for i, group in enumerate(groups.groups.values()))
        )
        paths = list(groups.groups.values())

        groups.kill_and_remove(wait_seconds=0.2)

        assert member.wait(timeout=5) == -9
        assert [path for path in paths if path.exists()] == []
        assert groups.groups == {}
    finally:
        member.kill()
        member.wait()


def test_each_layout_tells_whether_a_process_is_in_every_group_of_the_sandbox(
    layout: tuple[FakeKernel, CgroupRoots, dict[str, tuple[Path, int]]],
) -> None:
    # What the agent checks of a sandbox's first process before it may start bwrap.
    _, roots, expected = layout
    groups = make(roots)
    pid = 4242  # never signalled: only its fabricated /proc entry is read
    (roots.proc / str(pid)).mkdir()

    def shows(where: dict[str, str]) -> None:
        """Write the process's ``/proc/PID/cgroup``: the group it is in, per controller."""
        lines = [
            f"{i}:{controller}:/a/{group}" if expected[controller][1] == 1 else f"0::/a/{group}"
            for i, (controller, group) in enumerate(where.items(), start=1)
        ]
        (roots.proc / str(pid) / "cgroup").write_text("".join(line + "\n" for line in lines))

    name = f"{PREFIX}{PID}-sbx-1"
    shows({"pids": name, "memory": name})
    assert groups.holds(pid)
    shows({"pids": name, "memory": "agent"})
    assert not groups.holds(pid)
    shows({"memory": name, "pids": "agent"})
    assert not groups.holds(pid)
    (roots.proc / str(pid) / "cgroup").unlink()  # gone
    assert not groups.holds(pid)


def test_v2_agent_alone_in_its_delegated_group_moves_into_a_leaf_beside_its_sandboxes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = FakeKernel(tmp_path)
    v2_delegated(kernel)
    roots = kernel.boot(monkeypatch)
    scope = (
        tmp_path / "cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-r8f1.scope"
    )

    first = make(roots, "sbx-1")
    second = make(roots, "sbx-2")

    # The kernel (here: FakeKernel) refuses controllers for the children of a group with
    # processes: they were enabled only after the agent had left the scope for its leaf.
    assert first.problems == second.problems == {}
    assert (scope / "cgroup.subtree_control").read_text().split() == ["memory", "pids"]
    assert _members(scope) == []
    assert _members(scope / LEAF) == [PID]
    assert roots.self_cgroup.read_text().endswith(f"run-r8f1.scope/{LEAF}\n")
    assert sorted(p.name for p in scope.iterdir() if p.is_dir()) == [
        LEAF,
        f"{PREFIX}{PID}-sbx-1",
        f"{PREFIX}{PID}-sbx-2",
    ]
    first.kill_and_remove()
    second.kill_and_remove()
    assert [p.name for p in scope.iterdir() if p.is_dir()] == [LEAF]


def test_v2_leaf_of_an_agent_no_longer_running_is_removed_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = FakeKernel(tmp_path)
    v2_container_root(kernel)
    roots = kernel.boot(monkeypatch)
    dead = subprocess.Popen(["true"])
    dead.wait()
    old_leaf = tmp_path / "cgroup" / f"{PREFIX}{dead.pid}-agent"
    kernel.make_group(old_leaf)

    groups = make(roots)

    assert groups.problems == {}
    assert not old_leaf.exists()
    assert (tmp_path / "cgroup" / LEAF).is_dir()


SESSION = "/user.slice/user-1000.slice/session-3.scope"


@pytest.mark.parametrize(
    ("delegated", "why"),
    [
        ("memory pids", "holds other processes than the agent (812, 813)"),
        ("", "controller is not delegated to the cgroup v2 group"),
    ],
    ids=["shared-with-the-login-shell", "no-controllers"],
)
def test_v2_session_scope_without_delegation_falls_back_to_rlimits_and_doctor_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delegated: str, why: str
) -> None:
    kernel = FakeKernel(tmp_path)
    scope = kernel.mount_v2(SESSION, enabled=delegated, point="cgroup")
    (scope / "cgroup.subtree_control").write_text("\n")
    (scope / "cgroup.procs").write_text(f"812\n813\n{PID}\n")
    roots = kernel.boot(monkeypatch)

    groups = make(roots)

    assert groups.groups == {}
    assert set(groups.problems) == {"pids", "memory"}
    assert all(why in problem for problem in groups.problems.values()), groups.problems
    assert _members(scope) == [812, 813, PID]  # nobody was moved
    assert [p for p in scope.iterdir() if p.is_dir()] == []

    limits = SeedLimits()
    answer: dict[str, object] = {
        "rlimits": {
            "RLIMIT_AS": address_space(limits),
            "RLIMIT_STACK": THREAD_STACK,
            "RLIMIT_CPU": int(limits.cpu_seconds),
            "RLIMIT_FSIZE": limits.max_file_mb * MIB,
            "RLIMIT_NPROC": 300,
        },
        "malloc_arena_max": "1",
        "disk": {"/workspace": limits.disk_mb * MIB},
    }
    findings = {f.item: f for f in checks._limit_findings(answer, groups, None)}
    assert findings["limit processes"].ok
    assert findings["limit processes"].detail.startswith("RLIMIT_NPROC only")
    assert why in findings["limit processes"].detail
    assert why in findings["limit memory"].detail


def test_no_cgroup_hierarchy_at_all_says_so_for_each_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = FakeKernel(tmp_path).boot(monkeypatch)

    groups = make(roots)

    assert groups.groups == {}
    assert groups.problems == {
        name: f"no cgroup v1 {name} hierarchy is mounted, and no cgroup v2 hierarchy is mounted"
        for name in ("pids", "memory")
    }
    assert groups.counters() == cgroups.Counters(refused_forks=None, oom_kills=None)
    assert groups.bounds_memory is False


def test_only_the_mounted_subtree_of_a_hierarchy_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container without a cgroup namespace of its own sees its group's full path, but only
    # that group is mounted (mountinfo's root field): its folder is the mount point itself.
    kernel = FakeKernel(tmp_path)
    kernel.mount_v1("pids", "/docker/4f2a", mount_root="/docker/4f2a")
    kernel.mount_v1("memory", "/docker/4f2a/sub", mount_root="/docker/4f2a")
    roots = kernel.boot(monkeypatch)

    groups = make(roots)

    assert groups.problems == {}
    assert groups.groups == {
        "pids": tmp_path / "pids" / f"{PREFIX}{PID}-sbx-1",
        "memory": tmp_path / "memory/sub" / f"{PREFIX}{PID}-sbx-1",
    }


def test_a_group_outside_the_mounted_subtree_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = FakeKernel(tmp_path)
    kernel.mount_v1("pids", "/docker/4f2a", mount_root="/docker/4f2a")
    kernel.own["pids"] = "/docker/other"
    roots = kernel.boot(monkeypatch)

    groups = make(roots)

    assert "pids" not in groups.groups
    assert groups.problems["pids"].startswith(
        "this process's pids group /docker/other is outside the mounted hierarchy"
    )

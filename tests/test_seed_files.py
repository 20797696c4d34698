"""Seed files are read without following links: nothing outside the seed folder gets out.

A seed folder may come from anyone, and what is read from it goes to the sandbox
and to the model provider. A hard link in a folder named on the command line, or
a link, a FIFO or a folder swapped in after the manifest was checked, is refused
with one message naming the file; the secret behind it is never read.
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import AgentRun, FakeProvider
from test_manifest import FIXED, make_seed

from sandboxed_coding_agent.core.errors import UsageError
from sandboxed_coding_agent.core.hookspecs import hookimpl
from sandboxed_coding_agent.core.model import SeedProject
from sandboxed_coding_agent.core.plugins import PluginHost
from sandboxed_coding_agent.core.seeds import manifest as manifest_module
from sandboxed_coding_agent.core.seeds import seed_files
from sandboxed_coding_agent.core.seeds.manifest import ManifestError, load_seed
from sandboxed_coding_agent.core.seeds.seed_files import SeedFileError

SECRET = "TOP-SECRET-3f9a1c7e-not-for-the-provider\n"
HARD_LINK = (
    "is a hard link (2 names for one file): it could be any file of this "
    "machine; replace it with a copy (in the seed folder: "
    "cp stats/mean.py stats/mean.py.copy && mv stats/mean.py.copy stats/mean.py)"
)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside the seed folder that must never be read as part of the seed."""
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_seed(tmp_path / "stats")


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail the test, instead of hanging the suite, if reading blocks (on a FIFO, say)."""

    def give_up(signum: int, frame: object) -> None:
        raise TimeoutError("reading the seed blocked")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def hard_link(secret: Path, path: Path) -> None:
    path.unlink()
    os.link(secret, path)


def refused(seed: SeedProject) -> str:
    with pytest.raises(SeedFileError) as caught:
        seed.read_files()
    assert isinstance(caught.value, UsageError)  # exit 2, one line, no traceback
    message = caught.value.message
    assert SECRET.strip() not in message
    assert "\n" not in message
    return message


# --- hard links -------------------------------------------------------------------------------


def test_a_hard_linked_file_in_a_folder_seed_is_refused_when_the_manifest_is_read(
    folder: Path, secret: Path
) -> None:
    hard_link(secret, folder / "stats" / "mean.py")

    with pytest.raises(ManifestError) as caught:
        load_seed(folder)

    assert (
        caught.value.message
        == f"{folder / 'seed.toml'}: line 3: files: 'stats/mean.py': {HARD_LINK}"
    )


def test_a_hard_linked_file_matched_by_the_default_pattern_is_refused(
    folder: Path, secret: Path
) -> None:
    manifest = (folder / "seed.toml").read_text()
    make_seed(folder, manifest.replace('files = ["stats/*.py", "tests/*.py"]\n', ""))
    hard_link(secret, folder / "stats" / "mean.py")

    with pytest.raises(ManifestError) as caught:
        load_seed(folder)

    assert caught.value.message == f"{folder / 'seed.toml'}: files: 'stats/mean.py': {HARD_LINK}"


def test_a_hard_link_made_after_the_manifest_was_read_is_refused_when_reading(
    folder: Path, secret: Path
) -> None:
    seed = load_seed(folder)
    assert seed.untrusted
    hard_link(secret, folder / "stats" / "mean.py")

    assert refused(seed) == f"seed file 'stats/mean.py' {HARD_LINK}"


def test_a_hard_linked_folder_seed_is_refused_by_the_cli_before_any_sandbox(
    folder: Path,
    secret: Path,
    provider: FakeProvider,
    run_agent: Callable[..., AgentRun],
    write_plan: Callable[[Any], Path],
) -> None:
    hard_link(secret, folder / "stats" / "mean.py")
    plan = write_plan({"files": [{"path": "stats/mean.py", "content": FIXED}]})
    expected = f"{folder / 'seed.toml'}: line 3: files: 'stats/mean.py': {HARD_LINK}"

    run = run_agent("run", "--seed", str(folder), "--plan", str(plan), "--json")
    shown = run_agent("seeds", "show", str(folder))
    validated = run_agent("validate", str(plan), "--seed", str(folder))

    assert run.returncode == 2, run.stderr
    error = run.json()["error"]
    assert (error["kind"], error["message"], error["sandbox_id"]) == ("usage", expected, None)
    assert "testing in runner" not in run.stderr
    assert run.sandboxes == []
    assert provider.requests == []
    for done in (shown, validated):
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [f"agent: usage error: {expected}"]
    for done in (run, shown, validated):
        assert SECRET.strip() not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr


class ShipsAFolderSeed:
    """A plugin whose seed is a folder it reads with ``load_seed``, as installed packages do."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @hookimpl
    def register_seeds(self, register: Callable[[SeedProject], None]) -> None:
        register(load_seed(self.root))


def test_a_plugin_seed_may_hold_hard_links_since_installers_make_them(
    folder: Path, tmp_path: Path
) -> None:
    # uv hard-links an installed package's files from its cache: each has two names.
    cache = tmp_path / "installer-cache-mean.py"
    os.link(folder / "stats" / "mean.py", cache)

    host = PluginHost(entry_points=False, plugins={"ships_a_folder": ShipsAFolderSeed(folder)})

    assert host.problems == []
    seed = host.seed("stats")
    assert not seed.untrusted
    assert seed.read_files()["stats/mean.py"] == cache.read_bytes()
    # The same folder named on the command line is a folder of unknown origin.
    with pytest.raises(ManifestError, match="is a hard link"):
        host.seed(str(folder))


def test_a_plugin_seed_still_refuses_a_symbolic_link(folder: Path, secret: Path) -> None:
    seed = load_seed(folder, untrusted=False)
    (folder / "stats" / "mean.py").unlink()
    os.symlink(secret, folder / "stats" / "mean.py")

    assert "is (or passes through) a symbolic link" in refused(seed)


# --- what is swapped in after the manifest was checked -----------------------------------------


def test_a_symbolic_link_swapped_in_after_the_check_is_not_followed(
    folder: Path, secret: Path
) -> None:
    seed = load_seed(folder)
    (folder / "stats" / "mean.py").unlink()
    os.symlink(secret, folder / "stats" / "mean.py")

    assert refused(seed) == (
        "seed file 'stats/mean.py' is (or passes through) a symbolic link: it could be any "
        "file of this machine; seed files must be inside the seed folder"
    )


def test_a_folder_swapped_for_a_symbolic_link_after_the_check_is_not_followed(
    folder: Path, secret: Path, tmp_path: Path
) -> None:
    seed = load_seed(folder)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "__init__.py").write_text("")
    (elsewhere / "mean.py").write_text(SECRET)
    (folder / "stats").rename(tmp_path / "stats-moved")
    os.symlink(elsewhere, folder / "stats")

    assert refused(seed).startswith(
        "seed file 'stats/__init__.py' is (or passes through) a symbolic link"
    )


@pytest.mark.usefixtures("no_hang")
def test_a_fifo_swapped_in_after_the_check_is_refused_at_once(folder: Path) -> None:
    seed = load_seed(folder)
    (folder / "stats" / "mean.py").unlink()
    os.mkfifo(folder / "stats" / "mean.py")

    assert refused(seed) == "seed file 'stats/mean.py' is not a regular file (a FIFO)"


def test_a_device_swapped_in_after_the_check_is_refused(folder: Path) -> None:
    seed = load_seed(folder)
    (folder / "stats" / "mean.py").unlink()
    try:
        os.mknod(folder / "stats" / "mean.py", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")

    assert refused(seed) == "seed file 'stats/mean.py' is not a regular file (a character device)"


def swap_right_after_the_look(
    monkeypatch: pytest.MonkeyPatch, name: str, swap: Callable[[], None]
) -> None:
    """Swap the seed file the moment the reader has looked at it, before it opens it.

    The widest window an attacker can hope for, made deterministic: what is then
    opened must be refused by how it is opened, not by the look.
    """
    real_stat = os.stat
    pending = [swap]

    def stat_then_swap(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        result = real_stat(path, *args, **kwargs)
        if path == name and kwargs.get("dir_fd") is not None and pending:
            pending.pop()()
        return result

    monkeypatch.setattr(os, "stat", stat_then_swap)


@pytest.mark.usefixtures("no_hang")
@pytest.mark.parametrize(
    ("swapped_in", "expected"),
    [
        ("symlink", "is (or passes through) a symbolic link"),
        ("fifo", "is not a regular file (a FIFO)"),
    ],
)
def test_an_entry_swapped_in_between_look_and_open_is_refused(
    folder: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, swapped_in: str, expected: str
) -> None:
    seed = load_seed(folder)
    target = folder / "stats" / "mean.py"

    def swap() -> None:
        target.unlink()
        if swapped_in == "symlink":
            os.symlink(secret, target)
        else:
            os.mkfifo(target)

    swap_right_after_the_look(monkeypatch, "mean.py", swap)

    assert refused(seed).startswith(f"seed file 'stats/mean.py' {expected}")


# --- bounds -----------------------------------------------------------------------------------


def test_files_past_the_seed_bound_are_refused_without_reading_them(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = load_seed(folder)
    sizes = {path: (folder / path).stat().st_size for path in seed.files}
    monkeypatch.setattr(seed_files, "MAX_SEED_BYTES", sum(sizes.values()) - 1)

    message = refused(seed)

    assert message == (
        f"seed file 'tests/test_mean.py' takes the seed past {sum(sizes.values()) - 1} bytes "
        "in all, the most a seed may hold"
    )


def test_a_file_that_grows_while_it_is_read_is_refused_and_read_no_further(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = load_seed(folder)
    target = folder / "stats" / "mean.py"
    size = target.stat().st_size
    real_fstat, real_read = os.fstat, os.read
    read: list[int] = []

    def fstat_then_grow(fd: int) -> os.stat_result:
        result = real_fstat(fd)
        if result.st_ino == target.stat().st_ino and not read:
            with target.open("a") as handle:
                handle.write("x" * 100_000)
        return result

    def counted_read(fd: int, count: int) -> bytes:
        data = real_read(fd, count)
        if real_fstat(fd).st_ino == target.stat().st_ino:
            read.append(len(data))
        return data

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    monkeypatch.setattr(os, "read", counted_read)

    message = refused(seed)

    assert message.startswith(
        f"seed file 'stats/mean.py' changed while it was read (it was {size} bytes when opened)"
    )
    assert sum(read) == size + 1


def test_a_path_with_dot_dot_is_never_opened(tmp_path: Path, secret: Path) -> None:
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "app.py").write_text("")
    # A plugin's SeedProject is not checked like a manifest: the reader checks it itself.
    seed = SeedProject(
        name="escape",
        description="names a file outside its folder",
        root=tmp_path / "seed",
        files=("app.py", "../secret.txt"),
        editable_paths=("app.py",),
        test_command=("true",),
        default_prompt="",
    )

    assert refused(seed) == (
        "seed file '../secret.txt' has an empty, '.' or '..' segment; "
        "seed files are inside the folder"
    )


def test_the_built_in_seed_reads_as_before() -> None:
    seed = PluginHost(entry_points=False).seed("calculator")

    assert not seed.untrusted
    assert seed.read_files() == {path: (seed.root / path).read_bytes() for path in seed.files}


# --- the folder itself swapped -----------------------------------------------------------------


def decoy_with_secret(tmp_path: Path) -> Path:
    """A folder laid out as the seed, whose ``stats/mean.py`` holds the secret."""
    decoy = make_seed(tmp_path / "decoy")
    (decoy / "stats" / "mean.py").write_text(SECRET)
    return decoy


def test_a_seed_folder_swapped_for_another_after_loading_is_not_read(
    tmp_path: Path, folder: Path
) -> None:
    seed = load_seed(folder)
    decoy = decoy_with_secret(tmp_path)
    folder.rename(tmp_path / "original")
    folder.symlink_to(decoy)

    message = refused(seed)

    assert "is no longer the folder its seed.toml was read from" in message


def test_a_seed_folder_swapped_while_its_manifest_is_read_is_never_looked_into(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The swap happens right after the manifest was read, before the folder is listed: the
    # listing and every check are made in the folder the manifest came from.
    decoy = decoy_with_secret(tmp_path)
    (decoy / "stats" / "only_in_decoy.py").write_text(SECRET)
    parse = manifest_module.tomllib.loads

    def parse_then_swap(text: str) -> dict[str, Any]:
        folder.rename(tmp_path / "original")
        folder.symlink_to(decoy)
        return parse(text)

    monkeypatch.setattr(manifest_module.tomllib, "loads", parse_then_swap)
    seed = load_seed(folder)
    monkeypatch.undo()

    assert "stats/only_in_decoy.py" not in seed.files
    refused(seed)

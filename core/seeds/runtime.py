"""Seed runtimes: a virtual environment per Python version and requirements, made once with uv.

A runner whose sandboxes run on this machine calls :func:`prepare_runtime` for a
job's :attr:`~sandboxed_coding_agent.core.model.SandboxJob.runtime` (from its
``prepare``, and again from ``run_test``, where it is found ready), then gives
its sandbox the environment read-only, at the same path, with the
:attr:`PreparedRuntime.python` it returns as the test command's ``python``. The
built-in local sandbox does exactly that.

A runtime is prepared on the host before any sandbox starts, with network (uv
downloads what its cache lacks), in an environment holding only what an
installer needs (paths, locale, certificates, proxies, ``UV_*`` settings):
never the caller's other variables, the provider's key among them. It is
cached under ``$XDG_CACHE_HOME/sandboxed-coding-agent/runtimes/<key>`` (by
default ``~/.cache/...``), where the key is a hash of everything the install
depends on (the Python, the requirements, whether the seed tests its project
and that project's dependencies, :data:`RECIPE`), and bound read-only into
every sandbox that needs it, at the same path, so its scripts' ``#!`` lines
work there. A lock file keeps two agents from building the same runtime at
once, and a record written last, beside the environment (``<key>.json``) since
a package may put any file inside it, tells a finished runtime from one whose
build was interrupted.

The requirements come from the seed, which may be a folder someone downloaded,
and whoever published a package chose its content. So nothing of the packages
runs on the host: uv installs wheels only (building a source distribution
would run its build backend), the environment's interpreter is asked where it
lives before anything is installed, and bytecode is compiled by the base
interpreter without its ``site`` (a ``.pth`` file runs whenever ``site`` reads
it). uv runs in the cache folder, so the configuration it discovers from the
current folder (a downloaded seed's ``uv.toml`` or ``pyproject.toml``, which
could name another index or install somewhere else) is never the seed's.

A runtime with :attr:`~sandboxed_coding_agent.core.model.SeedRuntime.project` gets
the project's dependencies (read by the manifest from its ``pyproject.toml``,
``setup.cfg`` or ``setup.py``, never run: :mod:`.project_metadata`) as more
requirements, a ``.pth`` file naming the sandbox's project folder
(:data:`PROJECT_FOLDER`, and its ``src``), so the test imports the patched files
where the sandbox has them, and the ``.dist-info`` folder an editable install
would leave (name, version, requirements, entry points), so the project's
metadata and plugins are found. The project itself is never built: its
``setup.py`` or build backend would be its author's code running on the host.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from ..errors import SandboxError
from ..model import SeedRuntime
from .project_metadata import ProjectMetadata

Progress = Callable[[str], None]
CACHE_FOLDER = Path("sandboxed-coding-agent", "runtimes")
#: How runtimes are built; part of the key, so a runtime built another way is never reused.
RECIPE = 5
#: Where a sandbox that uses a prepared runtime has the project under test (and runs the test).
PROJECT_FOLDER = "/workspace"
#: The runtime's ``.pth`` file putting the project's folders on ``sys.path``.
PROJECT_PATH_FILE = "_sandboxed_coding_agent_project.pth"
UV_TIMEOUT_SECONDS = 900

#: What uv may see of the caller's environment; everything else stays out.
_INSTALLER_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
    }
)


def _silent(_: str) -> None:
    pass


@attrs.frozen
class PreparedRuntime:
    """A finished runtime on this machine.

    :ivar root: the virtual environment; a sandbox needs it read-only, at this same
        path (its scripts' ``#!`` lines name it).
    :ivar python: its interpreter, which a leading ``python`` in a test command means.
    :ivar base_prefixes: where the interpreter's own installation is
        (``sys.base_prefix``, ``sys.base_exec_prefix``): the standard library is
        under their ``lib``, which a sandbox needs read-only too.
    """

    root: Path
    python: str
    base_prefixes: tuple[str, ...]

    @property
    def bin_dir(self) -> str:
        """The environment's scripts (``pytest``, say): what goes first on the test's ``PATH``."""
        return str(self.root / "bin")


def cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """Where runtimes are kept, following the XDG base directory rules."""
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / CACHE_FOLDER


def python_spec(runtime: SeedRuntime) -> str:
    """What uv is asked for: the version, or the agent's own interpreter when none is given."""
    return runtime.python or os.path.realpath(sys.executable)


def runtime_key(runtime: SeedRuntime) -> str:
    data = json.dumps(
        {
            "python": python_spec(runtime),
            "requirements": runtime.requirements,
            "project": runtime.project,
            "project_requirements": runtime.project_requirements,
            "project_metadata": (
                None if runtime.project_metadata is None else attrs.asdict(runtime.project_metadata)
            ),
            "machine": f"{sys.platform}-{os.uname().machine}",
            "recipe": RECIPE,
        }
    )
    return hashlib.sha256(data.encode()).hexdigest()[:24]


def uv_executable() -> str | None:
    return shutil.which("uv")


def installer_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The caller's environment cut down to what an installer needs; never a provider variable."""
    return {
        name: value
        for name, value in environ.items()
        if (name in _INSTALLER_VARIABLES or name.startswith("UV_")) and "CODING_AGENT" not in name
    }


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _record(root: Path) -> Path:
    """Where the agent records that the runtime at ``root`` is ready: outside it."""
    return root.with_name(f"{root.name}.json")


def _load(root: Path) -> PreparedRuntime | None:
    try:
        data = json.loads(_record(root).read_text())
        return PreparedRuntime(root, data["python"], tuple(data["base_prefixes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _uv(uv: str, arguments: list[str], progress: Progress, *, cwd: Path) -> None:
    """Run uv in ``cwd``, each line it prints going to ``progress``; if it fails, raise with its
    last lines."""
    last: deque[str] = deque(maxlen=8)
    try:
        process = subprocess.Popen(
            [uv, *arguments],
            cwd=cwd,
            env=installer_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as error:
        raise SandboxError(f"could not run uv to prepare the seed runtime: {error}") from None
    assert process.stdout is not None
    try:
        for line in process.stdout:
            if line.strip():
                last.append(line.rstrip())
                progress(f"  uv: {line.rstrip()}")
        process.wait(timeout=UV_TIMEOUT_SECONDS)
    except BaseException:  # Ctrl-C, SIGTERM, timeout: uv must not go on alone
        process.kill()
        process.wait()
        raise
    finally:
        process.stdout.close()
    if process.returncode != 0:
        raise SandboxError(
            f"could not prepare the seed runtime: `uv {arguments[0]} {arguments[1]}` failed: "
            + " / ".join(last)
        )


def _prefixes_of(python: Path) -> tuple[str, ...]:
    """Where a venv's interpreter has its installation (its standard library).

    Ask before anything is installed in the venv, and without ``site``: then no
    package's code runs here.
    """
    probe = "import json, sys; print(json.dumps([sys.base_prefix, sys.base_exec_prefix]))"
    done = subprocess.run(
        [str(python), "-I", "-S", "-c", probe],
        env={},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise SandboxError(f"the prepared runtime's Python does not start: {done.stderr.strip()}")
    return tuple(dict.fromkeys(json.loads(done.stdout)))


def _compile(interpreter: str, root: Path) -> None:
    """Compile the venv's modules ahead, since the sandbox sees them read-only.

    ``interpreter`` is the base interpreter, found before anything was installed;
    it runs without ``site``, so compiling reads the files and imports none of
    them. A module that does not compile is left to fail where it is imported.
    """
    try:
        subprocess.run(
            [interpreter, "-I", "-S", "-m", "compileall", "-q", str(root / "lib")],
            env={},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=UV_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SandboxError("compiling the seed runtime's modules took too long") from None


def _install_project_metadata(root: Path, metadata: ProjectMetadata | None) -> None:
    """Leave the project's ``.dist-info`` folder in the environment, as an editable install
    would: metadata and entry points, read from the project's files, never built."""
    if metadata is None or not metadata.name:
        return
    folder = _site_packages(root) / metadata.folder_name
    if folder.exists():
        raise SandboxError(
            f"the project under test is named {metadata.name} {metadata.version}, as a "
            "requirement installed in its runtime is: leave that requirement out"
        )
    folder.mkdir()
    for name, text in metadata.files().items():
        (folder / name).write_text(text, encoding="utf-8")


def _site_packages(root: Path) -> Path:
    found = sorted(root.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise SandboxError(f"the prepared runtime has no single site-packages folder in {root}")
    return found[0]


def _put_project_on_path(root: Path) -> None:
    """Name the sandbox's project folder in a ``.pth`` file of the environment.

    ``src`` first, for a src layout; ``site`` skips a line naming a folder the
    project lacks. The lines are read before ``sitecustomize`` is imported, so the
    environment gets an empty one of its own (unless a package brought one):
    ``site`` then never imports a project's ``sitecustomize.py`` from the project
    folder, before the sandbox's harness has started.
    """
    site_packages = _site_packages(root)
    folders = (f"{PROJECT_FOLDER}/src", PROJECT_FOLDER)
    (site_packages / PROJECT_PATH_FILE).write_text("".join(f"{f}\n" for f in folders))
    customize = site_packages / "sitecustomize.py"
    if not customize.exists():
        customize.write_text("# Here so that site never imports a project's sitecustomize.py.\n")


def prepare_runtime(runtime: SeedRuntime, progress: Progress = _silent) -> PreparedRuntime:
    """The runtime's environment, built with uv the first time and reused after.

    Safe to call from several threads and agents at once: one builds, the others
    wait and reuse it. Slow the first time (uv may download the interpreter and
    the packages); instant after.

    :param runtime: the seed's runtime (``job.runtime``).
    :param progress: called with one line at a time while it builds (uv's own lines
        start with ``"  uv: "``); nothing is said when the runtime is ready already.
    :raises SandboxError: uv is missing or fails (the message carries its last lines).
    """
    root = cache_root() / runtime_key(runtime)
    found = _load(root)
    if found is not None:
        return found
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f"{root.name}.lock"):
        found = _load(root)  # another agent may have built it while this one waited
        if found is not None:
            return found
        uv = uv_executable()
        if uv is None:
            raise SandboxError(
                "the seed declares a runtime, and preparing it needs uv, which is not on PATH: "
                "install it (https://docs.astral.sh/uv/), then check with `agent doctor`"
            )
        _record(root).unlink(missing_ok=True)  # one that does not load: no agent may use it
        shutil.rmtree(root, ignore_errors=True)  # what an interrupted build left
        requirements = (*runtime.requirements, *runtime.project_requirements)
        wanted = ", ".join(requirements) or "no requirements"
        if runtime.project:
            wanted += f"; the project under test from {PROJECT_FOLDER}"
        progress(
            f"preparing the seed runtime (Python {runtime.python or 'as the agent'}; {wanted}) "
            f"in {root}; later runs reuse it"
        )
        try:
            venv = ["venv", "--no-project", "--python", python_spec(runtime), str(root)]
            _uv(uv, venv, progress, cwd=root.parent)
            python = root / "bin" / "python"
            interpreter = os.path.realpath(python)
            prepared = PreparedRuntime(root, str(python), _prefixes_of(python))
            if requirements:
                install = ["pip", "install", "--python", str(python), "--no-build"]
                _uv(uv, [*install, "--", *requirements], progress, cwd=root.parent)
            if runtime.project:
                _put_project_on_path(root)
                _install_project_metadata(root, runtime.project_metadata)
            if requirements or runtime.project:
                _compile(interpreter, root)
            record = {"python": prepared.python, "base_prefixes": list(prepared.base_prefixes)}
            partial = _record(root).with_suffix(".partial")
            partial.write_text(json.dumps(record))
            partial.replace(_record(root))
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        progress("the seed runtime is ready")
        return prepared

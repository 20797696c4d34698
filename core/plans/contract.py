"""The patch contract: what shape a plan has and which plans may reach a sandbox.

Both halves are used twice, by the planner on the model's answer and by the
orchestrator again before anything is uploaded, so a planner running elsewhere
is never trusted on its word.

Rules beyond the minimal contract, each there to protect the person reviewing a patch:

* ``content-invisible``: Unicode bidirectional controls (U+202A..U+202E,
  U+2066..U+2069) are rejected ("Trojan Source": they make code read
  differently from how it runs), as are DEL (U+007F) and the C1 controls
  (U+0080..U+009F), which terminals do not show.
* ``plan-json``: an object with a repeated key is rejected, because JSON
  parsers disagree on which value wins.
* ``path-control``: a path may not contain control characters (below U+0020,
  DEL or C1).
* ``test-infrastructure``: a plan may not create, change or delete a file that
  steers the test framework, at any depth and whatever the seed's editable
  patterns match (``test_infrastructure_problem``), unless the seed says
  ``[guard] allow = ["test-infrastructure"]``.

Every rejection about a file names it by its path as given, or by the path's
``repr`` when it is empty or holds characters a terminal would not show as they
are; a path over the length limit is cut there and ends in ``...``.
"""

from __future__ import annotations

import configparser
import json
import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ..errors import PlanRejected, ProviderError, Rejection
from ..seeds.project import LIMIT_CEILINGS, SeedLimits
from ..seeds.project import TEST_INFRASTRUCTURE as TEST_INFRASTRUCTURE
from ..serialization import describe_structure_error, structure
from .planning import PatchFile, PatchPlan

POLICY = "patch-contract"

_ALLOWED_CONTROLS = frozenset("\n\r\t")
_BIDI_CONTROLS = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))


def is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8; bytes that were not UTF-8 reach Python
    (from a file name, an argument or the environment) as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def raise_limit(key: str) -> str:
    """The end of a message refusing a plan for the limit ``key``: where a seed sets it,
    and the most it may be set to, so the user knows how to raise it."""
    ceiling = LIMIT_CEILINGS[key]
    return f" (the seed's [limits] {key} in its seed.toml; it may be set up to {ceiling})"


def describe(limits: SeedLimits) -> str:
    """What the contract allows a plan under ``limits``, in one line."""
    return (
        f"1 to {limits.max_files} whole-file replacements of editable paths, clean UTF-8 text, "
        f"{limits.max_total_bytes:,} bytes at most"
    )


def _reject(rule: str, message: str, path: str | None = None) -> Rejection:
    return Rejection(policy=POLICY, rule=rule, message=message, path=path)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"repeated key {', '.join(map(repr, repeated))}")
    return dict(pairs)


def parse_plan(text: str | bytes) -> PatchPlan:
    """Read a plan from JSON text: an object with exactly the key ``files``.

    For a plan a person gave (``agent run --plan FILE``, ``agent validate``): a
    malformed one is a refused plan (exit 4). A planner reading its backend's
    answer uses :func:`plan_from_answer` instead, so that an unusable answer is
    a provider error (exit 3) with the call's task ID.

    :raises PlanRejected: with rule ``plan-json`` or ``plan-shape``.
    """
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except (ValueError, RecursionError) as error:
        raise PlanRejected([_reject("plan-json", f"the plan is not valid JSON: {error}")]) from None
    return plan_from_data(data)


def plan_from_answer(answer: str | bytes | object, *, planner_task_id: str) -> PatchPlan:
    """Read a plan from a planner's answer: JSON text, or JSON data already decoded.

    For a planner whose backend (a model, a service, a file) answered with
    something that is not a plan at all: that is the backend's failure, not a
    plan a policy refused, so it is reported as a provider error (the command
    exits 3) naming the planner call. A well-formed plan that breaks the
    contract is still for :func:`validate_plan` (exit 4)::

        plan = validate_plan(
            plan_from_answer(text, planner_task_id=task_id),
            editable_paths=request.editable_paths,
            limits=request.limits,
            planner_task_id=task_id,
        )

    :param answer: the answer: ``str`` or ``bytes`` are parsed as JSON; anything
        else is taken as decoded JSON (a ``dict``).
    :param planner_task_id: the call's task ID, which the error carries.
    :raises ProviderError: the answer is not JSON or not a plan's shape; the
        message gives every reason, as ``parse_plan`` would.
    """
    try:
        if isinstance(answer, str | bytes):
            return parse_plan(answer)
        return plan_from_data(answer)
    except PlanRejected as error:
        reasons = "; ".join(rejection.message for rejection in error.rejections)
        raise ProviderError(
            f"the planner's answer is not a plan: {reasons}", planner_task_id=planner_task_id
        ) from None


def plan_from_data(data: object) -> PatchPlan:
    """Structure already-decoded JSON into a :class:`PatchPlan`, strictly.

    :raises PlanRejected: with rule ``plan-shape`` naming every problem.
    """
    plan = _plain_plan(data)
    if plan is not None:
        return plan
    try:
        return structure(data, PatchPlan)
    except Exception as error:  # cattrs raises a tree of ordinary exceptions
        problems = describe_structure_error(error, root="plan")
        raise PlanRejected(
            [_reject("plan-shape", f"{problem}; expected {_SHAPE}") for problem in problems]
        ) from None


_SHAPE = '{"files": [{"path": "...", "content": "..."}]}'


def _plain_plan(data: object) -> PatchPlan | None:
    """The plan when ``data`` has exactly a plan's shape, else ``None``.

    Only what the strict converter accepts is taken here, without it (making its
    code costs a run more than the rest of reading the plan); anything else goes
    to the converter, whose errors name every problem.
    """
    if not isinstance(data, dict) or data.keys() != {"files"}:
        return None
    entries = data["files"]
    if type(entries) is not list:
        return None
    files = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.keys() != {"path", "content"}:
            return None
        path, content = entry["path"], entry["content"]
        if not isinstance(path, str) or not isinstance(content, str):
            return None
        files.append(PatchFile(path=path, content=content))
    return PatchPlan(files=tuple(files))


def check_plan(
    plan: PatchPlan,
    *,
    editable_paths: Sequence[str],
    limits: SeedLimits,
    allow: Collection[str] | None = None,
    originals: Mapping[str, bytes] | None = None,
) -> list[Rejection]:
    """Every way ``plan`` breaks the contract for a seed; empty if it keeps it.

    :param allow: the seed's ``[guard] allow``; the ``test-infrastructure`` rule is
        checked unless it names :data:`TEST_INFRASTRUCTURE`. ``None``: the seed is not
        known here (a planner checking its own answer), and the rule is left to the
        seed's patch contract, which the orchestrator applies to every plan.
    :param originals: the seed's text of files the plan replaces, by path; the rule
        reads those ``needs_original`` names (a path missing here is a new file).
    """
    rejections: list[Rejection] = []
    count = len(plan.files)
    if not 1 <= count <= limits.max_files:
        rejections.append(
            _reject(
                "file-count",
                f"a plan replaces 1 to {limits.max_files} files; this one has {count}"
                + raise_limit("max_files"),
            )
        )
    seen: set[str] = set()
    total_bytes = 0
    for entry in plan.files:
        label = _label(entry.path, limits)
        rejections.extend(_path_problems(entry.path, label, editable_paths, limits))
        if entry.path in seen:
            rejections.append(_reject("path-duplicate", "the path appears twice", label))
        seen.add(entry.path)
        rejections.extend(_content_problems(entry.content, label))
        if allow is not None and TEST_INFRASTRUCTURE not in allow:
            before = (originals or {}).get(entry.path)
            original = None if before is None else before.decode("utf-8", "replace")
            problem = test_infrastructure_problem(entry.path, entry.content, original)
            if problem is not None:
                rejections.append(_reject(TEST_INFRASTRUCTURE, problem, label))
        total_bytes += len(entry.content.encode("utf-8", errors="replace"))
    if total_bytes > limits.max_total_bytes:
        rejections.append(
            _reject(
                "total-size",
                f"all files together are {total_bytes} UTF-8 bytes; "
                f"the limit is {limits.max_total_bytes}" + raise_limit("max_total_bytes"),
            )
        )
    return rejections


#: Files whose mere presence steers pytest: it reads them from the folder of the files it
#: is given and every folder above, or imports them on its own.
_FRAMEWORK_FILES = frozenset(
    {"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"}
)
#: Files of which pytest reads some sections only: those are compared with the seed's.
_SECTIONED_FILES = frozenset({"setup.cfg", "tox.ini", "pyproject.toml"})
#: Modules and packages that would be imported in place of the test framework, its
#: plugin machinery or the interpreter's start-up hooks when they stand on the import
#: path, which is, for a test run, the project's folders.
_SHADOWING_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "unittest",
        "sitecustomize",
        "usercustomize",
        "conftest",
    }
)
_HOOK = f'; a seed lets plans change it with [guard] allow = ["{TEST_INFRASTRUCTURE}"]'


def needs_original(path: str) -> bool:
    """Whether :func:`test_infrastructure_problem` compares ``path`` with the seed's text."""
    return path.rpartition("/")[2] in _SECTIONED_FILES


def test_infrastructure_problem(path: str, content: str | None, original: str | None) -> str | None:
    """Why no plan may give ``path`` the text ``content``, or ``None`` if one may.

    Refused, at any depth: ``conftest.py``, ``pytest.ini``, ``.pytest.ini``,
    ``pytest.toml`` and ``.pytest.toml``;
    ``setup.cfg`` and ``tox.ini`` whose sections named after pytest, and
    ``pyproject.toml`` whose tables and keys named after pytest, differ from the
    seed's (a new text that cannot be read and mentions pytest is refused too);
    a module or package named after the framework, its plugins or the interpreter's
    start-up hooks (:data:`_SHADOWING_MODULES`, and ``pytest_*``, the plugins'
    names); and any ``.pth`` file, which ``site`` runs at start-up.

    :param content: the new text; ``None`` for a deletion.
    :param original: the seed's text; ``None`` when the seed has no such file.
    """
    if content is not None and content == original:
        return None
    parts = path.split("/")
    name = parts[-1]
    if name in _FRAMEWORK_FILES:
        return f"pytest reads {name} wherever it stands, so it steers every test run" + _HOOK
    if name in _SECTIONED_FILES:
        changed = _pytest_settings_change(name, content, original)
        return None if changed is None else changed + _HOOK
    if name.endswith(".pth"):
        return "Python runs a .pth file's import lines as it starts" + _HOOK
    module = _shadowing_module(parts)
    if module is not None:
        return (
            f"a module or package named {module!r} on the import path is imported in "
            "place of the test framework's own, its plugins' or Python's start-up hooks" + _HOOK
        )
    return None


def test_infrastructure_scope(path: str) -> str:
    """What makes ``path`` test infrastructure: the package named after the framework it
    stands in (``src/_pytest`` for ``src/_pytest/python.py``), else the path itself."""
    parts = path.split("/")
    for depth in range(len(parts) - 1):
        if _shadowing_module(parts[: depth + 1], folder=True) is not None:
            return "/".join(parts[: depth + 1])
    return path


def _shadowing_module(parts: Sequence[str], *, folder: bool = False) -> str | None:
    """The framework's or start-up hook's name that a folder of ``parts`` or its last
    part (a file, unless ``folder``) takes, or ``None``."""
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1 and not folder
        module = _module_name(part) if last else part
        if module is not None and (module in _SHADOWING_MODULES or module.startswith("pytest_")):
            return module
    return None


def _module_name(file_name: str) -> str | None:
    """The module a file of this name is imported as, or ``None`` for no Python module."""
    stem, dot, suffix = file_name.partition(".")
    if not dot:
        return None
    # A compiled extension's name carries its ABI tag (name.cpython-312-x86_64-linux-gnu.so).
    if suffix in ("py", "pyc", "pyw") or suffix.endswith(("so", "pyd")):
        return stem
    return None


def _pytest_settings_change(name: str, content: str | None, original: str | None) -> str | None:
    """How ``content`` changes what pytest reads from the file ``name``, or ``None``."""
    read = _toml_pytest_settings if name == "pyproject.toml" else _ini_pytest_sections
    try:
        new = read(content or "")
    except ValueError:
        return (
            f"{name} cannot be read and mentions pytest, which reads its settings there"
            if "pytest" in (content or "").lower()
            else None
        )
    try:
        old = read(original or "")
    except ValueError:
        old = None
    if new == old or (not new and old is None):
        return None
    what = "tables and keys" if name == "pyproject.toml" else "sections"
    return (
        f"the change gives {name} other pytest settings (its {what} named after pytest), "
        "which steer every test run"
    )


def _ini_pytest_sections(text: str) -> dict[str, list[str]]:
    """The lines of each section named after pytest, as pytest's reader (``iniconfig``)
    splits them: a section starts at a line whose first character is ``[``, and a line
    that starts with a space continues the one above, whatever it holds."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("["):
            header = line
            for comment in "#;":
                header = header.split(comment)[0]
            header = header.rstrip()
            title = header[1:-1] if header.endswith("]") else header
            current = sections.setdefault(title.strip().lower(), [])
            if "pytest" not in title.lower():
                current = None
            continue
        if current is not None:
            current.append(line.rstrip())
    # Also refuse what configparser and its kin read as a pytest section, should a
    # reader other than iniconfig split the text otherwise.
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as error:
        if "pytest" in text.lower():
            raise ValueError(str(error)) from None
        return {}
    for section in parser.sections():
        if "pytest" in section.lower():
            sections.setdefault("parsed:" + section.strip().lower(), []).extend(
                f"{key}={value}" for key, value in parser.items(section)
            )
    return {key: lines for key, lines in sections.items() if "pytest" in key}


def _toml_pytest_settings(text: str) -> list[tuple[tuple[str, ...], Any]]:
    """Every value of ``text`` under a table or key named after pytest, with its keys."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        raise ValueError(str(error)) from None
    found: list[tuple[tuple[str, ...], Any]] = []

    def walk(value: Any, keys: tuple[str, ...]) -> None:
        if isinstance(value, dict) and not any("pytest" in key.lower() for key in keys):
            for key, inner in value.items():
                walk(inner, (*keys, key))
        elif any("pytest" in key.lower() for key in keys):
            found.append((keys, value))

    walk(data, ())
    return sorted(found, key=lambda item: item[0])


def _label(path: str, limits: SeedLimits) -> str:
    """How every rejection names a file: as given, or its ``repr`` if printing it could mislead."""
    cut = path[: limits.max_path_chars]
    shown = cut if cut and cut.isprintable() else repr(cut)
    return shown if cut == path else shown + "..."


def _path_problems(
    path: str, shown: str, editable_paths: Sequence[str], limits: SeedLimits
) -> Iterable[Rejection]:
    if not path:
        yield _reject("path-empty", "the path is empty", shown)
        return
    if len(path) > limits.max_path_chars:
        yield _reject(
            "path-length",
            f"the path has {len(path)} characters; the limit is {limits.max_path_chars}",
            shown,
        )
        return
    if "\\" in path:
        yield _reject("path-backslash", "the path contains a backslash", shown)
    if "\x00" in path:
        yield _reject("path-nul", "the path contains a NUL character", shown)
    elif any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in path):
        yield _reject("path-control", "the path contains a control character", shown)
    bad_segments = [s for s in path.split("/") if s in ("", ".", "..")]
    if path.startswith("/"):
        yield _reject(
            "path-segment",
            f"{shown} is an absolute path; give the path relative to the seed's folder",
            shown,
        )
    elif bad_segments:
        yield _reject("path-segment", "the path has an empty, '.' or '..' segment", shown)
    if path not in editable_paths:
        allowed = ", ".join(editable_paths) or "none"
        yield _reject("path-not-editable", f"the path is not editable (editable: {allowed})", shown)


def _content_problems(content: str, path: str) -> Iterable[Rejection]:
    if "\x00" in content:
        yield _reject("content-nul", "the content contains a NUL character", path)
    controls = sorted(
        {c for c in content if ord(c) < 0x20 and c not in _ALLOWED_CONTROLS and c != "\x00"}
    )
    if controls:
        yield _reject(
            "content-control",
            f"the content contains control characters {_codepoints(controls)}",
            path,
        )
    invisible = sorted({c for c in content if c in _BIDI_CONTROLS or 0x7F <= ord(c) <= 0x9F})
    if invisible:
        yield _reject(
            "content-invisible",
            f"the content contains invisible or bidirectional controls {_codepoints(invisible)}",
            path,
        )
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as error:
        yield _reject(
            "content-encoding",
            f"the content cannot be encoded as UTF-8 at character {error.start} (a lone surrogate)",
            path,
        )


def _codepoints(chars: Iterable[str]) -> str:
    return ", ".join(f"U+{ord(c):04X}" for c in chars)


def validate_plan(
    plan: PatchPlan,
    *,
    editable_paths: Sequence[str],
    limits: SeedLimits,
    planner_task_id: str | None = None,
    allow: Collection[str] | None = None,
    originals: Mapping[str, bytes] | None = None,
) -> PatchPlan:
    """Return ``plan`` if it keeps the contract (see :func:`check_plan` for ``allow`` and
    ``originals``).

    :raises PlanRejected: listing every broken rule.
    """
    rejections = check_plan(
        plan, editable_paths=editable_paths, limits=limits, allow=allow, originals=originals
    )
    if rejections:
        raise PlanRejected(rejections, planner_task_id=planner_task_id)
    return plan

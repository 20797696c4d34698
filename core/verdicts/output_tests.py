"""Output tests: evidence nothing in the sandbox can forge, compared by the agent outside it.

A seed may declare output tests (``[[output_tests]]`` in ``seed.toml``): a
program started with some arguments and standard input whose standard output
and exit code must be exactly as written, or a function called with some JSON
arguments whose result must be a JSON value. The expectations never enter the
sandbox: the :class:`~.model.SandboxJob` carries only :class:`OutputProbe`\\ s
(what to run, never what it must give, nor which test is hidden). The harness
runs each probe in a fresh process before any code of the seed runs in its
own, and writes what it gave to its signed report; :func:`judged` reads those
lines and compares them here, with the seed's :class:`OutputTest`\\ s.

What the probe gave is only a claim about a value: the agent parses it as JSON
and compares plain values, so no ``__eq__`` of the code under test ever runs
on the verdict. Values compare type-strictly: ``true`` is not ``1``, and ``1``
is not ``1.0``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs
from attrs import validators as v

if TYPE_CHECKING:  # the data model imports this module
    pass

#: The most output tests a seed may declare.
MAX_OUTPUT_TESTS = 100
#: The most characters of one expected stdout, of one stdin, of one expected value and
#: of one argument list (as JSON).
MAX_TEXT_CHARS = 64 * 1024
#: The most bytes of standard output or of a call's JSON the harness keeps from a probe:
#: one more than the longest expected stdout, so a longer one is seen to differ.
MAX_CAPTURE_BYTES = MAX_TEXT_CHARS + 1
#: What a job runs for a seed whose output tests are its only tests: nothing, with
#: success (the verdict then rests on the output tests alone).
NO_TEST_COMMAND = ("python", "-c", "")
#: What ``call`` names: ``module:function``, the module dotted.
CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
#: How a failed hidden test is described: the kind of failure only, never a value.
WHY_KINDS = (
    "wrong output",
    "wrong value",
    "exit code",
    "timed out",
    "not plain JSON",
    "raised",
    "did not run",
    "no result",
)


@attrs.frozen
class OutputTest:
    """One of a seed's output tests, with what it must give (kept by the agent).

    :ivar name: how results and feedback name it.
    :ivar hidden: its probe and result are never shown to a planner.
    :ivar argv: arguments appended to the seed's ``output_command`` (a program test).
    :ivar stdin: the program's standard input (a program test).
    :ivar stdout: what the program must write to its standard output, exactly.
    :ivar exit_code: the exit code the program must end with.
    :ivar call: ``module:function`` to call (a call test).
    :ivar args: the call's arguments, a JSON array.
    :ivar expect: the value the call must return, as JSON.
    """

    name: str
    hidden: bool = False
    argv: tuple[str, ...] | None = None
    stdin: str | None = None
    stdout: str | None = None
    exit_code: int = 0
    call: str | None = None
    args: str = "[]"
    expect: str | None = None

    def __attrs_post_init__(self) -> None:
        # A plugin's seed builds these directly: what the manifest reader checks, checked.
        if self.call is not None:
            if not CALL.fullmatch(self.call) or self.expect is None:
                raise ValueError(f"output test {self.name!r}: call module:function and expect")
            if self.argv is not None or self.stdin is not None or self.stdout is not None:
                raise ValueError(f"output test {self.name!r}: a call has no argv, stdin, stdout")
            arguments = strict_json(self.args)
            strict_json(self.expect)
            if not isinstance(arguments, list):
                raise ValueError(f"output test {self.name!r}: args must be a JSON array")
        elif self.stdout is None or (self.argv is None and self.stdin is None):
            raise ValueError(f"output test {self.name!r}: argv or stdin, and stdout")

    @property
    def is_call(self) -> bool:
        return self.call is not None

    def probe(self, output_command: Sequence[str]) -> OutputProbe:
        """What the sandbox receives for this test: how to run it, nothing of what it must
        give nor whether it is hidden."""
        if self.call is not None:
            return OutputProbe(name=self.name, call=self.call, args=self.args)
        return OutputProbe(
            name=self.name, argv=(*output_command, *(self.argv or ())), stdin=self.stdin
        )


@attrs.frozen
class OutputProbe:
    """How the harness runs one output test inside the sandbox (a :class:`~.model.SandboxJob`
    carries these, never the expectations).

    :ivar name: the test's name, which its report line carries.
    :ivar argv: the program to start (the seed's ``output_command`` and the test's
        arguments); empty for a call.
    :ivar stdin: its standard input; ``None``: none (an empty one).
    :ivar call: ``module:function`` to call in a fresh interpreter; ``None`` for a program.
    :ivar args: the call's arguments, a JSON array.
    """

    name: str
    argv: tuple[str, ...] = ()
    stdin: str | None = None
    call: str | None = None
    args: str = "[]"


@attrs.frozen
class OutputTestResult:
    """What became of one output test, as the agent judged it outside the sandbox.

    :ivar name: the test's name.
    :ivar hidden: whether it is a hidden test (its values are never shown).
    :ivar passed: whether it gave exactly what it must.
    :ivar why: for a failure, how it failed; for a hidden test only the kind of failure
        (one of :data:`WHY_KINDS`, or that its result is missing), never a value.
    """

    name: str
    hidden: bool
    passed: bool
    why: str | None = attrs.field(default=None, validator=v.optional(v.instance_of(str)))

    def describe(self) -> str:
        """``add-hidden (hidden, wrong value)``: its name, and why it failed."""
        said = [word for word in ("hidden" if self.hidden else "", self.why or "") if word]
        return f"{self.name} ({', '.join(said)})" if said else self.name


def strict_json(text: str) -> object:
    """``text`` parsed as JSON with no NaN or infinity; :class:`ValueError` otherwise."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not a JSON value")

    return json.loads(text, parse_constant=refuse)


def same_value(left: object, right: object) -> bool:
    """Whether two parsed JSON values are equal, type for type: ``True`` is not ``1`` and
    ``1`` is not ``1.0`` (nor ``[1]`` ``[1.0]``)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same_value, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same_value(left[k], right[k]) for k in left)
    if isinstance(left, float) and isinstance(right, float):
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    return left == right


def probe_lines(text: str, key: str) -> dict[str, Mapping[str, object]]:
    """The probes' lines of the harness's report ``text``, by probe name: the signed lines
    of kind ``output`` it begins with, numbered from 1 (nothing later counts: the harness
    writes them before any code of the seed runs in its process)."""
    secret = bytes.fromhex(key)
    found: dict[str, Mapping[str, object]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        mac, _, body = line.partition(" ")
        expected = hmac.new(secret, body.encode("utf-8", "replace"), hashlib.sha256).hexdigest()
        # As bytes: compare_digest refuses a str that is not ASCII, which any line may hold.
        if not hmac.compare_digest(mac.encode("utf-8", "replace"), expected.encode()):
            break
        try:
            record = json.loads(body)
        except ValueError:
            break
        if not isinstance(record, dict) or record.get("kind") != "output":
            break
        if record.get("seq") != number:
            break
        name = record.get("name")
        if isinstance(name, str) and name not in found:
            found[name] = record
    return found


def probe_prefix(report: str | None) -> str | None:
    """The lines of ``report`` that :func:`probe_lines` reads (its first ones, of kind
    ``output``), as they are: what is kept of a report once the rest is verified."""
    if report is None:
        return None
    kept = []
    for line in report.splitlines():
        try:
            record = json.loads(line.partition(" ")[2])
        except ValueError:
            break
        if not isinstance(record, dict) or record.get("kind") != "output":
            break
        kept.append(line)
    return "".join(line + "\n" for line in kept)


def compare(test: OutputTest, record: Mapping[str, object] | None) -> OutputTestResult:
    """Judge one test by its probe's report line (``None``: the probe left none)."""
    why = _failure(test, record)
    if why is None:
        return OutputTestResult(test.name, test.hidden, True)
    kind, detail = why
    return OutputTestResult(test.name, test.hidden, False, kind if test.hidden else detail)


def compare_all(
    tests: Sequence[OutputTest], report: str | None, key: str | None
) -> tuple[OutputTestResult, ...]:
    """Every test judged by the report's probe lines; with no report, each fails."""
    lines = probe_lines(report, key) if report and key else {}
    return tuple(compare(test, lines.get(test.name)) for test in tests)


def _failure(test: OutputTest, record: Mapping[str, object] | None) -> tuple[str, str] | None:
    """``None`` when the test passed, else the kind of failure and what a visible test says."""
    if record is None:
        return "no result", "the harness reported no result for it (the sandbox ended first)"
    if record.get("timed_out") is True:
        return "timed out", "timed out, and was killed"
    error = record.get("error")
    if isinstance(error, str):
        return "did not run", f"could not run: {error[:300]}"
    if test.is_call:
        return _call_failure(test, record.get("result"))
    stdout, code = record.get("stdout"), record.get("exit_code")
    if not isinstance(stdout, str) or isinstance(code, bool) or not isinstance(code, int):
        return "no result", "its report line is incomplete"
    if record.get("truncated") is True or stdout != test.stdout:
        shown = json.dumps(stdout[:2000])
        return "wrong output", f"wrote {shown} to stdout; expected {json.dumps(test.stdout)}"
    if code != test.exit_code:
        return "exit code", f"exited with {code}; expected {test.exit_code}"
    return None


def _call_failure(test: OutputTest, result: object) -> tuple[str, str] | None:
    if not isinstance(result, str):
        return "no result", "its report line is incomplete"
    try:
        claim = strict_json(result)
    except (ValueError, RecursionError):
        return "not plain JSON", "its result was not plain JSON"
    if not isinstance(claim, dict) or not (claim.keys() == {"value"} or claim.keys() == {"error"}):
        return "not plain JSON", "its result was not plain JSON"
    if "error" in claim:
        error = str(claim["error"])[:300]
        kind = "not plain JSON" if error.startswith("not plain JSON") else "raised"
        return kind, error
    expected = strict_json(test.expect or "null")
    if not same_value(claim["value"], expected):
        shown = json.dumps(claim["value"])[:2000]
        return "wrong value", f"returned {shown}; expected {test.expect}"
    return None


def summary(results: Sequence[OutputTestResult]) -> str:
    """``1 of 2 passed; failed: add-hidden (hidden, wrong value)``: one line for a summary."""
    passed = sum(result.passed for result in results)
    said = f"{passed} of {len(results)} passed"
    failed = [result.describe() for result in results if not result.passed]
    return f"{said}; failed: {', '.join(failed)}" if failed else said


def listing(results: Sequence[OutputTestResult]) -> str:
    """Every output test and how it ended, one a line."""
    return "\n".join(
        f"{'passed' if result.passed else 'failed':8} {result.describe()}" for result in results
    )

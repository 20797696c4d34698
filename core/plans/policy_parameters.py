"""Policy parameters from the command line, and every value checked against a policy's declaration.

``--policy-param NAME.KEY=VALUE`` gives policy ``NAME`` the parameter ``KEY``
(as a seed's ``[policies.NAME]`` table would), ``VALUE`` read as a TOML value:
``python-ast.also_forbid=["shutil"]``, ``small-diff.max_changed_lines=40``,
``x.flag=true``, a string in quotes. Anything that is not exactly that is a
usage error naming the argument, never a traceback: the text comes from
whoever wrote the command line (a script, a CI file from a pull request).

A policy that declares its parameters
(:class:`~sandboxed_coding_agent.core.protocols.ParameterizedPolicy`) has every
value checked here, from a seed or the command line alike, before its
``configure`` sees it.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import UsageError
from ..protocols import PARAMETER_TYPES, PolicyParameter
from ..serialization import close_key

OPTION = "--policy-param"
#: Far above any real value (a list of a few hundred names); a longer one is a mistake.
MAX_ARGUMENT_CHARS = 64 * 1024
#: Far above any policy's name; a longer one would only flood the message.
MAX_NAME_CHARS = 128
#: As deep as a seed.toml's values may nest.
MAX_NESTING = 16
#: TOML 1.0's integers are 64-bit: a longer one is not a value any policy could mean,
#: and past 4,300 digits Python cannot even write it out in a message or a run record.
INT_RANGE = range(-(2**63), 2**63)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
# Every C0 and C1 control character but the tab: TOML takes none of them outside a
# multi-line string, and a newline would let one argument add keys of its own.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_SHOWN_CHARS = 80
_OUT_OF_RANGE = "holds an integer outside TOML's 64-bit range"


def parse_assignments(arguments: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The parameters each ``NAME.KEY=VALUE`` argument gives, by policy name.

    The policy name is everything before the last ``.`` of the part before the
    first ``=``, so a policy whose name holds a dot still works; whether the
    policy exists is for the plugin host to say.

    :raises UsageError: an argument that is not ``NAME.KEY=VALUE`` with a TOML
        value, or a key given twice; the message quotes the argument.
    """
    found: dict[str, dict[str, Any]] = {}
    for argument in arguments:
        name, key, value = parse_assignment(argument)
        given = found.setdefault(name, {})
        if key in given:
            raise UsageError(f"{OPTION} {_shown(argument)}: {name}.{key} is given twice")
        given[key] = value
    return found


def parse_assignment(argument: str) -> tuple[str, str, Any]:
    """``(policy, key, value)`` of one ``NAME.KEY=VALUE`` argument.

    :raises UsageError: as for :func:`parse_assignments`.
    """

    def refuse(problem: str) -> UsageError:
        return UsageError(
            f"{OPTION} {_shown(argument)}: {problem} (write NAME.KEY=VALUE with VALUE in TOML, "
            f"such as {OPTION} python-ast.also_forbid='[\"shutil\"]')"
        )

    if len(argument) > MAX_ARGUMENT_CHARS:
        raise refuse(f"{len(argument):,} characters; at most {MAX_ARGUMENT_CHARS:,}")
    if not _is_utf8(argument):
        raise refuse("not valid UTF-8 text")
    if _CONTROL.search(argument):
        raise refuse("holds a control character (a line break, say)")
    target, equals, text = argument.partition("=")
    if not equals:
        raise refuse("no '=' between the key and the value")
    name, dot, key = target.strip().rpartition(".")
    if not dot or not name:
        raise refuse("no policy name before the key")
    if len(name) > MAX_NAME_CHARS or any(char.isspace() for char in name):
        raise refuse(f"{_shown(name)} is not a policy name (see `agent policies list`)")
    if not _KEY.fullmatch(key):
        raise refuse(
            f"{key!r} is not a parameter name (letters, digits, '_' and '-', "
            "starting with a letter or '_')"
        )
    text = text.strip()
    if not text:
        raise refuse(f"no value after '=' (an empty string is {name}.{key}='\"\"')")
    try:
        parsed = tomllib.loads(f"value = {text}")
    except tomllib.TOMLDecodeError:
        bare = re.fullmatch(r"[\w./:-]+", text) is not None
        hint = f" (a string needs quotes: {name}.{key}='\"{text}\"')" if bare else ""
        raise refuse(f"the value {_shown(text)} is not a TOML value{hint}") from None
    except RecursionError:
        raise refuse(f"the value nests more than {MAX_NESTING} levels deep") from None
    except ValueError:  # Python's limit on the digits of an integer it reads (4,300)
        raise refuse(
            f"the value {_shown(text)} holds an integer outside TOML's 64-bit range"
        ) from None
    if set(parsed) != {"value"}:
        raise refuse(f"the value {_shown(text)} is not one TOML value")
    value = parsed["value"]
    if _depth(value) > MAX_NESTING:
        raise refuse(f"the value nests more than {MAX_NESTING} levels deep")
    problem = number_problem(value)
    if problem is not None:
        raise refuse(f"the value {_shown(text)} {problem}")
    return name, key, value


def merged(
    seed: Mapping[str, Mapping[str, Any]], given: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The seed's parameters with the command line's on top, key by key."""
    result = {name: dict(parameters) for name, parameters in seed.items()}
    for name, parameters in given.items():
        result.setdefault(name, {}).update(parameters)
    return result


def declaration_problem(declared: object) -> str | None:
    """What is wrong with a policy's ``parameters`` attribute, or ``None``."""
    if isinstance(declared, str | bytes | Mapping) or not isinstance(declared, Sequence):
        return f"parameters must be a tuple of PolicyParameter, not {type(declared).__name__}"
    names: set[str] = set()
    for parameter in declared:
        if not isinstance(parameter, PolicyParameter):
            return (
                f"parameters must be a tuple of PolicyParameter, and one is "
                f"{type(parameter).__name__}"
            )
        if parameter.name in names:
            return f"parameter {parameter.name!r} is declared twice"
        names.add(parameter.name)
        if parameter.default is not None and value_problem(parameter.type, parameter.default):
            return (
                f"parameter {parameter.name!r} has a default that is not "
                f"{PARAMETER_TYPES[parameter.type]}"
            )
    return None


def check(
    policy: str, declared: Sequence[PolicyParameter] | None, given: Mapping[str, Any]
) -> None:
    """Raise unless ``given`` fits the declaration: known keys, their types, required ones.

    Whatever the declaration (``None``: the policy declares none), every number
    must be one a run record can hold: an integer in TOML's 64-bit range, a
    finite float.

    :raises UsageError: one message naming the policy, the key, the expected type
        and the value given.
    """
    for key, value in given.items():
        problem = number_problem(value)
        if problem is not None:
            raise UsageError(f"policy {policy!r}: parameter {key!r} {problem}")
    if declared is None:
        return
    by_name = {parameter.name: parameter for parameter in declared}
    for key, value in given.items():
        parameter = by_name.get(key)
        if parameter is None:
            known = ", ".join(by_name) or "none: it takes no parameters"
            close = close_key(key, by_name)
            hint = f"did you mean {close!r}? " if close is not None else ""
            raise UsageError(
                f"policy {policy!r} has no parameter {key!r} ({hint}its parameters: {known})"
            )
        problem = value_problem(parameter.type, value)
        if problem is not None:
            raise UsageError(
                f"policy {policy!r}: parameter {key!r} must be {PARAMETER_TYPES[parameter.type]} "
                f"({parameter.type}), not {_shown_value(value)} ({problem})"
            )
    for parameter in declared:
        if parameter.required and parameter.name not in given:
            about = f": {parameter.description}" if parameter.description else ""
            raise UsageError(
                f"policy {policy!r} needs parameter {parameter.name!r} "
                f"({PARAMETER_TYPES[parameter.type]}{about}); give it in the seed's "
                f"[policies.{policy}] table or with {OPTION} {policy}.{parameter.name}=VALUE"
            )


def value_problem(kind: str, value: object) -> str | None:
    """What ``value`` is instead of a ``kind`` (a :data:`PARAMETER_TYPES` key), or ``None``."""
    if kind == "any":
        return None
    if kind.startswith("list"):
        if not isinstance(value, list):
            return _what(value)
        item_kind = kind[5:-1]
        for index, item in enumerate(value):
            problem = value_problem(item_kind, item) if item_kind else None
            if problem is not None:
                return f"item {index} is {problem}"
        return None
    return None if _fits(kind, value) else _what(value)


def number_problem(value: object) -> str | None:
    """What is wrong with a number in ``value`` (nested in lists and tables), or ``None``.

    TOML allows ``nan`` and ``inf``, but JSON, the run record's format, has no
    way to write them.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if value in INT_RANGE else _OUT_OF_RANGE
    if isinstance(value, float):
        return None if math.isfinite(value) else f"holds {value!r}, not a finite number"
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    return next((p for child in children if (p := number_problem(child)) is not None), None)


def _fits(kind: str, value: object) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        # A bool is an int to Python, never to a user.
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        # An integer too big for a float is out of TOML's range, refused before this.
        if isinstance(value, float):
            return math.isfinite(value)
        return isinstance(value, int) and not isinstance(value, bool) and value in INT_RANGE
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, dict)


def _what(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    names = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "a table"}
    return names.get(type(value), f"a {type(value).__name__}")


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    return 0


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    """``text`` quoted for a message: control characters and stray bytes escaped, bounded."""
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "..."
    return json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace").decode()


def _shown_value(value: object) -> str:
    """A TOML value as JSON for a message, bounded (a date or time as its text)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # an integer of more digits than Python will write
        return _what(value)
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "..."
    return text.encode("utf-8", "backslashreplace").decode()

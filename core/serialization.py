"""The one cattrs converter: strict when structuring untrusted JSON, plain when writing results."""

from __future__ import annotations

import base64
import difflib
import functools
import json
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .seeds.project import LimitError

if TYPE_CHECKING:
    import cattrs

T = TypeVar("T")


def _strict_str(value: object, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_int(value: object, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_float(value: object, _: type) -> float:
    # float("100") and float(True) would take a string or a boolean for a number.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _strict_bool(value: object, _: type) -> bool:
    # Needed of its own: bool subclasses int, so the int hook would claim (and refuse) it.
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _list_only(converter: cattrs.Converter, cls: Any) -> Any:
    from cattrs.cols import homogenous_tuple_structure_factory

    # cattrs would happily iterate a string or the keys of an object into a tuple.
    base = homogenous_tuple_structure_factory(cls, converter)

    def structure(value: object, _: type) -> Any:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return base(value, cls)

    return structure


def _require_object(converter: cattrs.Converter, cls: type[Any]) -> Any:
    base = converter.gen_structure_attrs_fromdict(cls)

    def structure(value: object, _: type) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        return base(value, cls)

    return structure


@functools.cache
def converter() -> cattrs.Converter:
    """The converter, made on first use: cattrs is not imported by commands that never need it."""
    import cattrs

    made = cattrs.Converter(forbid_extra_keys=True)
    made.register_structure_hook(str, _strict_str)
    made.register_structure_hook(int, _strict_int)
    made.register_structure_hook(float, _strict_float)
    made.register_structure_hook(bool, _strict_bool)
    made.register_structure_hook_factory(
        lambda t: getattr(t, "__origin__", None) is tuple and t.__args__[-1] is Ellipsis,
        functools.partial(_list_only, made),
    )
    made.register_structure_hook_factory(
        lambda t: isinstance(t, type) and hasattr(t, "__attrs_attrs__"),
        functools.partial(_require_object, made),
    )
    made.register_unstructure_hook(bytes, lambda b: base64.b64encode(b).decode("ascii"))
    made.register_structure_hook(bytes, lambda s, _: base64.b64decode(s, validate=True))
    made.register_unstructure_hook_func(
        lambda t: t == Mapping[str, bytes],
        lambda m: {k: made.unstructure(b, bytes) for k, b in m.items()},
    )
    return made


def structure(data: object, cls: type[T]) -> T:
    """Build ``cls`` from JSON-like data; unknown keys and wrong types are errors."""
    return converter().structure(data, cls)


def describe_structure_error(error: Exception, root: str = "$") -> list[str]:
    """Turn a cattrs error into short lines such as ``expected a string @ $.files[0].path``."""
    import cattrs

    found = cattrs.transform_error(error, path=root, format_exception=_format_exception)
    # A misspelt key first: it is often why a required field is missing too.
    return sorted(found, key=lambda line: not line.startswith("unknown key"))


#: The most unknown keys one message names, and the longest name of one it shows.
MAX_KEYS_SHOWN = 5
MAX_KEY_CHARS = 80


def close_key(key: str, known: Collection[str]) -> str | None:
    """The known key that the unknown ``key`` most likely misspells, if one is close."""
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return close[0] if close else None


def key_hint(key: str, known: Collection[str]) -> str:
    """What to say of the unknown key ``key``: the known key it most likely misspells,
    ``(did you mean "seed"?)``, or else every known key, ``(known: id, prompt, seed)``."""
    close = close_key(key, known)
    if close is not None:
        return f"(did you mean {quoted_key(close)}?)"
    return f"(known: {', '.join(sorted(known)) or 'none'})"


def unknown_keys(keys: Iterable[str], known: Collection[str]) -> str:
    """The message for keys that no field of a file's table or object takes: how every
    reader (tasks, seed manifests, plans, records) says it. A misspelt key is named with
    the key it most likely means; the known keys are listed once, for the others."""
    found = sorted(keys)
    shown = found[:MAX_KEYS_SHOWN]
    close = {key: close_key(key, known) for key in shown}
    said = [
        f"unknown key {quoted_key(key)} (did you mean {quoted_key(match)}?)"
        for key, match in close.items()
        if match is not None
    ]
    others = [quoted_key(key) for key, match in close.items() if match is None]
    if others:
        keys_word = "key" if len(others) == 1 else "keys"
        listed = ", ".join(sorted(known)) or "none"
        said.append(f"unknown {keys_word} {', '.join(others)} (known: {listed})")
    more = len(found) - len(shown)
    return "; ".join(said) + (f"; and {more} more unknown keys" if more > 0 else "")


def quoted_key(key: str) -> str:
    """A key as a message shows it: quoted, cut to :data:`MAX_KEY_CHARS`, a lone surrogate
    (a key read from JSON may hold one) as its escape."""
    cut = key[:MAX_KEY_CHARS].encode("utf-8", "backslashreplace").decode("utf-8")
    return f'"{cut}"' + ("..." if len(key) > MAX_KEY_CHARS else "")


def _format_exception(error: BaseException, cls: type | None) -> str:
    import attrs
    from cattrs.errors import ForbiddenExtraKeysError

    if isinstance(error, ForbiddenExtraKeysError) and attrs.has(error.cl):
        fields = [field.alias for field in attrs.fields(error.cl) if field.init]
        return unknown_keys(error.extra_fields, fields)
    if isinstance(error, TypeError) and str(error).startswith("expected "):
        return str(error)
    if isinstance(error, LimitError):
        return str(error)
    import cattrs.v

    return cattrs.v.format_exception(error, cls)


def to_jsonable(value: object) -> Any:
    """``value`` as JSON-ready data: attrs objects as dicts, ``bytes`` as base64 text.

    The same data the converter's ``unstructure`` gives (a test compares them on
    every kind of record and result), walked directly: making the converter's
    per-class code costs a command more than the rest of writing its output.
    """
    return _plain(value)


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _AS_IS:
        return value
    fields = getattr(kind, "__attrs_attrs__", None)
    if fields is not None:
        return {field.name: _plain(getattr(value, field.name)) for field in fields if field.init}
    if kind is bytes:
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if kind is tuple or kind is list:
        return [_plain(item) for item in value]
    return converter().unstructure(value)  # anything else: as the converter says


_AS_IS = frozenset({str, int, float, bool, type(None)})


def to_json(value: object, *, indent: int | None = None) -> str:
    return json.dumps(to_jsonable(value), indent=indent, ensure_ascii=False)

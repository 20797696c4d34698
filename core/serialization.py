"""The one cattrs converter: strict when structuring untrusted JSON, plain when writing results."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Mapping
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

    return cattrs.transform_error(error, path=root, format_exception=_format_exception)


def _format_exception(error: BaseException, cls: type | None) -> str:
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

"""Types as the codec sees them: which ones it can store, their JSON kinds, their names.

``akter.codec`` builds its converter's hooks on these helpers and re-exports ``unsupported``, the
check that ``Actor``, commands and workflows run when they are declared. Kept apart from the
hooks so that what is storable is stated once, in one walk over a type, and read by both: a type
``unsupported`` accepts is one the hooks store exactly, and a union it accepts is one the hooks can
tell apart (``json_kinds``).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import attrs

#: the key that names the member class of a union of two or more records (``{"_type": "Card"}``)
TAG = "_type"

NONE_TYPE = type(None)
#: types stored as a JSON string, each in its own canonical spelling
STRING_SCALARS: tuple[type, ...] = (str, bytes, Decimal, UUID, datetime, date)
SCALARS: tuple[type, ...] = (NONE_TYPE, bool, int, float, *STRING_SCALARS)
#: the JSON kind a raw value has (what a union is told apart by)
KIND_OF_RAW: dict[type, str] = {
    NONE_TYPE: "null",
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    list: "array",
    dict: "object",
}
KIND_OF_SCALAR: dict[type, str] = {
    NONE_TYPE: "null",
    bool: "bool",
    int: "int",
    float: "float",
    **dict.fromkeys(STRING_SCALARS, "string"),
}


def stored_type(tp: Any) -> Any:
    """The type a value is stored as: ``Annotated[X, ...]`` and ``NewType``s are their base."""
    if tp is None:
        return NONE_TYPE
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif getattr(tp, "__supertype__", None) is not None:
            tp = tp.__supertype__
        else:
            return tp


def is_record(tp: Any) -> bool:
    cls = typing.get_origin(tp) or tp
    return isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls))


def record_class(tp: Any) -> Any:
    """The class of a (possibly generic) record type: ``Box`` for ``Box[int]``."""
    return typing.get_origin(tp) or tp


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def type_name(tp: Any) -> str:  # noqa: PLR0911 -- one spelling per kind of type
    """A type as a reader writes it: ``Box[Decimal]``, ``Card | None``, ``dict[str, int]``."""
    tp = stored_type(tp)
    if tp is NONE_TYPE:
        return "None"
    if tp is Ellipsis:
        return "..."
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if is_union(tp):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is not None and args:
        return f"{type_name(origin)}[{', '.join(type_name(a) for a in args)}]"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def path_root(tp: Any) -> str:
    """Where the paths of a type's parts start: a record's class name (``Box.item``)."""
    return record_class(stored_type(tp)).__name__ if is_record(stored_type(tp)) else type_name(tp)


def record_fields(tp: Any) -> list[tuple[str, Any]]:
    """(stored key, resolved type) of the fields a record stores, type variables bound. An
    annotation that cannot be resolved stays a string (``unsupported`` names it)."""
    cls = record_class(tp)
    declared = (
        [(f.name, f.type) for f in attrs.fields(cls) if f.init]
        if attrs.has(cls)
        else [(f.name, f.type) for f in dataclasses.fields(cls) if f.init]
    )
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except (NameError, TypeError):
        hints = {name: _resolve(cls, annotation) for name, annotation in declared}
    bound = dict(zip(getattr(cls, "__parameters__", ()), typing.get_args(tp), strict=False))
    fields = [(name, hints.get(name, annotation)) for name, annotation in declared]
    return [(name, bound.get(hint, hint)) for name, hint in fields]


def _resolve(cls: type, annotation: Any) -> Any:
    """One annotation, resolved as ``typing.get_type_hints`` would, in its class's module."""
    if not isinstance(annotation, str):
        return annotation
    module = sys.modules.get(cls.__module__)
    try:
        return eval(annotation, dict(vars(module)) if module else {}, dict(vars(cls)))
    except Exception:
        return annotation


def json_kinds(tp: Any) -> set[str]:
    """The JSON kinds a value of the (supported) type ``tp`` may be stored as."""
    tp = stored_type(tp)
    if tp in KIND_OF_SCALAR:
        return {KIND_OF_SCALAR[tp]}
    if is_enum(tp):
        return {"string" if isinstance(m.value, str) else "int" for m in tp}
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return {KIND_OF_RAW[type(v)] for v in typing.get_args(tp)}
    if origin in (list, tuple, set, frozenset):
        return {"array"}
    return {"object"}  # dict[K, V] and records


_ABSTRACT = {
    "Sequence": "list[X] or tuple[X, ...]",
    "MutableSequence": "list[X]",
    "Mapping": "dict[K, V]",
    "MutableMapping": "dict[K, V]",
    "Set": "frozenset[X]",
    "AbstractSet": "frozenset[X]",
    "MutableSet": "set[X]",
    "Iterable": "list[X] or tuple[X, ...]",
    "Collection": "list[X] or tuple[X, ...]",
}


def unsupported(tp: Any, role: str = "value") -> list[str]:
    """Every part of type ``tp`` this converter cannot store exactly, one ``"<path>: <why>"`` line
    each (``Cart.total: complex has no stored form ...``); empty when ``tp`` is storable. Paths
    start at the record's class name, or at ``role`` (``"result"``) for a type that is no record.

    ``Any`` and ``object`` are refused: a value of no declared shape decodes as raw JSON (a record
    as a dict, a tuple as a list, a ``Decimal`` as a string), so it could not round-trip, and the
    manifest could not notice a change to it."""
    problems: list[str] = []
    _walk(tp, path_root(tp) if is_record(stored_type(tp)) else role, problems, ())
    return problems


def _walk(tp: Any, path: str, problems: list[str], stack: tuple[Any, ...]) -> None:  # noqa: PLR0912 -- one case per kind of type
    tp = stored_type(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp in SCALARS:
        return
    if tp is Any or tp is object:
        problems.append(
            f"{path}: {type_name(tp)} has no stored shape (it would decode as raw JSON, not as what was "
            f"stored); declare a concrete type or a union"
        )
    elif isinstance(tp, typing.TypeVar):
        problems.append(f"{path}: type variable {tp.__name__} is not bound to a type")
    elif isinstance(tp, str | typing.ForwardRef):
        problems.append(f"{path}: annotation {tp!r} cannot be resolved")
    elif is_enum(tp):
        bad = [m.name for m in tp if type(m.value) not in (str, int)]
        if bad:
            problems.append(f"{path}: enum {tp.__name__} has members whose value is not a str or int: {bad}")
    elif origin is typing.Literal:
        bad_values = [v for v in args if type(v) not in (str, int, bool, NONE_TYPE)]
        if bad_values:
            problems.append(f"{path}: Literal values must be str, int, bool or None, not {bad_values!r}")
    elif is_union(tp):
        _walk_union(tp, path, problems, stack)
    elif is_record(tp):
        cls = origin or tp
        if cls in stack:
            return  # a recursive record: its fields are being checked further up
        for key, field_type in record_fields(tp):
            _walk(field_type, f"{path}.{key}", problems, (*stack, cls))
    elif (origin in (list, set, frozenset) and len(args) == 1) or (
        origin is tuple and len(args) == 2 and args[1] is Ellipsis
    ):
        _walk(args[0], f"{path}[]", problems, stack)
    elif origin is tuple and args and Ellipsis not in args:
        for i, arg in enumerate(args):
            _walk(arg, f"{path}[{i}]", problems, stack)
    elif origin is dict and len(args) == 2:
        key = stored_type(args[0])
        if not (key in (str, int, UUID) or (is_enum(key) and len(json_kinds(key)) == 1)):
            problems.append(
                f"{path}: dict keys must be str, int, UUID or an Enum of str (or of int) values, "
                f"not {type_name(key)}"
            )
        else:
            _walk(key, f"{path}{{key}}", problems, stack)
        _walk(args[1], f"{path}{{}}", problems, stack)
    elif tp in (list, tuple, set, frozenset, dict) or origin in (list, tuple, set, frozenset, dict):
        problems.append(f"{path}: {type_name(tp)} needs its element types (e.g. list[int], dict[str, int])")
    elif getattr(origin or tp, "__name__", "") in _ABSTRACT and getattr(origin or tp, "__module__", "") in (
        "collections.abc",
        "typing",
    ):
        hint = _ABSTRACT[(origin or tp).__name__]
        problems.append(
            f"{path}: {type_name(tp)} does not say which concrete type to read back; declare {hint}"
        )
    elif isinstance(tp, type):
        problems.append(
            f"{path}: {type_name(tp)} has no stored form (a record is an attrs class; the other supported "
            f"types are listed in akter.codec.make_converter)"
        )
    else:
        problems.append(f"{path}: {type_name(tp)} has no stored form")


def _walk_union(tp: Any, path: str, problems: list[str], stack: tuple[Any, ...]) -> None:
    members = [stored_type(m) for m in typing.get_args(tp)]
    own: list[str] = []
    for member in members:
        _walk(member, path, own, stack)
    problems.extend(own)
    if own:
        return
    records = [m for m in members if is_record(m)]
    tagged = len(records) > 1
    by_kind: dict[str, list[str]] = {}
    for member in members:
        if not (tagged and member in records):
            for kind in json_kinds(member):
                by_kind.setdefault(kind, []).append(type_name(member))
    if tagged:
        # the records of a tagged union share one JSON object kind, told apart by their tag
        by_kind.setdefault("object", []).append(" | ".join(type_name(r) for r in records))
    for kind, same in sorted(by_kind.items()):
        if len(same) > 1:
            problems.append(
                f"{path}: in {type_name(tp)}, {' and '.join(same)} are all stored as a JSON {kind}, "
                f"so a stored value could not say which it was"
            )
    seen: set[str] = set()
    for record in records if tagged else []:
        name = (typing.get_origin(record) or record).__name__
        if name in seen:
            problems.append(f"{path}: two members of {type_name(tp)} are named {name}")
        seen.add(name)
        if any(key == TAG for key, _ in record_fields(record)):
            problems.append(f"{path}: {name} has a field named {TAG!r}, which the union uses as its tag")

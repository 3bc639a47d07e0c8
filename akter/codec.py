"""The codec of every stored value: one cattrs converter, canonical JSON, zstd framing.

``make_converter()`` builds the single converter akter uses for state, events, payloads, receipts
and workflow exits; its docstring lists every hook. Decoding is exact: a stored value either
reads back as the value that was written or is a ``CorruptRecord`` — never a default, never a
coerced value (no ``"5"`` for an ``int``, no unknown keys, no missing required fields).

Three questions are answered here, so that the layers above ask nobody else:

* ``unsupported(tp, role)`` — which parts of a declared type this converter cannot store, each
  named by its path (``Cart.total: complex ...``). ``Actor``, commands and workflows call it when
  they are declared, so an unstorable type is refused at import, not at every turn. It lives in
  ``_codec_types.py`` with the other facts about types (their JSON kinds, their names) that the
  hooks here are built on.
* ``check(value, as_type)`` — does this value survive storage? It encodes, decodes strictly and
  compares; anything else is ``InvalidInput`` naming the field. Sends, starts and ``turn.send``
  call it before anything is written.
* ``decode`` / ``from_primitive`` — every failure to read a stored value is ``CorruptRecord``,
  whatever cattrs or a user's validator raised, so callers catch one error.

Stored bytes are framed: one header byte, then the body. ``0x00``: the canonical JSON as is (short
values, where zstd would only add bytes). ``0x01``: the canonical JSON compressed with zstd. The
invariant: ``decode(encode(x)) == x`` for every value ``check`` accepts, and the same value always
encodes to the same bytes (canonical JSON has sorted keys and no spaces, set members are sorted),
so a payload hash is a hash of meaning, not of dict or set order.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import re
import threading
import typing
from base64 import b85decode, b85encode
from collections.abc import Callable, Iterable
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar
from uuid import UUID

import attrs
import cattrs
import zstandard
from cattrs.errors import ForbiddenExtraKeysError, IterableValidationError, IterableValidationNote

from akter._codec_types import (
    KIND_OF_RAW,
    KIND_OF_SCALAR,
    NONE_TYPE,
    TAG,
    is_enum,
    is_record,
    is_union,
    json_kinds,
    path_root,
    record_class,
    record_fields,
    stored_type,
    type_name,
    unsupported,
)
from akter.errors import CorruptRecord, InvalidInput

__all__ = [
    "COMPRESS_ABOVE",
    "RAW",
    "TAG",
    "ZSTD",
    "canonical_json",
    "check",
    "converter",
    "decode",
    "decode_primitive",
    "digest",
    "digest_json",
    "encode",
    "frame",
    "from_primitive",
    "make_converter",
    "to_primitive",
    "unframe",
    "unsupported",
]

T = TypeVar("T")

RAW = 0x00
ZSTD = 0x01
COMPRESS_ABOVE = 256
_LEVEL = 3

_INT_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")


class _Mismatch(TypeError):
    """A raw value of the wrong JSON shape for the type being decoded; the message says which."""


# -- the converter ------------------------------------------------------------------------------


def _exact(*accepted: type) -> Callable[[Any, Any], Any]:
    def structure(raw: Any, tp: Any) -> Any:
        if type(raw) not in accepted:
            raise _Mismatch(f"expected {type_name(tp)}, got {_describe(raw)}")
        return raw

    return structure


def _describe(raw: Any) -> str:
    text = repr(raw)
    return f"{type(raw).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _text(raw: Any, tp: Any) -> str:
    if type(raw) is not str:
        raise _Mismatch(f"expected {type_name(tp)} (as a JSON string), got {_describe(raw)}")
    return raw


def _structure_float(raw: Any, tp: Any) -> float:
    if type(raw) not in (float, int):
        raise _Mismatch(f"expected float, got {_describe(raw)}")
    return float(raw)


def _unstructure_float(value: Any) -> Any:
    # an int given for a float is stored as the float it means, so 1 and 1.0 hash alike
    return float(value) if type(value) is int else value


def _given(value: Any, cls: type) -> None:
    """An unstructure hook's guard: a value of another class would be stored as something else."""
    if not isinstance(value, cls):
        raise InvalidInput(f"expected {cls.__name__}, got {_describe(value)}")


def _unstructure_bytes(value: bytes) -> str:
    _given(value, bytes)
    return b85encode(value).decode("ascii")


def _structure_bytes(raw: Any, tp: Any) -> bytes:
    try:
        return b85decode(_text(raw, tp))
    except ValueError as exc:
        raise ValueError(f"expected base85 bytes: {exc}") from exc


def _unstructure_decimal(value: Decimal) -> str:
    _given(value, Decimal)
    if not value.is_finite():
        raise InvalidInput(f"a Decimal must be finite to be stored, got {value}")
    return str(value)  # keeps the exponent: Decimal("1.10") reads back as Decimal("1.10")


def _structure_decimal(raw: Any, tp: Any) -> Decimal:
    try:
        value = Decimal(_text(raw, tp))
    except InvalidOperation:
        raise ValueError(f"expected a decimal number, got {_describe(raw)}") from None
    if not value.is_finite():
        raise ValueError(f"expected a finite decimal, got {raw!r}")
    return value


def _unstructure_datetime(value: datetime) -> str:
    _given(value, datetime)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(
            f"datetime {value.isoformat()} is naive: akter stores only timezone-aware datetimes "
            f"(e.g. datetime.now(UTC)), so that every reader agrees on the instant"
        )
    return value.isoformat()


def _structure_datetime(raw: Any, tp: Any) -> datetime:
    value = datetime.fromisoformat(_text(raw, tp))
    if value.tzinfo is None:
        raise ValueError(f"expected a timezone-aware datetime, got {raw!r}")
    return value


def _unstructure_date(value: date) -> str:
    _given(value, date)
    if isinstance(value, datetime):
        raise InvalidInput(f"expected date, got {_describe(value)}")
    return value.isoformat()


def _unstructure_uuid(value: UUID) -> str:
    _given(value, UUID)
    return str(value)


def _structure_date(raw: Any, tp: Any) -> date:
    return date.fromisoformat(_text(raw, tp))


def _structure_uuid(raw: Any, tp: Any) -> UUID:
    return UUID(_text(raw, tp))


def _structure_none(raw: Any, tp: Any) -> None:
    if raw is not None:
        raise _Mismatch(f"expected null, got {_describe(raw)}")


def _unstructure_enum(tp: Any) -> Callable[[Any], Any]:
    def hook(value: Any) -> Any:
        if not isinstance(value, tp):
            raise InvalidInput(f"expected a member of {tp.__name__}, got {_describe(value)}")
        return value.value

    return hook


@functools.cache
def _structure_enum(tp: Any) -> Callable[[Any, Any], Any]:
    values = {(type(m.value), m.value): m for m in tp}

    def hook(raw: Any, _: Any) -> Any:
        member = values.get((type(raw), raw))
        if member is None:
            raise ValueError(f"{_describe(raw)} is not a value of {tp.__name__}")
        return member

    return hook


def _scalar(cls: type, hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``hook`` for exactly ``cls``. cattrs finds a class's hook by its MRO before any predicate,
    so an ``IntEnum`` (or a ``str`` enum) reaches the hook of ``int`` (``str``): it is sent on
    to the enum hook here, or it would read back as a plain int."""

    def structure(raw: Any, tp: Any) -> Any:
        if tp is cls:
            return hook(raw, tp)
        if is_enum(tp):
            return _structure_enum(tp)(raw, tp)
        raise _Mismatch(f"{type_name(tp)}, a subclass of {cls.__name__}, has no stored form")

    return structure


def _literal_hooks(converter: cattrs.Converter) -> None:
    def is_literal(tp: Any) -> bool:
        return typing.get_origin(tp) is typing.Literal

    def structure(tp: Any) -> Callable[[Any, Any], Any]:
        allowed = {(type(v), v) for v in typing.get_args(tp)}

        def hook(raw: Any, _: Any) -> Any:
            if (type(raw), raw) not in allowed:
                raise ValueError(f"expected one of {list(typing.get_args(tp))!r}, got {_describe(raw)}")
            return raw

        return hook

    converter.register_unstructure_hook_factory(is_literal, lambda _: lambda v: v)
    converter.register_structure_hook_factory(is_literal, structure)


def _elements(items: Iterable[tuple[Any, Any, Callable[[Any, Any], Any], Any]], tp: Any) -> list[Any]:
    """Structure each ``(label, raw, hook, type)``; every failure is collected and noted with its
    index or key, so ``cattrs.transform_error`` can name its path."""
    out, errors = [], []
    for label, raw, hook, elem in items:
        try:
            out.append(hook(raw, elem))
        except Exception as exc:
            exc.__notes__ = [*getattr(exc, "__notes__", []), IterableValidationNote(str(label), label, elem)]
            errors.append(exc)
    if errors:
        raise IterableValidationError(f"While structuring {type_name(tp)}", errors, tp)
    return out


def _array(raw: Any, tp: Any) -> list[Any]:
    if type(raw) is not list:
        raise _Mismatch(f"expected {type_name(tp)} (as a JSON array), got {_describe(raw)}")
    return raw


def _collection_hooks(converter: cattrs.Converter) -> None:
    def origin_in(*origins: type) -> Callable[[Any], bool]:
        return lambda tp: typing.get_origin(tp) in origins or tp in origins

    def element(tp: Any, i: int = 0) -> Any:
        args = typing.get_args(tp)
        return args[i] if len(args) > i else Any

    def unstructure_array(tp: Any) -> Callable[[Any], Any]:
        args = typing.get_args(tp)
        if typing.get_origin(tp) is tuple and args and Ellipsis not in args:
            hooks = [converter.get_unstructure_hook(a) for a in args]
            return lambda v: [h(x) for h, x in zip(hooks, v, strict=True)]
        hook = converter.get_unstructure_hook(element(tp))
        return lambda v: [hook(x) for x in v]

    def unstructure_set(tp: Any) -> Callable[[Any], Any]:
        hook = converter.get_unstructure_hook(element(tp))
        # set order depends on hash seeds: members are sorted by their canonical JSON
        return lambda v: sorted((hook(x) for x in v), key=_CANONICAL.encode)

    def homogeneous(tp: Any, elem: Any) -> Callable[[Any], list[Any]]:
        hook = converter.get_structure_hook(elem)
        return lambda raw: _elements(((i, x, hook, elem) for i, x in enumerate(_array(raw, tp))), tp)

    def structure_list(tp: Any) -> Callable[[Any, Any], Any]:
        items = homogeneous(tp, element(tp))
        return lambda raw, _: items(raw)

    def structure_tuple(tp: Any) -> Callable[[Any, Any], Any]:
        args = typing.get_args(tp)
        if not args or Ellipsis in args:
            items = homogeneous(tp, element(tp))
            return lambda raw, _: tuple(items(raw))
        hooks = [converter.get_structure_hook(a) for a in args]

        def hetero(raw: Any, _: Any) -> tuple[Any, ...]:
            values = _array(raw, tp)
            if len(values) != len(args):
                raise _Mismatch(f"expected {len(args)} items for {type_name(tp)}, got {len(values)}")
            return tuple(_elements(zip(range(len(args)), values, hooks, args, strict=True), tp))

        return hetero

    def structure_set(tp: Any) -> Callable[[Any, Any], Any]:
        items = homogeneous(tp, element(tp))
        make = frozenset if (typing.get_origin(tp) or tp) is frozenset else set

        def structure(raw: Any, _: Any) -> Any:
            members = items(raw)
            result = make(members)
            if len(result) != len(members):
                raise ValueError(f"a stored {type_name(tp)} repeats a member")
            return result

        return structure

    converter.register_unstructure_hook_factory(origin_in(list, tuple), unstructure_array)
    converter.register_unstructure_hook_factory(origin_in(set, frozenset), unstructure_set)
    converter.register_structure_hook_factory(origin_in(list), structure_list)
    converter.register_structure_hook_factory(origin_in(tuple), structure_tuple)
    converter.register_structure_hook_factory(origin_in(set, frozenset), structure_set)
    _mapping_hooks(converter, origin_in(dict))


def _key_codec(key: Any) -> tuple[Callable[[Any], str], Callable[[str], Any]]:
    """How a dict key of type ``key`` is written as a JSON object key and read back."""
    key = stored_type(key)
    if key is int:

        def read_int(text: str) -> int:
            if not _INT_TEXT.fullmatch(text):
                raise ValueError(f"expected an int key, got {text!r}")
            return int(text)

        return str, read_int
    if key is UUID:
        return str, UUID
    if is_enum(key):
        by_text = {str(m.value): m for m in key}

        def read_enum(text: str) -> Any:
            if text not in by_text:
                raise ValueError(f"{text!r} is not a value of {key.__name__}")
            return by_text[text]

        return lambda m: str(m.value), read_enum
    return str, str  # JSON object keys are strings already


def _mapping_hooks(converter: cattrs.Converter, is_dict: Callable[[Any], bool]) -> None:
    def parts(tp: Any) -> tuple[Any, Any]:
        args = typing.get_args(tp)
        return (args[0], args[1]) if len(args) == 2 else (Any, Any)

    def unstructure(tp: Any) -> Callable[[Any], Any]:
        key, value = parts(tp)
        write_key = _key_codec(key)[0] if key is not Any else (lambda k: k)
        hook = converter.get_unstructure_hook(value)
        return lambda v: {write_key(k): hook(x) for k, x in v.items()}

    def structure(tp: Any) -> Callable[[Any, Any], Any]:
        key, value = parts(tp)
        read_key = _key_codec(key)[1] if stored_type(key) not in (str, Any) else None
        hook = converter.get_structure_hook(value)

        def hook_dict(raw: Any, _: Any) -> dict[Any, Any]:
            if type(raw) is not dict:
                raise _Mismatch(f"expected {type_name(tp)} (as a JSON object), got {_describe(raw)}")
            keys: list[Any] = list(raw)
            if read_key is not None:
                keys = _elements(((k, k, lambda k, _: read_key(k), key) for k in raw), tp)
            values = _elements(((k, v, hook, value) for k, v in raw.items()), tp)
            return dict(zip(keys, values, strict=True))

        return hook_dict

    converter.register_unstructure_hook_factory(is_dict, unstructure)
    converter.register_structure_hook_factory(is_dict, structure)


def _record_hooks(converter: cattrs.Converter) -> None:
    def structure(tp: Any) -> Callable[[Any, Any], Any]:
        inner = converter.gen_structure_attrs_fromdict(tp)

        def hook(raw: Any, cl: Any) -> Any:
            if type(raw) is not dict:
                raise _Mismatch(f"expected {type_name(tp)} (as a JSON object), got {_describe(raw)}")
            return inner(raw, cl)

        return hook

    converter.register_structure_hook_factory(is_record, structure)


def _value_kind(value: Any) -> str:
    """The JSON kind a Python value would be stored as ("" when none)."""
    cls = type(value)
    if isinstance(value, enum.Enum):
        return "string" if isinstance(value.value, str) else "int"
    if cls in KIND_OF_SCALAR:
        return KIND_OF_SCALAR[cls]
    if isinstance(value, list | tuple | set | frozenset):
        return "array"
    return "object" if isinstance(value, dict) or is_record(cls) else ""


def _union_hooks(converter: cattrs.Converter) -> None:
    """Unions: each member is stored in its own form and told apart by its JSON kind (``unsupported``
    refuses a union two of whose members share one); two or more records carry a ``TAG``."""

    def split(tp: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """(tagged records by class name, the other members by JSON kind)."""
        members = [stored_type(m) for m in typing.get_args(tp)]
        records = [m for m in members if is_record(m)]
        tags = {(typing.get_origin(r) or r).__name__: r for r in records} if len(records) > 1 else {}
        by_kind: dict[str, Any] = {}
        for m in members:
            if not (tags and m in records):
                for kind in json_kinds(m):
                    by_kind.setdefault(kind, m)
        if "int" not in by_kind and "float" in by_kind:
            by_kind["int"] = by_kind["float"]  # an int stored for a float member
        return tags, by_kind

    def unstructure(tp: Any) -> Callable[[Any], Any]:
        tags, by_kind = split(tp)
        classes = {typing.get_origin(r) or r: (name, r) for name, r in tags.items()}

        def hook(value: Any) -> Any:
            tagged = classes.get(type(value))
            if tagged is not None:
                name, record = tagged
                return {TAG: name, **converter.unstructure(value, record)}
            member = by_kind.get(_value_kind(value))
            if member is None or (
                is_record(member) and type(value) is not (typing.get_origin(member) or member)
            ):
                raise InvalidInput(f"{_describe(value)} is none of {type_name(tp)}")
            return converter.unstructure(value, member)

        return hook

    def structure(tp: Any) -> Callable[[Any, Any], Any]:
        tags, by_kind = split(tp)

        def hook(raw: Any, _: Any) -> Any:
            kind = KIND_OF_RAW.get(type(raw), "")
            if tags and kind == "object":
                name = raw.get(TAG)
                if name not in tags:
                    raise _Mismatch(f"expected a {TAG!r} tag naming one of {sorted(tags)}, got {name!r}")
                return converter.structure({k: v for k, v in raw.items() if k != TAG}, tags[name])
            member = by_kind.get(kind)
            if member is None:
                raise _Mismatch(f"expected {type_name(tp)}, got {_describe(raw)}")
            return converter.structure(raw, member)

        return hook

    converter.register_unstructure_hook_factory(is_union, unstructure)
    converter.register_structure_hook_factory(is_union, structure)


def make_converter() -> cattrs.Converter:
    """The converter for every stored value. Its hooks, each exact in both directions:

    ==========================================  ==========================================
    type                                        stored as (JSON)
    ==========================================  ==========================================
    ``str``, ``bool``, ``int``, ``None``        themselves; decoding takes only that JSON type
                                                (no ``"5"`` or ``5.0`` or ``true`` for an int)
    ``float``                                   a number (an int given is stored as a float);
                                                NaN and infinities are refused (JSON has none)
    ``decimal.Decimal``                         a string, ``str(d)``, so the exponent survives
                                                (``"1.10"``); finite values only
    ``datetime.datetime``                       ISO-8601 with its UTC offset; naive datetimes
                                                are refused (``InvalidInput``); a named zone is
                                                stored as its offset at that instant
    ``datetime.date``                           ISO-8601 (``"2026-12-01"``)
    ``uuid.UUID``                               its canonical hyphenated string
    ``bytes``                                   base85 text
    ``enum.Enum`` (str or int values)           the member's value
    ``Literal[...]`` (str, int, bool, None)     the value
    ``list[X]``, ``tuple[X, ...]``,             an array; tuples and frozensets read back as
    ``tuple[X, Y]``, ``set[X]``, ``frozenset``  themselves; set members sorted by their JSON
    ``dict[K, V]``                              an object; K is str, int, UUID or an Enum
    attrs classes (and dataclasses)             an object of their ``init`` fields; unknown
                                                keys and missing required fields are refused
    ``X | None``, unions told apart by kind     the member's form, untagged
    unions of two or more records               the record's object plus ``"_type": "<class
                                                name>"``, so the union reads back exactly
    ``Annotated[X, ...]``, ``NewType``          as ``X``
    ==========================================  ==========================================

    Nothing else is registered: ``unsupported`` names every other type when it is declared."""
    c = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    c.register_structure_hook(str, _scalar(str, _exact(str)))
    c.register_structure_hook(bool, _exact(bool))
    c.register_structure_hook(int, _scalar(int, _exact(int)))
    c.register_structure_hook(float, _scalar(float, _structure_float))
    c.register_unstructure_hook(float, _unstructure_float)
    c.register_structure_hook(NONE_TYPE, _structure_none)
    c.register_unstructure_hook(bytes, _unstructure_bytes)
    c.register_structure_hook(bytes, _structure_bytes)
    c.register_unstructure_hook(Decimal, _unstructure_decimal)
    c.register_structure_hook(Decimal, _structure_decimal)
    c.register_unstructure_hook(datetime, _unstructure_datetime)
    c.register_structure_hook(datetime, _structure_datetime)
    c.register_unstructure_hook(date, _unstructure_date)
    c.register_structure_hook(date, _structure_date)
    c.register_unstructure_hook(UUID, _unstructure_uuid)
    c.register_structure_hook(UUID, _structure_uuid)
    c.register_unstructure_hook_factory(is_enum, _unstructure_enum)
    c.register_structure_hook_factory(is_enum, _structure_enum)
    _literal_hooks(c)
    _collection_hooks(c)
    _record_hooks(c)
    _union_hooks(c)
    return c


converter: cattrs.Converter = make_converter()

# zstd (de)compressors are not thread-safe: one pair per thread.
_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    c = getattr(_local, "c", None)
    if c is None:
        c = _local.c = zstandard.ZstdCompressor(level=_LEVEL)
    return c


def _decompressor() -> zstandard.ZstdDecompressor:
    d = getattr(_local, "d", None)
    if d is None:
        d = _local.d = zstandard.ZstdDecompressor()
    return d


# What json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# builds on every call; built once, as every turn encodes four values. An encoder holds no state
# between calls.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(primitive: Any) -> bytes:
    """JSON with sorted keys, no whitespace, UTF-8: equal values give equal bytes.

    What JSON cannot hold is ``InvalidInput``, raised before anything is written: a string with a
    lone surrogate (it has no UTF-8 form), NaN or an infinity, a value of a type JSON lacks."""
    try:
        text = _CANONICAL.encode(primitive)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"JSON cannot hold this value: {exc}") from exc
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"a string in this value is not valid Unicode (lone surrogate): {exc}") from exc


def to_primitive(value: Any, as_type: Any = None) -> Any:
    """``value`` as JSON-ready primitives (as ``as_type``, else as its own class); a value the
    hooks cannot write is ``InvalidInput``."""
    try:
        return converter.unstructure(value, unstructure_as=as_type)
    except InvalidInput:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise InvalidInput(f"cannot be stored as {type_name(as_type)}: {exc}") from exc


def from_primitive(primitive: Any, as_type: type[T] | Any) -> T:
    """Stored primitives → a value of ``as_type``; any failure (a wrong shape, an unknown key, a
    missing field, a user validator refusing it) is ``CorruptRecord``."""
    try:
        value: T = converter.structure(primitive, as_type)
    except Exception as exc:
        raise CorruptRecord(
            f"stored value does not decode as {type_name(as_type)}: {_explain(exc, as_type)}"
        ) from exc
    return value


def _format(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ForbiddenExtraKeysError):
        return f"unknown fields ({', '.join(sorted(exc.extra_fields))})"
    return f"{exc}" if str(exc) else type(exc).__name__


def _explain(exc: BaseException, as_type: Any) -> str:
    """One line per failure, each with its path (``Cart.lines[0].qty: expected int, got str``)."""
    root = path_root(as_type)
    lines = cattrs.transform_error(exc, path=root, format_exception=_format)
    return "; ".join(f"{where}: {what}" for what, _, where in (line.rpartition(" @ ") for line in lines))


def frame(body: bytes) -> bytes:
    """Frame canonical JSON bytes for storage, compressing the ones worth compressing."""
    if len(body) > COMPRESS_ABOVE:
        return bytes([ZSTD]) + _compressor().compress(body)
    return bytes([RAW]) + body


def unframe(data: bytes) -> bytes:
    if not data:
        raise CorruptRecord("stored value is empty")
    head, body = data[0], memoryview(data)[1:]
    if head == RAW:
        return bytes(body)
    if head == ZSTD:
        try:
            return _decompressor().decompress(body)
        except zstandard.ZstdError as exc:
            raise CorruptRecord(f"stored value is not valid zstd: {exc}") from exc
    raise CorruptRecord(f"stored value has unknown frame header 0x{head:02x}")


def encode(value: Any, as_type: Any = None) -> bytes:
    """Value → stored bytes (unstructure, canonical JSON, frame)."""
    return frame(canonical_json(to_primitive(value, as_type)))


def decode_primitive(data: bytes) -> Any:
    body = unframe(data)
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptRecord(f"stored value is not valid JSON: {exc}") from exc


def decode(data: bytes, as_type: type[T] | Any) -> T:
    """Stored bytes → value of ``as_type``; any failure is ``CorruptRecord``."""
    value: T = from_primitive(decode_primitive(data), as_type)
    return value


def check(value: Any, as_type: Any) -> bytes:
    """The canonical JSON of ``value`` as ``as_type``, once it is proven to survive storage:
    encoded, decoded strictly and compared with ``value``. Anything else — a field of the wrong
    type, a value JSON cannot hold, one that would read back different — is ``InvalidInput``
    naming the field (``Ping cannot be stored: Ping.n: expected int, got str 'ten'``). Nothing is
    written meanwhile."""
    root = _root_of(as_type)
    try:
        body = canonical_json(to_primitive(value, as_type))
    except InvalidInput as exc:
        raise InvalidInput(f"{root} cannot be stored: {_locate(value, as_type, root)}: {exc}") from exc
    try:
        decoded = converter.structure(json.loads(body), as_type)
    except Exception as exc:
        raise InvalidInput(f"{root} cannot be stored: {_explain(exc, as_type)}") from exc
    difference = _difference(value, decoded, root)
    if difference is not None:
        raise InvalidInput(f"{root} would not read back as it was written: {difference}")
    return body


_ROOTS: dict[Any, str] = {}


def _root_of(as_type: Any) -> str:
    """``path_root``, once per type: every turn checks its payload, state and events."""
    try:
        return _ROOTS[as_type]
    except KeyError:
        root = _ROOTS[as_type] = path_root(as_type)
        return root
    except TypeError:  # an unhashable annotation
        return path_root(as_type)


def _encodes(value: Any, as_type: Any) -> bool:
    try:
        canonical_json(to_primitive(value, as_type))
    except InvalidInput:
        return False
    return True


def _locate(value: Any, tp: Any, path: str) -> str:
    """The path of the innermost part of ``value`` that cannot be encoded (only called once
    encoding failed, to name the field)."""
    tp = stored_type(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    parts: list[tuple[str, Any, Any]] = []
    if is_record(tp) and isinstance(value, record_class(tp)):
        parts = [(f"{path}.{key}", getattr(value, key, None), t) for key, t in record_fields(tp)]
    elif origin in (list, tuple, set, frozenset) and isinstance(value, list | tuple | set | frozenset):
        hetero = origin is tuple and Ellipsis not in args
        parts = [
            (f"{path}[{i}]", item, args[i] if hetero and i < len(args) else args[0])
            for i, item in enumerate(value)
        ]
    elif origin is dict and isinstance(value, dict):
        parts = [(f"{path}[{key!r}]", item, args[1]) for key, item in value.items()]
    for where, part, part_type in parts:
        if not _encodes(part, part_type):
            return _locate(part, part_type, where)
    return path


def _difference(value: Any, decoded: Any, path: str) -> str | None:  # noqa: PLR0911 -- one case per shape
    """Where ``decoded`` differs from ``value`` (None: nowhere). Equal values are the same; records
    (even ``eq=False`` ones) and containers are compared part by part to name the part."""
    if value == decoded:
        return None
    cls = type(value)
    if cls is not type(decoded):
        return f"{path}: {_describe(value)} would read back as {_describe(decoded)}"
    if is_record(cls):
        names = [f.name for f in (attrs.fields(cls) if attrs.has(cls) else dataclasses.fields(cls))]
        for name in names:
            found = _difference(getattr(value, name), getattr(decoded, name), f"{path}.{name}")
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple) and len(value) == len(decoded):
        for i, (a, b) in enumerate(zip(value, decoded, strict=True)):
            found = _difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(value, dict) and value.keys() == decoded.keys():
        for key, item in value.items():
            found = _difference(item, decoded[key], f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    return f"{path}: {_describe(value)} would read back as {_describe(decoded)}"


def digest(primitive: Any) -> bytes:
    """SHA-256 of the canonical JSON of a primitive: the payload hash bound to a command id."""
    return digest_json(canonical_json(primitive))


def digest_json(body: bytes) -> bytes:
    """SHA-256 of canonical JSON bytes already built (``check``'s result)."""
    return hashlib.sha256(body).digest()

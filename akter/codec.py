"""The codec of every stored value: one cattrs converter, canonical JSON, zstd framing.

``make_converter()`` builds the single converter akter uses for state, events, payloads, receipts
and workflow exits. Its hooks are cattrs' JSON preconf hooks (datetime as ISO-8601, bytes as
base85, sets as lists, ...); no others, so a stored value means the same thing to every reader.

Stored bytes are framed: one header byte, then the body. ``0x00``: the canonical JSON as is (short
values, where zstd would only add bytes). ``0x01``: the canonical JSON compressed with zstd. The
invariant: ``decode(encode(x)) == x`` for every value the converter can structure back, and the
same value always encodes to the same bytes (canonical JSON has sorted keys and no spaces), so a
payload hash is a hash of meaning, not of dict order.

Undecodable stored bytes are a ``CorruptRecord``; nothing here substitutes a default.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, TypeVar

import cattrs
import zstandard
from cattrs.preconf.json import make_converter as _json_converter

from akter.errors import CorruptRecord, InvalidInput

T = TypeVar("T")

RAW = 0x00
ZSTD = 0x01
COMPRESS_ABOVE = 256
_LEVEL = 3


def make_converter() -> cattrs.Converter:
    """The converter for every stored value (cattrs' JSON preconf hooks, nothing more)."""
    return _json_converter()


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


# What json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) builds on every call;
# built once, as every turn encodes four values. An encoder holds no state between calls.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(primitive: Any) -> bytes:
    """JSON with sorted keys, no whitespace, UTF-8: equal values give equal bytes.

    A string holding a lone surrogate has no UTF-8 form, so it cannot be stored or hashed: that
    is ``InvalidInput``, raised before anything is written."""
    text = _CANONICAL.encode(primitive)
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"a string in this value is not valid Unicode (lone surrogate): {exc}") from exc


def to_primitive(value: Any, as_type: Any = None) -> Any:
    return converter.unstructure(value, unstructure_as=as_type)


def from_primitive(primitive: Any, as_type: type[T] | Any) -> T:
    value: T = converter.structure(primitive, as_type)
    return value


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
    primitive = decode_primitive(data)
    try:
        value: T = from_primitive(primitive, as_type)
    except (cattrs.BaseValidationError, TypeError, ValueError, KeyError) as exc:
        name = getattr(as_type, "__name__", str(as_type))
        raise CorruptRecord(f"stored value does not structure as {name}: {exc}") from exc
    return value


def digest(primitive: Any) -> bytes:
    """SHA-256 of the canonical JSON of a primitive: the payload hash bound to a command id."""
    return hashlib.sha256(canonical_json(primitive)).digest()

"""The one codec for tagged outcomes: ``{"ok": value}`` and ``{"error": {"type", "value"}}``.

A turn's receipt (``akter.actor.kernel``), a step's or an execution's exit
(``akter.workflow.core.exits``, which adds its own tags: defects, interrupts, races) and the inspector
(``akter.inspect.decode``, which shows what does not decode instead of raising) all store and read
a success and a declared error the same way. This module is that way, written once:

- a success is ``{"ok": <the value as codec primitives of its declared type>}``;
- a declared error is ``{"error": {"type": <class __name__>, "value": <its fields>}}``. It is
  found again by class name among the declared errors, which is why two declared errors may not
  share a class name (``DeclarationError`` when declared).

Reading is strict: a value that does not decode as its type, or an error class that is no
longer declared, is ``CorruptRecord`` (invariant: a stored value that does not decode parks its
work with a visible reason, it never becomes a default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from akter import codec
from akter.errors import CorruptRecord


def ok(value: Any, as_type: Any) -> dict[str, Any]:
    """A success, as primitives of ``as_type`` (``None``: the value is stored as it is)."""
    return {"ok": codec.to_primitive(value, as_type)}


def error(exc: BaseException) -> dict[str, Any]:
    """A declared error with its class name and fields."""
    return {"error": {"type": type(exc).__name__, "value": codec.to_primitive(exc)}}


def error_class(name: str, declared: Sequence[type[Exception]]) -> type[Exception] | None:
    """The declared error class recorded as ``name``, if it is still declared."""
    return next((e for e in declared if e.__name__ == name), None)


def read_ok(value: Any, as_type: Any) -> Any:
    """A recorded success value as ``as_type`` (``None``: nothing to decode)."""
    return None if as_type is None or value is None else codec.from_primitive(value, as_type)


def read_error(body: Any, declared: Sequence[type[Exception]], where: str) -> Exception:
    """A recorded ``{"type", "value"}`` as the declared error it was; ``where`` names the record
    in the ``CorruptRecord`` raised for anything else."""
    match body:
        case {"type": str(name), "value": value}:
            cls = error_class(name, declared)
            if cls is None:
                raise CorruptRecord(f"{where} holds error {name!r}, no longer declared")
            decoded: Exception = codec.from_primitive(value, cls)
            return decoded
    raise CorruptRecord(f"{where} holds an error without a type and fields: {body!r:.200}")

"""Exits: the recorded outcome of a step or an execution, as a tagged union.

Stored (cattrs primitives, then ``codec.frame``)::

    {"ok": value}                                   success (None for clocks; a wait's match
                                                    is {"seq": n, "event": ...}, a timeout null)
    {"error": {"type": name, "value": fields}}      a declared error, re-raised as itself
    {"defect": {"type": name, "message": text},     any other exception; ``retry_at_ms`` when
     "retry_at_ms": ms}                             another attempt follows at that time
    {"interrupt": {}}                               the step or execution was interrupted
    {"winner": i}                                   a race: branch ``i`` won (it is replayed)
    {"abandoned": {}}                               a pending wait or clock of a branch that a
                                                    race or an all gave up; it resumes nothing
    {"compensation_failed": {"original": exit,      an execution whose body ended with
                             "failures": [text]}}   ``original`` (null: it succeeded) and whose
                                                    compensations or finalizers then failed

An activity attempt settled after the pass saw an interrupt also carries
``"after_interrupt": true``: its value is never delivered to the body (which is abandoned), only
to its compensation.

Decoding needs the declared types of the step (``Ok`` value type, error classes); anything that
does not decode is ``CorruptRecord``, never a default (a changed schema is caught earlier by the
manifest check).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from akter import codec, tagged
from akter.errors import (
    ActivityOutcomeUnknown,
    CompensationFailed,
    CorruptRecord,
    Defect,
    Interrupted,
    InvalidInput,
)


@attrs.frozen
class Ok:
    value: Any


@attrs.frozen
class Raise:
    error: BaseException


Outcome = Ok | Raise


def encode_ok(value: Any, as_type: Any) -> dict[str, Any]:
    """A success, proven to read back as it is (``codec.check``): an activity result or a
    workflow output of the wrong type is ``InvalidInput`` now, never a record that fails every
    later replay with ``CorruptRecord``."""
    if as_type is None:
        return tagged.ok(value, as_type)
    return {"ok": json.loads(codec.check(value, as_type))}


ABANDONED: dict[str, Any] = {"abandoned": {}}


def encode_error(error: BaseException, declared: Sequence[type[Exception]]) -> dict[str, Any]:
    """A declared error keeps its class and fields; anything else is recorded as a defect, and
    so is a declared error whose fields cannot be stored (the code that raised it has a bug: its
    exit says which field, rather than the pass failing on it every time)."""
    try:
        exit_ = _encode_error(error, declared)
        codec.canonical_json(exit_)  # what storing it will do: JSON must hold every field
    except InvalidInput as exc:
        message = f"declared error {type(error).__qualname__} cannot be stored: {exc}"
        return {"defect": {"type": "InvalidInput", "message": message}}
    return exit_


def _encode_error(error: BaseException, declared: Sequence[type[Exception]]) -> dict[str, Any]:
    if isinstance(error, Interrupted):
        return {"interrupt": {}}
    if isinstance(error, CompensationFailed):
        original = None if error.original is None else _encode_error(error.original, declared)
        return {"compensation_failed": {"original": original, "failures": list(error.failures)}}
    if isinstance(error, tuple(declared)):
        return tagged.error(error)
    name = getattr(error, "error_type", "") or type(error).__qualname__
    return {"defect": {"type": name, "message": str(error)}}


def decode(exit_: Any, as_type: Any, declared: Sequence[type[Exception]]) -> Outcome:
    """A recorded exit as an ``Outcome``. Anything but one of the tagged shapes above, with fields
    of their types, is ``CorruptRecord`` (values: ``codec.from_primitive`` raises it)."""
    match exit_:
        case {"ok": value}:
            return Ok(tagged.read_ok(value, as_type))
        case {"error": body}:
            return Raise(tagged.read_error(body, declared, "a recorded exit"))
        case {"defect": {"type": str(name), "message": str(message)}}:
            if name == "ActivityOutcomeUnknown":
                return Raise(ActivityOutcomeUnknown(message))
            return Raise(Defect(message, error_type=name))
        case {"interrupt": _}:
            return Raise(Interrupted("interrupted"))
        case {"compensation_failed": {"original": original, "failures": list(failures)}}:
            body = None if original is None else decode(original, as_type, declared)
            error = body.error if isinstance(body, Raise) else None
            return Raise(CompensationFailed(error, tuple(str(f) for f in failures)))
    raise CorruptRecord(f"recorded exit {exit_!r:.200} has no known tag and shape")


def is_abandoned(exit_: dict[str, Any]) -> bool:
    return "abandoned" in exit_


def after_interrupt(exit_: dict[str, Any]) -> bool:
    return bool(exit_.get("after_interrupt"))


def is_retryable_defect(exit_: dict[str, Any] | None) -> bool:
    return exit_ is not None and "defect" in exit_ and "retry_at_ms" in exit_

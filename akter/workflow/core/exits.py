"""Exits: the recorded outcome of a step or an execution, as a tagged union.

Stored (cattrs primitives, then ``codec.frame``)::

    {"ok": value}                                   success (None for clocks; a wait's match
                                                    is {"seq": n, "event": ...}, a timeout null)
    {"error": {"type": name, "value": fields}}      a declared error, re-raised as itself
    {"defect": {"type": name, "message": text},     any other exception; ``retry_at_ms`` when
     "retry_at_ms": ms}                             another attempt follows at that time
    {"interrupt": {"by": key, "reason": text}}      the step or execution was interrupted;
                                                    ``by`` and ``reason`` (each optional) say
                                                    who asked and why, in a parent's record of
                                                    an interrupted child
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

An execution's result is read in two places: by a client (``run.result()``, ``run.poll()``,
``akter.workflow.client.run``) and by a parent that awaited it as a child (``akter.workflow.core.children``).
Both read it through ``execution_result``, so both get the same ``Result``; an execution's
record keeps who asked for its interrupt beside its result (``interrupted_by``,
``interrupt_reason``), and ``with_interrupter`` folds them into the exit (a parent stores that in
its child step, so its replays read them too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from returns.result import Failure, Result, Success

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
    return {"defect": {"type": name, "message": recorded_message(error)}}


def recorded_message(error: BaseException) -> str:
    """An error's message as records keep it: ``str(error)``, but a ``Defect``'s own message,
    because its ``str()`` adds the class a record keeps apart (and recorded histories predate it)."""
    return error.message if isinstance(error, Defect) else str(error)


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
        case {"interrupt": asked}:
            return Raise(_interrupted(asked))
        case {"compensation_failed": {"original": original, "failures": list(failures)}}:
            body = None if original is None else decode(original, as_type, declared)
            error = body.error if isinstance(body, Raise) else None
            return Raise(CompensationFailed(error, tuple(str(f) for f in failures)))
    raise CorruptRecord(f"recorded exit {exit_!r:.200} has no known tag and shape")


def interrupted_note(by: str | None, reason: str | None) -> str:
    """``interrupted by user:ann: the reason`` (the parts that were recorded)."""
    text = "interrupted"
    if by is not None:
        text += f" by {by}"
    if reason:
        text += f": {' '.join(reason.split())}"
    return text


def _interrupted(asked: Any) -> Interrupted:
    """An ``interrupt`` tag's body: who asked and why, when recorded (an execution's ``by`` and
    ``reason`` folded in by ``with_interrupter``)."""
    if not isinstance(asked, dict):
        return Interrupted("interrupted")
    by, reason = asked.get("by"), asked.get("reason")
    if not (by is None or isinstance(by, str)) or not (reason is None or isinstance(reason, str)):
        raise CorruptRecord(f"recorded interrupt {asked!r:.200} names who asked with something not text")
    return Interrupted(interrupted_note(by, reason), by=by, reason=reason)


def with_interrupter(exit_: Any, by: str | None, reason: str | None) -> Any:
    """An execution's result exit with who asked for its interrupt (and why) folded into its
    ``interrupt`` tag, also the one a ``compensation_failed`` ended with; any other exit as it is."""
    if (by is None and reason is None) or not isinstance(exit_, dict):
        return exit_
    match exit_:
        case {"interrupt": dict(asked)}:
            named = {"by": by, "reason": reason}
            return {**exit_, "interrupt": {**asked, **{k: v for k, v in named.items() if v is not None}}}
        case {"compensation_failed": {"original": dict(original)} as failed}:
            folded = {**failed, "original": with_interrupter(original, by, reason)}
            return {**exit_, "compensation_failed": folded}
    return exit_


def execution_result(
    exit_: Any,
    output: Any,
    errors: Sequence[type[Exception]],
    by: str | None = None,
    reason: str | None = None,
) -> Result[Any, Exception]:
    """An execution's result exit as its readers get it: ``Success(output)``, or ``Failure`` of
    a declared error, ``Interrupted`` (with ``by`` and ``reason``, from the execution's record
    or folded into the exit already), ``CompensationFailed`` or a ``Defect``. The one reading of
    a client's ``run.result()`` and a parent's ``child.result()``."""
    outcome = decode(with_interrupter(exit_, by, reason), output, errors)
    if isinstance(outcome, Ok):
        return Success(outcome.value)
    if not isinstance(outcome.error, Exception):  # pragma: no cover -- exits decode to Exceptions
        raise CorruptRecord(f"a recorded result decodes to {type(outcome.error).__name__}")
    return Failure(outcome.error)


def is_abandoned(exit_: dict[str, Any]) -> bool:
    return "abandoned" in exit_


def after_interrupt(exit_: dict[str, Any]) -> bool:
    return bool(exit_.get("after_interrupt"))


def is_retryable_defect(exit_: dict[str, Any] | None) -> bool:
    return exit_ is not None and "defect" in exit_ and "retry_at_ms" in exit_

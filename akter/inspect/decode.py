"""Stored values as ``akter inspect`` shows them: decoded with the App's declarations, or
shown as *undecodable* with the reason and the raw form — never replaced by a default."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import attrs

from akter import codec, tagged
from akter.errors import CorruptRecord

if TYPE_CHECKING:
    from akter.workflow.api.declare import Step

from akter.inspect.limits import RAW_BYTES

# ---- decoded values ---------------------------------------------------------------------------


def one_line(value: object) -> str:
    return " ".join(str(value).split())


def iso_time(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@attrs.frozen
class Shown:
    """A stored value as inspect shows it. Decoded: ``text`` for people, ``data`` its JSON form.
    Undecodable: ``undecodable`` says why, ``data`` holds the stored JSON when it parsed (else
    ``None``) and ``text`` says it is undecodable."""

    text: str
    data: Any = None
    undecodable: str | None = None

    @property
    def ok(self) -> bool:
        return self.undecodable is None

    def json(self) -> dict[str, Any]:
        if self.undecodable is None:
            return {"value": self.data, "text": self.text}
        return {"undecodable": self.undecodable, "raw": self.data}


def undecodable(reason: str, raw: Any = None) -> Shown:
    return Shown(text=f"<undecodable: {reason}>", data=raw, undecodable=reason)


def parse_stored(data: bytes) -> tuple[Any, Shown | None]:
    """The stored JSON of a framed value, or the undecodable ``Shown`` saying why not."""
    try:
        return codec.decode_primitive(bytes(data)), None
    except CorruptRecord as exc:
        head = bytes(data)[:RAW_BYTES].hex()
        return None, undecodable(str(exc), {"hex": head, "bytes": len(data)})


def _typed(primitive: Any, as_type: Any) -> Shown:
    """``primitive`` structured as ``as_type`` (``None``: the declaration says no value)."""
    if as_type is None:
        return Shown(text=repr(primitive), data=primitive)
    try:
        value = codec.from_primitive(primitive, as_type)
    # Structuring runs user types' validators and hooks: any exception means "does not decode".
    except Exception as exc:
        name = getattr(as_type, "__name__", str(as_type))
        return undecodable(f"does not structure as {name}: {one_line(exc)}", primitive)
    return Shown(text=repr(value), data=primitive)


def decode_value(data: bytes, as_type: Any) -> Shown:
    """A stored value (state, event, payload) decoded as ``as_type``."""
    primitive, bad = parse_stored(data)
    return bad if bad is not None else _typed(primitive, as_type)


def _declared_error(primitive: Any, errors: Sequence[type[Exception]] | None, where: str) -> Shown:
    error = primitive.get("error") if isinstance(primitive, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("type"), str):
        return undecodable("an error exit without a type", primitive)
    if errors is None:
        return undecodable(
            f"{where} is not declared by this App, so error {error['type']} cannot be read", primitive
        )
    cls = tagged.error_class(error["type"], errors)
    if cls is None:
        return undecodable(f"{where} no longer declares error {error['type']}", primitive)
    shown = _typed(error.get("value"), cls)
    return (
        Shown(text=f"error {shown.text}", data=primitive)
        if shown.ok
        else undecodable(shown.undecodable or "", primitive)
    )


def decode_exit(  # noqa: PLR0911, PLR0912 -- one branch per exit tag, in the order of exits.py
    data: bytes,
    where: str,
    ok: Callable[[Any], Shown] | None,
    errors: Sequence[type[Exception]] | None,
) -> Shown:
    """A tagged exit or outcome (``{"ok"}``, ``{"error"}``, ``{"defect"}``, ``{"interrupt"}``,
    ``{"winner"}``). ``ok`` decodes a success value; ``None`` (with ``errors`` ``None``) when
    ``where`` is not declared by the App, so typed values are undecodable but the untyped tags
    still read."""
    primitive, bad = parse_stored(data)
    if bad is not None:
        return bad
    if isinstance(primitive, dict) and isinstance(primitive.get("resolved_by"), str):
        # an attempt a person resolved (akter.workflow.engine.holds): the exit, and who decided it
        rest = {k: v for k, v in primitive.items() if k not in ("resolved_by", "resolution")}
        shown = decode_exit(codec.encode(rest), where, ok, errors)
        if not shown.ok:
            return shown
        how = f", {primitive['resolution']}" if isinstance(primitive.get("resolution"), str) else ""
        return Shown(text=f"{shown.text} (resolved by {primitive['resolved_by']}{how})", data=primitive)
    if not isinstance(primitive, dict) or len(primitive.keys() - {"retry_at_ms", "after_interrupt"}) != 1:
        return undecodable("not a tagged exit", primitive)
    if primitive.get("after_interrupt") is True:
        shown = decode_exit(
            codec.encode({k: v for k, v in primitive.items() if k != "after_interrupt"}), where, ok, errors
        )
        return (
            Shown(text=f"{shown.text} (settled after the interrupt)", data=primitive) if shown.ok else shown
        )
    if "ok" in primitive:
        if ok is None:
            return undecodable(f"{where} is not declared by this App, so its value cannot be read", primitive)
        shown = ok(primitive["ok"])
        return (
            Shown(text=shown.text, data=primitive)
            if shown.ok
            else undecodable(shown.undecodable or "", primitive)
        )
    if "error" in primitive:
        return _declared_error(primitive, errors, where)
    if "defect" in primitive:
        defect = primitive["defect"]
        if not isinstance(defect, dict):
            return undecodable("a defect exit without a type and message", primitive)
        text = f"defect {defect.get('type')}: {defect.get('message')}"
        retry = primitive.get("retry_at_ms")
        if isinstance(retry, int):
            text += (
                f" (attempt failed; next attempt at {iso_time(datetime.fromtimestamp(retry / 1000, UTC))})"
            )
        return Shown(text=text, data=primitive)
    if "interrupt" in primitive:
        return Shown(text="interrupted", data=primitive)
    if "winner" in primitive and isinstance(primitive["winner"], int):
        return Shown(text=f"branch {primitive['winner']} won", data=primitive)
    if "abandoned" in primitive:
        return Shown(text="abandoned (its race or all gave this branch up)", data=primitive)
    if "compensation_failed" in primitive:
        return _compensation_failed(primitive, where, errors)
    return undecodable("unknown exit tag", primitive)


def _compensation_failed(
    primitive: dict[str, Any], where: str, errors: Sequence[type[Exception]] | None
) -> Shown:
    body = primitive["compensation_failed"]
    if not isinstance(body, dict) or not isinstance(body.get("failures"), list):
        return undecodable("a compensation_failed exit without its failures", primitive)
    original = body.get("original")
    ended = "succeeded"
    if original is not None:
        ended = decode_exit(codec.encode(original), where, None, errors).text
    failures = "; ".join(str(f) for f in body["failures"])
    return Shown(text=f"compensation failed after the body ended ({ended}): {failures}", data=primitive)


def ok_as(as_type: Any) -> Callable[[Any], Shown]:
    def ok(value: Any) -> Shown:
        shown = _typed(value, as_type)
        return Shown(text=f"ok {shown.text}", data=value) if shown.ok else shown

    return ok


def step_ok(step: Step | None) -> Callable[[Any], Shown] | None:
    from akter.workflow.api.declare import ActivityStep, SleepStep, WaitStep

    if isinstance(step, ActivityStep) or getattr(step, "kind", None) == "child":
        return ok_as(getattr(step, "success", None))
    if isinstance(step, SleepStep):
        return lambda value: (
            Shown("elapsed", value) if value is None else undecodable("a clock exit with a value", value)
        )
    if isinstance(step, WaitStep):
        event_type = step.event

        def matched(value: Any) -> Shown:
            if value is None:
                return Shown("timed out", value)
            if not (isinstance(value, dict) and isinstance(value.get("seq"), int)):
                return undecodable("a wait exit without an event sequence", value)
            event = _typed(value.get("event"), event_type)
            if not event.ok:
                return event
            return Shown(f"matched event #{value['seq']} {event.text}", value)

        return matched
    return None

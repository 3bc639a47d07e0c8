"""What a turn stages for the outbox: validated ``Send`` and ``Cancel`` records.

``Turn.send`` and ``Turn.cancel`` (``akter.actor.turn``) call ``stage_send`` and
``stage_cancel`` here, so a bad target, key or payload is refused inside the handler, where the
bug is, and nothing reaches the database. The records wait on the turn until
``intents.OutboxHook`` writes them in the turn's transaction. The layers above the kernel (the
workflow engine) stage reserved keys (``wf:<execution>``) through ``stage_internal`` and
``cancel_internal``, which skip the reserved-prefix check and nothing else.

A payload is encoded when ``send`` is called and decoded by the relay with ``decode_payload``,
the one function both sides share: ``build_send`` decodes what it just encoded and refuses a
payload that would not come back (a ``None`` payload type needs no converter hook; a collection
type's contents are not checked by ``isinstance``), so every intent that commits can be
delivered.

It is the actor layer's side of staging (the outbox layer, above, writes and delivers the
records), and imports nothing that imports the kernel, because the kernel's ``turn.py`` imports
it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import NoneType
from typing import Any

import attrs
from cattrs.errors import CattrsError

from akter import codec
from akter.actor._types import Command, Turn
from akter.actor.limits import payload_within_cap
from akter.errors import CorruptRecord, InvalidInput, InvalidTimerKey
from akter.ids import ActorRef

LAYER = "outbox"
MAX_KEY_BYTES = 200
#: key prefixes akter keeps for itself: workflow timers, and anything named akter*
RESERVED_KEY_PREFIXES = ("wf:", "akter")


@attrs.frozen
class Send:
    """One staged intent. ``after_ms``/``at_ms`` place it on the database clock; neither is "now"."""

    target: ActorRef
    command: str
    payload: bytes
    after_ms: int | None
    at_ms: int | None
    key: str | None
    #: the uuid part of the intent id (32 hex digits) when a layer derives it (a schedule's
    #: slot); None: a random one
    nonce: str | None = None

    @property
    def timer(self) -> bool:
        """Delivered with source ``timer`` (keyed or delayed) rather than ``actor``."""
        return self.key is not None or self.after_ms is not None or self.at_ms is not None

    def due_ms(self, now_ms: int) -> int:
        if self.at_ms is not None:
            return self.at_ms
        return now_ms + (self.after_ms or 0)


@attrs.frozen
class Cancel:
    key: str


def check_key(key: object, *, internal: bool = False) -> str:
    if not isinstance(key, str):
        raise InvalidTimerKey(f"an outbox key must be a str, got {type(key).__name__}")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidTimerKey(f"outbox key {key!r} is not valid UTF-8") from exc
    if not 1 <= size <= MAX_KEY_BYTES:
        raise InvalidTimerKey(f"an outbox key must be 1..{MAX_KEY_BYTES} UTF-8 bytes, got {size}")
    if "\x00" in key:
        raise InvalidTimerKey(f"outbox key {key!r} contains a NUL character")
    if not internal and key.startswith(RESERVED_KEY_PREFIXES):
        raise InvalidTimerKey(f"outbox key {key!r} uses a prefix akter reserves {RESERVED_KEY_PREFIXES}")
    return key


def _target(turn: Turn, target: str | ActorRef, command: Command[Any]) -> ActorRef:
    if isinstance(target, ActorRef):
        if target.tenant != turn.ref.tenant:
            raise InvalidInput(
                f"{turn.ref} cannot send to {target}: tenants never address each other's actors"
            )
        if target.actor_type != command.actor.name:
            raise InvalidInput(f"{command!r} cannot be sent to {target}")
        return target
    if not isinstance(target, str):
        raise InvalidInput(f"a send target is an actor id (str) or an ActorRef, got {type(target).__name__}")
    return ActorRef(tenant=turn.ref.tenant, actor_type=command.actor.name, actor_id=target)


#: the latest an intent may be due: far enough for any schedule, and within what PostgreSQL's
#: timestamps and the 15-digit millisecond fields of intent ids hold
MAX_DELAY = timedelta(days=1000 * 365)
LATEST_DUE = datetime(9000, 1, 1, tzinfo=UTC)


def _timing(after: timedelta | None, at: datetime | None) -> tuple[int | None, int | None]:
    if after is not None and at is not None:
        raise InvalidInput("give a send either after= or at=, not both")
    if after is not None:
        if not isinstance(after, timedelta):
            raise InvalidInput(f"after= takes a timedelta, got {type(after).__name__}")
        if after < timedelta(0):
            raise InvalidInput(f"after= must not be negative, got {after}")
        if after > MAX_DELAY:
            raise InvalidInput(f"after= is at most {MAX_DELAY.days} days, got {after}")
        return after // timedelta(milliseconds=1), None
    if at is not None:
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise InvalidInput(f"at= takes a timezone-aware datetime, got {at!r}")
        if at >= LATEST_DUE:
            raise InvalidInput(f"at= must be before {LATEST_DUE:%Y-%m-%d}, got {at.isoformat()}")
        return None, round(at.timestamp() * 1000)
    return None, None


def build_send(
    turn: Turn,
    target: str | ActorRef,
    command: Command[Any],
    payload: object,
    *,
    after: timedelta | None = None,
    at: datetime | None = None,
    key: str | None = None,
    internal: bool = False,
) -> Send:
    """Validate a send and encode its payload now, so that a bad one (of another type, or with a
    field that would not read back: ``codec.check``) fails in the handler."""
    if not internal and command.name.startswith("akter."):
        raise InvalidInput(f"{command!r} is akter's own; it cannot be sent from a handler")
    ref = _target(turn, target, command)
    expected = command.input
    if isinstance(expected, type) and not isinstance(payload, expected):
        raise InvalidInput(f"{command!r} takes a {expected.__name__}, got {type(payload).__name__}")
    # checked now, in the handler: a payload that would not read back is the handler's bug, and
    # one over the receiver's cap could never be delivered
    body = payload_within_cap(command, codec.check(payload, expected))
    after_ms, at_ms = _timing(after, at)
    encoded = codec.frame(body)
    try:
        decode_payload(encoded, expected)
    except CorruptRecord as exc:
        raise InvalidInput(
            f"{command!r} could not decode this {type(payload).__name__} payload at delivery: {exc}"
        ) from exc
    return Send(
        target=ref,
        command=command.name,
        payload=encoded,
        after_ms=after_ms,
        at_ms=at_ms,
        key=None if key is None else check_key(key, internal=internal),
    )


def decode_payload(data: bytes, expected: Any) -> object:
    """A stored payload as the receiving handler gets it; undecodable bytes are ``CorruptRecord``.

    A handler annotated ``payload: None`` declares ``NoneType``, which the converter has no hook
    for: its only payload is ``null``."""
    if expected is NoneType:
        if codec.decode_primitive(data) is not None:
            raise CorruptRecord("a payload of type None must be stored as null")
        return None
    try:
        return codec.decode(data, expected)
    except CattrsError as exc:  # the ones codec.decode lets through (no hook, Literal)
        raise CorruptRecord(f"stored value does not structure as {expected}: {exc}") from exc


def stage_internal(
    turn: Turn,
    target: str | ActorRef,
    command: Command[Any],
    payload: object,
    *,
    key: str | None = None,
    after: timedelta | None = None,
    at: datetime | None = None,
) -> None:
    """For akter's own layers: stage an intent whose key may use a reserved prefix (``wf:``) and
    whose command may be an internal ``akter.`` command."""
    turn.stage(LAYER, build_send(turn, target, command, payload, after=after, at=at, key=key, internal=True))


def cancel_internal(turn: Turn, key: str) -> None:
    """For akter's own layers: cancel this actor's pending intent under a reserved key."""
    turn.stage(LAYER, Cancel(check_key(key, internal=True)))

"""Size caps on the values akter stores, and the checks that refuse a value before it is written.

An actor type declares its caps beside its state cap (``akter.Actor(..., max_state_bytes=...,
max_payload_bytes=..., max_event_bytes=..., max_result_bytes=...)``, defaults below). Each is
measured on the value's canonical JSON (``codec.canonical_json``: UTF-8 bytes before
compression), the form whose hash binds a command id, so a cap does not depend on how well a
value compresses. The caps travel with the declarations, so a web process, a relay and the
sender of an intent all apply the same numbers.

Where each is checked, always before anything is written:

- a **command payload**, in the kernel before a turn opens a transaction (``payload_within_cap``):
  sends through a client, an activity's client and the relay's deliveries. A ``Turn.send`` is
  checked in the handler (``check_payload``), so a turn that stages an oversized intent fails as
  a ``Defect`` and stages nothing. A **workflow input** is its start command's payload: the
  client's ``start`` is checked like any send, ``Turn.start`` in the handler. ``PayloadTooLarge``;
- an **event** a turn emits (``event_json``): ``EventTooLarge``, and the turn rolls back;
- an **activity's result** (``check_result``): ``ResultTooLarge``, recorded as the attempt's
  defect;
- **state**: ``StateTooLarge``, in the turn plan (``plan.prepare_write``).

This module imports nothing that imports the kernel: ``akter.actor.staged`` uses it.
"""

from __future__ import annotations

from typing import Any

from akter import codec
from akter.actor._types import Actor, Command
from akter.errors import EventTooLarge, PayloadTooLarge, ResultTooLarge

KIB = 1024
DEFAULT_MAX_PAYLOAD_BYTES = 256 * KIB
DEFAULT_MAX_EVENT_BYTES = 256 * KIB
DEFAULT_MAX_RESULT_BYTES = 256 * KIB


def payload_within_cap(command: Command[Any], body: bytes) -> bytes:
    """A command payload's canonical JSON, refused when over its actor type's cap."""
    limit = command.actor.max_payload_bytes
    if len(body) > limit:
        raise PayloadTooLarge(f"the payload of {command!r}", len(body), limit)
    return body


def payload_json(command: Command[Any], primitive: Any) -> bytes:
    """The canonical JSON of a command payload (already unstructured), within the cap."""
    return payload_within_cap(command, codec.canonical_json(primitive))


def check_payload(command: Command[Any], payload: object) -> None:
    """Refuse a payload over its command's cap (for ``Turn.send`` and ``Turn.start``)."""
    payload_json(command, codec.to_primitive(payload, command.input))


def event_within_cap(actor: Actor[Any], tag: str, body: bytes) -> bytes:
    """An emitted event's canonical JSON, refused when over its actor type's cap."""
    if len(body) > actor.max_event_bytes:
        raise EventTooLarge(actor.name, tag, len(body), actor.max_event_bytes)
    return body


def check_result(actor: Actor[Any], what: str, primitive: Any) -> None:
    """Refuse an activity's result (already unstructured) over its actor type's cap; ``what``
    names the activity (``Actor.workflow.step``)."""
    limit = actor.max_result_bytes
    size = len(codec.canonical_json(primitive))
    if size > limit:
        raise ResultTooLarge(what, size, limit)

"""Staged intents become outbox rows: the ``OutboxHook`` the kernel runs in every successful turn.

``akter.actor.turn`` stages ``Send``/``Cancel`` records (``staged.py``); the kernel calls
``OutboxHook.before_commit`` only for a successful outcome, inside the turn's transaction and
under the sender's row lock, so a declared failure, a defect or a crash stages nothing. Here the
records become one statement: cancels delete this actor's pending keyed rows, sends are inserted
(a keyed send replaces the pending row with its key). A row due now also sends
``NOTIFY akter_outbox, '<bucket>'``, which PostgreSQL delivers only when the turn commits — that
is how the owning relay (``relay.py``) wakes at once instead of at its next poll.

The caller a delivery runs as is stored with the row (``encode_caller``) and read back by the
relay (``decode_caller``): a ``System`` caller naming the sender and the principal it acted for.
"""

from __future__ import annotations

import uuid
from typing import Any

from akter import codec, telemetry
from akter.actor.kernel import Committed, UnderLock
from akter.actor.staged import LAYER, Cancel, Send
from akter.actor.turn import Turn
from akter.callers import Anonymous, Principal, System, User
from akter.errors import CorruptRecord
from akter.outbox import queries


def encode_caller(caller: System) -> bytes:
    """A System caller as stored bytes: names only (no tokens, invariant 11)."""
    behalf: dict[str, str] | None
    match caller.on_behalf_of:
        case User(subject=subject):
            behalf = {"user": subject}
        case Anonymous():
            behalf = {"anonymous": ""}
        case None:
            behalf = None
    return codec.encode({"source": caller.source, "ref": caller.ref, "on_behalf_of": behalf})


def decode_caller(data: bytes) -> System:
    primitive = codec.decode_primitive(data)
    try:
        behalf = primitive["on_behalf_of"]
        principal: Principal | None
        if behalf is None:
            principal = None
        elif "user" in behalf:
            principal = User(str(behalf["user"]))
        elif "anonymous" in behalf:
            principal = Anonymous()
        else:
            raise CorruptRecord(f"stored caller has an unknown principal {behalf!r}")
        return System(source=str(primitive["source"]), ref=str(primitive["ref"]), on_behalf_of=principal)
    except (KeyError, TypeError) as exc:
        raise CorruptRecord(f"stored caller cannot be decoded: {exc}") from exc


def _final_ops(items: list[Any]) -> tuple[list[Send], list[str]]:
    """Sends to insert and keys to cancel. Per key only the last operation of the turn counts
    (one INSERT cannot touch the same keyed row twice, and latest-wins is the rule anyway)."""
    unkeyed: list[Send] = []
    by_key: dict[str, Send | Cancel] = {}
    for item in items:
        if isinstance(item, Send) and item.key is None:
            unkeyed.append(item)
        elif isinstance(item, Send | Cancel) and (key := item.key) is not None:
            by_key.pop(key, None)  # re-insert, so dict order follows the last operation
            by_key[key] = item
        else:  # pragma: no cover - only staged.py stages under this layer
            raise TypeError(f"unexpected outbox item {item!r}")
    sends = unkeyed + [op for op in by_key.values() if isinstance(op, Send)]
    cancels = [key for key, op in by_key.items() if isinstance(op, Cancel)]
    return sends, cancels


class OutboxHook:
    """The kernel ``TurnHook`` that writes a turn's staged intents in its transaction."""

    async def before_commit(self, db: UnderLock, turn: Turn[Any], record: Committed) -> None:
        items = turn.staged.get(LAYER)
        if not items:
            return
        sends, cancels = _final_ops(items)
        ref = record.ref
        params: dict[str, Any] = {**ref.key_params(), "now_ms": record.now_ms, "bucket": ref.bucket}
        # sent in the round trip of the turn's own write (``Committed.with_write``), under the
        # lock the turn already holds: a turn that sends commands costs no round trip more
        if cancels:
            record.with_write(queries.CANCEL, {**params, "cancel": cancels})
        if not sends:
            return
        principal = turn.principal
        actor_caller = encode_caller(System(source="actor", ref=str(ref), on_behalf_of=principal))
        timer_caller = encode_caller(System(source="timer", ref=str(ref), on_behalf_of=principal))
        due = [s.due_ms(record.now_ms) for s in sends]
        params |= {
            "nonces": [s.nonce or uuid.uuid4().hex for s in sends],
            "due": due,
            "keys": [s.key for s in sends],
            "target_types": [s.target.actor_type for s in sends],
            "target_ids": [s.target.actor_id for s in sends],
            "commands": [s.command for s in sends],
            "payloads": [s.payload for s in sends],
            "callers": [timer_caller if s.timer else actor_caller for s in sends],
            "trace": telemetry.carrier(),
        }
        record.with_write(queries.INSERT, params)
        if min(due) <= record.now_ms:
            record.with_write(queries.NOTIFY, {"bucket_text": str(ref.bucket)})

    def after_commit(self, record: Committed) -> None:
        """Nothing to do: the NOTIFY sent in the transaction is delivered by the commit itself."""

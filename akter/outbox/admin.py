"""Parked intents: the rows the relay gave up delivering, and what an operator does about them.

The relay parks a row (``delivery.park_reason``) when its attempts reach ``max_attempts``, or at
once when no retry can cure the refusal (an expired intent id). A parked row keeps everything it
had — body, caller, attempts, ``last_error`` — plus ``parked_at`` and ``parked_reason``; its due
time is a far-future sentinel (``sql/functions/akter_parked_due.sql``), so the relay's due scan never reads
it again.

Here, for operators and for the views that show them (``akter inspect parked``, the outbox and
timer lines of ``akter inspect actor|execution``, ``run.poll().blocked_reason``):

- ``read_parked`` / ``parked_of``: parked rows across actors (optionally one tenant), or one
  sender's;
- ``retry``: due now again with a fresh attempt budget, under the **same intent id**, so an
  earlier delivery that did commit (its receipt exists) is replayed, never run twice. An id past
  its expiry can only be delivered under a new one (``new_id=True``), which the operator chooses
  knowing that the receiver can no longer tell whether an earlier attempt took effect — except
  akter's own (``akter.*``), retried as they are: their delivery renews an expired id itself,
  their receivers being idempotent by state (``delivery.renews``);
- ``delete``: drop it. akter's own intents (``akter.*``: a workflow's resume timer) are refused
  without ``force=True``, because deleting one leaves its execution with nothing to wake it.

Both writes take the sender's generation row lock first, like every write to an actor's rows,
and refuse a row that is no longer parked (a keyed replacement or a re-armed timer un-parks it).
An operator names a parked intent by its id alone; the ``actor_outbox_parked`` partial index
finds it without a routing key. The ``akter outbox retry|delete`` commands are in
``akter.cli.outbox``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, LiteralString

import attrs
import psycopg
from psycopg.rows import dict_row
from returns.result import Failure, Result, Success

from akter.ids import ActorRef, CommandId
from akter.outbox import queries

_COLUMNS = """routing_key, tenant, actor_type, actor_id, intent_id, timer_key, target_type, target_id,
       command, attempts, last_error, parked_at, parked_reason, created_at, akter_now() AS now"""

READ_PARKED: LiteralString = f"""
SELECT {_COLUMNS}
  FROM actor_outbox
 WHERE parked_at IS NOT NULL AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s)
 ORDER BY parked_at DESC, intent_id
 LIMIT %(limit)s"""

PARKED_OF: LiteralString = f"""
SELECT {_COLUMNS}
  FROM actor_outbox
 WHERE {queries.SENDER} AND parked_at IS NOT NULL
 ORDER BY parked_at DESC, intent_id"""

FIND: LiteralString = """
SELECT routing_key, tenant, actor_type, actor_id
  FROM actor_outbox
 WHERE intent_id = %(intent_id)s AND parked_at IS NOT NULL"""

LOCK_SENDER: LiteralString = f"SELECT 1 FROM actor_generations WHERE {queries.SENDER} FOR UPDATE"

# After the lock, in statements of their own (a fresh snapshot sees the commit of any turn the
# lock waited for, such as a keyed replacement that un-parked the row).
PARKED_ROW: LiteralString = f"""
SELECT {_COLUMNS}
  FROM actor_outbox
 WHERE {queries.SENDER} AND intent_id = %(intent_id)s AND parked_at IS NOT NULL
   FOR UPDATE"""

# Due now, attempts from zero; the trigger (sql/functions/akter_outbox_unpark.sql) clears parked_at
# and parked_reason as the due time changes (set here too, so the statement says what it does).
RETRY: LiteralString = f"""
UPDATE actor_outbox
   SET due_at = akter_now(), attempts = 0, parked_at = NULL, parked_reason = NULL,
       intent_id = CASE WHEN %(new_id)s THEN akter_mint_intent_id(NULL) ELSE intent_id END
 WHERE {queries.SENDER} AND intent_id = %(intent_id)s AND parked_at IS NOT NULL
RETURNING intent_id, bucket"""

DELETE: LiteralString = f"""
DELETE FROM actor_outbox
 WHERE {queries.SENDER} AND intent_id = %(intent_id)s AND parked_at IS NOT NULL"""


@attrs.frozen
class ParkedIntent:
    """One parked outbox row: who staged it, for whom, and why the relay gave up."""

    intent_id: str
    sender: ActorRef
    target: ActorRef
    command: str
    timer_key: str | None
    attempts: int
    last_error: str | None
    parked_at: datetime
    parked_reason: str
    created_at: datetime
    #: the database clock when this was read
    read_at: datetime

    @property
    def expires_at(self) -> datetime:
        return datetime.fromtimestamp(CommandId.parse(self.intent_id).expires_ms / 1000, tz=UTC)

    @property
    def expired(self) -> bool:
        """Its receiver refuses this id whatever is retried: only ``retry(new_id=True)`` helps."""
        return self.expires_at < self.read_at

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ParkedIntent:
        tenant = row["tenant"]
        return cls(
            intent_id=row["intent_id"],
            sender=ActorRef(tenant=tenant, actor_type=row["actor_type"], actor_id=row["actor_id"]),
            target=ActorRef(tenant=tenant, actor_type=row["target_type"], actor_id=row["target_id"]),
            command=row["command"],
            timer_key=row["timer_key"],
            attempts=row["attempts"],
            last_error=row["last_error"],
            parked_at=row["parked_at"],
            parked_reason=row["parked_reason"],
            created_at=row["created_at"],
            read_at=row["now"],
        )


async def _rows(conn: psycopg.AsyncConnection[Any], sql: LiteralString, params: dict[str, Any]) -> list[Any]:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql, params)
    return await cur.fetchall()


async def read_parked(
    conn: psycopg.AsyncConnection[Any], *, tenant: str | None = None, limit: int = 100
) -> list[ParkedIntent]:
    """Parked intents of every actor (of ``tenant`` only, when given), most recent first."""
    rows = await _rows(conn, READ_PARKED, {"tenant": tenant, "limit": limit})
    return [ParkedIntent.from_row(r) for r in rows]


async def parked_of(conn: psycopg.AsyncConnection[Any], sender: ActorRef) -> list[ParkedIntent]:
    """The parked intents ``sender`` staged (a workflow's resume timer is its owner's)."""
    return [ParkedIntent.from_row(r) for r in await _rows(conn, PARKED_OF, sender.key_params())]


async def _locked(conn: psycopg.AsyncConnection[Any], intent_id: str) -> ParkedIntent | None:
    """Inside a transaction: the parked row, with its sender's generation row locked."""
    found = await _rows(conn, FIND, {"intent_id": intent_id})
    if not found:
        return None
    sender = ActorRef(found[0]["tenant"], found[0]["actor_type"], found[0]["actor_id"])
    params = {**sender.key_params(), "intent_id": intent_id}
    await conn.execute(LOCK_SENDER, params)
    rows = await _rows(conn, PARKED_ROW, params)
    return ParkedIntent.from_row(rows[0]) if rows else None


def _not_parked(intent_id: str) -> str:
    return f"no parked intent {intent_id} (delivered, deleted, replaced or retried meanwhile?)"


async def retry(
    conn: psycopg.AsyncConnection[Any], intent_id: str, *, new_id: bool = False
) -> Result[ParkedIntent, str]:
    """Make a parked intent due now with a fresh attempt budget, and wake the relays.

    ``Success``: the row as it was parked, with ``intent_id`` the id it is delivered under.
    ``Failure``: why not (no such parked row; or its id expired and ``new_id`` was not given)."""
    async with conn.transaction():
        parked = await _locked(conn, intent_id)
        if parked is None:
            return Failure(_not_parked(intent_id))
        if parked.expired and not new_id and not parked.command.startswith("akter."):
            return Failure(
                f"intent {intent_id} expired at {parked.expires_at.isoformat()}: its receiver refuses "
                "that id. Retry it with a new id (--new-id) to deliver it anyway; the receiver cannot "
                "then tell whether an earlier attempt already took effect"
            )
        params = {**parked.sender.key_params(), "intent_id": intent_id, "new_id": new_id}
        cur = await conn.execute(RETRY, params)
        row = await cur.fetchone()
        if row is None:  # pragma: no cover - the row is locked and parked, so RETRY returns it
            raise AssertionError(f"intent {intent_id} vanished while locked")
        delivered_as, bucket = row
        await conn.execute(queries.NOTIFY, {"bucket_text": str(bucket)})
    return Success(attrs.evolve(parked, intent_id=delivered_as))


async def delete(
    conn: psycopg.AsyncConnection[Any], intent_id: str, *, force: bool = False
) -> Result[ParkedIntent, str]:
    """Delete a parked intent; ``Success`` carries the row as it was. akter's own intents (a
    workflow's resume timer) need ``force``: without the timer its execution never wakes."""
    async with conn.transaction():
        parked = await _locked(conn, intent_id)
        if parked is None:
            return Failure(_not_parked(intent_id))
        if parked.command.startswith("akter.") and not force:
            return Failure(
                f"intent {intent_id} is akter's own {parked.command} ({parked.timer_key}): deleting it "
                "leaves its execution with nothing to wake it. Retry it instead, interrupt the "
                "execution, or delete it anyway with --force"
            )
        await conn.execute(DELETE, {**parked.sender.key_params(), "intent_id": intent_id})
    return Success(parked)


# ---- rendering ----------------------------------------------------------------------------------


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _one_line(value: object) -> str:
    return " ".join(str(value).split())


def parked_note(parked_at: datetime, parked_reason: str | None) -> str:
    """How a view shows a parked row where it would show a due time."""
    return f"PARKED since {_iso(parked_at)}: {_one_line(parked_reason or '')}"


def render_parked(parked: Sequence[ParkedIntent]) -> str:
    lines = [f"parked intents ({len(parked)})"]
    for p in parked:
        key = f" (key {p.timer_key})" if p.timer_key else ""
        lines += [
            f"  {p.intent_id}",
            f"      {p.command} from {p.sender} to {p.target}{key}",
            f"      {parked_note(p.parked_at, p.parked_reason)}",
            f"      attempts {p.attempts}; staged {_iso(p.created_at)}; id expires {_iso(p.expires_at)}"
            + (" (expired: retry needs --new-id)" if p.expired else ""),
        ]
    return "\n".join(lines)


def parked_json(parked: Sequence[ParkedIntent]) -> str:
    def one(p: ParkedIntent) -> dict[str, Any]:
        data = attrs.asdict(p, value_serializer=lambda _, __, v: _iso(v) if isinstance(v, datetime) else v)
        data["sender"], data["target"] = str(p.sender), str(p.target)
        return data | {"expires_at": _iso(p.expires_at), "expired": p.expired}

    return json.dumps([one(p) for p in parked], indent=2, sort_keys=True)

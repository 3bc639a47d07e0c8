"""The SQL a turn sends: two simple-protocol batches calling the turn procedures
(``sql/functions/akter_turn_load_versioned.sql``, ``akter_turn_write.sql``, ``akter_turn_check.sql``).

A turn is two round trips: ``BEGIN; CALL akter_turn_load_versioned(...)`` and
``CALL akter_turn_write(...); COMMIT``. Parameters are bound client-side (``AsyncClientCursor``),
which is what lets one round trip carry two statements; PL/pgSQL prepares the statements inside
the procedures once per session and soon reuses a generic plan, so the server does not re-plan
them every turn. Every call names the routing key first, as every table's key starts with it.
``plan.py`` decides what to send and ``drive.py`` sends it; this module only spells it.
docs/performance.md compares this phrasing with the others measured.
"""

from __future__ import annotations

import functools
from typing import LiteralString, NamedTuple

_KEY: LiteralString = "%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s"

#: Locks the actor row (creating it on first use) and reads what a turn needs: one row, the
#: procedure's OUT parameters (passed as NULL, as CALL requires), ending with the actor's
#: version, for the process's memory of the actor (``cache.py``).
LOAD: LiteralString = (
    f"CALL akter_turn_load_versioned({_KEY}, %(command_id)s,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
)
BEGIN_AND_LOAD: LiteralString = "BEGIN; " + LOAD
#: the same batch: every load reads the version (the name kept for its callers)
BEGIN_AND_LOAD_VERSIONED: LiteralString = BEGIN_AND_LOAD

#: An optimistic turn's first statement: the row lock, and a check of what the process
#: assumed; SQLSTATE ``STALE`` when it does not hold.
CHECK: LiteralString = (
    f"CALL akter_turn_check({_KEY}, %(command_id)s, %(version)s, %(state_md5)s, %(shape)s,"
    " %(expires_ms)s, %(now_ms)s, %(behind_ms)s, NULL)"
)
STALE = "AKT01"


class Loaded(NamedTuple):
    """The row ``LOAD`` returns, in the order of the procedure's OUT parameters."""

    event_seq: int
    state: bytes | None
    #: the shape the state was written in (``akter.actor.upgrade``); None without a state
    state_shape: str | None
    #: the receipt of this command id, all None when there is none
    command: str | None
    payload_hash: bytes | None
    caller_key: str | None
    outcome: bytes | None
    #: the database clock (``akter_now()``) in ms since the epoch
    now_ms: int
    #: the actor's version (bumped by every committed turn)
    version: int | None = None


@functools.cache
def write(events: int) -> LiteralString:
    """The write call for a turn that emitted ``events`` events. Each event's tag and value is its
    own parameter (``%(tag0)s``, ``%(value0)s``, ...) inside ``ARRAY[...]``: psycopg quotes scalars
    several times faster than it quotes lists, and the text stays one per event count."""
    if events:
        tags = ", ".join(f"%(tag{i})s" for i in range(events))
        values = ", ".join(f"%(value{i})s" for i in range(events))
        arrays = f"ARRAY[{tags}]::text[], ARRAY[{values}]::bytea[]"
    else:
        arrays = "NULL, NULL"
    # assembled from fixed fragments and integers only, never from values
    return (
        f"CALL akter_turn_write({_KEY}, %(command_id)s, %(command)s, %(payload_hash)s,"
        f" %(caller_key)s, %(outcome)s, %(failed)s, %(expires_ms)s, %(state)s, %(state_shape)s,"
        f" %(event_seq)s, {arrays})"
    )


#: the versioned load alone, in a transaction the application opened (``joined.py``)
LOAD_IN_TRANSACTION: LiteralString = (
    f"CALL akter_turn_load_versioned({_KEY}, %(command_id)s,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
)

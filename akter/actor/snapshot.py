"""Answering a query (``akter.actor.query``): read its snapshot in one statement, then run its
handler on the ``View``.

The snapshot is one plain ``SELECT`` on an autocommit connection: the actor's last committed
state and its last ``recent`` events as they stood when the statement started, with the
database clock. A lost connection is retried, since a query is safe to repeat.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, LiteralString, TypeVar

import psycopg
import psycopg_pool
from returns.result import Result

from akter.actor._types import Actor
from akter.actor.query import Query, View, answer, check_query, decode_events
from akter.actor.upgrade import read_state
from akter.callers import Caller
from akter.errors import DatabaseUnavailable
from akter.ids import ActorRef
from akter.store.sqlstate import is_connection_lost

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a query's input type, named as in declare.py
O = TypeVar("O")  # noqa: E741 -- a query's output type, named as in declare.py

# One statement, one snapshot: the actor row, its state and its last events as they stood when
# it started. ``(SELECT 1)`` keeps one row for an actor that never committed a turn.
READ: LiteralString = """
SELECT g.event_seq, s.state, s.shape, (extract(epoch FROM akter_now()) * 1000)::bigint,
       e.sequence, e.tag, e.value, e.created_at
  FROM (SELECT 1) one
  LEFT JOIN actor_generations g
    ON g.routing_key = %(rk)s AND g.tenant = %(tenant)s
   AND g.actor_type = %(actor_type)s AND g.actor_id = %(actor_id)s
  LEFT JOIN actor_state s
    ON s.routing_key = %(rk)s AND s.tenant = %(tenant)s
   AND s.actor_type = %(actor_type)s AND s.actor_id = %(actor_id)s
  LEFT JOIN LATERAL (
        SELECT v.sequence, v.tag, v.value, v.created_at FROM actor_events v
         WHERE v.routing_key = %(rk)s AND v.tenant = %(tenant)s
           AND v.actor_type = %(actor_type)s AND v.actor_id = %(actor_id)s
         ORDER BY v.sequence DESC LIMIT %(recent)s) e ON true
 ORDER BY e.sequence
"""


async def read_view(
    conn: psycopg.AsyncConnection[Any], actor: Actor[S], ref: ActorRef, caller: Caller, recent: int
) -> View[S]:
    """The snapshot a query runs on, in one statement on an autocommit connection."""
    cur = await conn.execute(READ, {**ref.key_params(), "recent": recent}, prepare=True)
    rows = await cur.fetchall()
    seq, state_bytes, shape, now_ms = rows[0][:4]
    state = actor.initial_state() if state_bytes is None else read_state(actor, bytes(state_bytes), shape)
    events = decode_events(actor, [row[4:] for row in rows if row[4] is not None])
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    return View(ref=ref, caller=caller, state=state, sequence=seq or 0, recent=events, now=now)


async def run_query(
    pool: Any, query: Query[S, I, O], ref: ActorRef, payload: I, caller: Caller, *, budget: float
) -> Result[O, Exception]:
    """Check, read the snapshot from ``pool`` and answer. A lost connection is retried (a query
    is safe to repeat) until ``budget`` seconds passed, then ``DatabaseUnavailable``."""
    check_query(query, caller, payload)
    deadline = time.monotonic() + budget
    delay = 0.05
    while True:
        try:
            async with pool.connection() as conn:
                view = await read_view(conn, query.actor, ref, caller, query.recent)
            break
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            if not (isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc)):
                raise
            if time.monotonic() + delay > deadline:
                message = f"PostgreSQL stayed unreachable; {query!r} on {ref}: {exc}"
                raise DatabaseUnavailable(message) from exc
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
    return answer(query, view, payload)

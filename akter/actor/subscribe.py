"""Live subscriptions: an actor's events as they commit, and waiting for the first match.

``handle.events(after=seq)`` is an async iterator over the events of one actor with a sequence
above ``after``, in sequence order, each once, as they commit; ``handle.wait_for(EventType,
where=..., timeout=...)`` returns ``Some(event)`` for the first match (already committed or
still to come) or ``Nothing`` when ``timeout`` passes first.

Both read the actor's events after a cursor (the last sequence they handed out) and then wait.
What wakes them is the engine's one listener (``akter.store.listener``) on ``akter_events``: a
row trigger (``sql/functions/akter_events_notify.sql``) notifies the actor's routing key when a turn that
emitted events commits. The cursor, not the notification, is what makes them correct: a notification lost
while the listener reconnects, or a read that failed because PostgreSQL restarted, only means
the next read (after a wake, a reconnect, or the ``POLL_FALLBACK`` interval) returns more
events. Nothing is skipped and nothing repeats, because sequences are gap-free per actor and
each read starts after the last one handed out.

Reading events is a read like a query: the actor's access policy decides, and receives an
``EventStream`` member (``kind == "events"``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, LiteralString, TypeVar, cast

import attrs
import psycopg
import psycopg_pool
from returns.maybe import Maybe, Nothing, Some

from akter.actor.query import Event, decode_events
from akter.callers import Caller
from akter.errors import AccessDenied, ConfigurationError, InvalidInput
from akter.ids import ActorRef
from akter.store.sqlstate import is_connection_lost

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.actor.sender import Sender

E = TypeVar("E")

log = logging.getLogger("akter.subscribe")

#: the channel ``sql/functions/akter_events_notify.sql`` notifies; the payload is an actor's routing key
EVENTS_CHANNEL = "akter_events"
#: seconds between reads of a subscriber that no notification woke
POLL_FALLBACK = 1.0
#: seconds before the first retry of a read that failed; doubled up to ``POLL_FALLBACK``
RETRY_INITIAL = 0.05
#: events read per statement
BATCH = 500

READ_AFTER: LiteralString = """
SELECT sequence, tag, value, created_at FROM actor_events
 WHERE routing_key = %(rk)s AND tenant = %(tenant)s AND actor_type = %(actor_type)s
   AND actor_id = %(actor_id)s AND sequence > %(after)s
 ORDER BY sequence LIMIT %(limit)s
"""


@attrs.frozen
class EventStream:
    """What an access policy is asked about when a caller reads an actor's events."""

    actor: Any
    name: str = "akter.events"
    kind: str = "events"
    internal: bool = False


def check_reader(actor: Actor[Any], caller: Caller) -> None:
    if not actor.access(caller, cast(Any, EventStream(actor))):
        raise AccessDenied(f"{caller!r} may not read the events of {actor.name}")


def _check_after(after: object) -> int:
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise InvalidInput(f"after must be an event sequence (an int >= 0), got {after!r}")
    return after


async def _read(pool: Any, actor: Actor[Any], ref: ActorRef, after: int) -> tuple[Event, ...]:
    async with pool.connection() as conn:
        params = {**ref.key_params(), "after": after, "limit": BATCH}
        cur = await conn.execute(READ_AFTER, params, prepare=True)
        rows = await cur.fetchall()
    return decode_events(actor, rows)


async def batches(
    sender: Sender, actor: Actor[Any], ref: ActorRef, after: int, deadline: float | None
) -> AsyncGenerator[tuple[Event, ...]]:
    """Batches of events after ``after``, as they commit, until ``deadline`` (monotonic; None:
    forever). The first read is made even when the deadline has passed already."""
    cursor = _check_after(after)

    def left() -> float:
        wait = POLL_FALLBACK
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        return max(wait, 0.0)

    retry = RETRY_INITIAL
    # subscribe before the first read: an event committed after the read wakes us
    with sender.session.listener.subscribe(str(ref.routing_key), channel=EVENTS_CHANNEL) as woken:
        await woken.ready(left())
        while True:
            woken.clear()
            batch: tuple[Event, ...] = ()
            wait_at_most: float | None = None
            try:
                batch = await _read(sender.pool, actor, ref, cursor)
                retry = RETRY_INITIAL
            except psycopg_pool.PoolClosed as exc:
                raise ConfigurationError("this App was closed: start it again to read its events") from exc
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                # a database restart is an ordinary event: the cursor keeps our place, and the
                # read is tried again soon, whether or not a notification comes
                if not (isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc)):
                    raise
                log.warning("events of %s: database unreachable (%s); reading again", ref, exc)
                wait_at_most, retry = retry, min(retry * 2, POLL_FALLBACK)
            if batch:
                cursor = batch[-1].sequence
                yield batch
                if len(batch) == BATCH:
                    continue
            wait = left()
            if wait <= 0 and deadline is not None:
                return
            await woken.wait(wait if wait_at_most is None else min(wait, wait_at_most))


def events(
    sender: Sender, actor: Actor[Any], ref: ActorRef, caller: Caller, after: int
) -> AsyncIterator[Event]:
    """The events after ``after`` as they commit; the access policy and ``after`` are checked
    here, when the iterator is made, not at its first step."""
    check_reader(actor, caller)
    _check_after(after)
    return _events(sender, actor, ref, after)


async def _events(sender: Sender, actor: Actor[Any], ref: ActorRef, after: int) -> AsyncIterator[Event]:
    async with contextlib.aclosing(batches(sender, actor, ref, after, None)) as stream:
        async for batch in stream:
            for event in batch:
                yield event


async def wait_for(  # noqa: PLR0917 -- called by the handles only
    sender: Sender,
    actor: Actor[Any],
    ref: ActorRef,
    caller: Caller,
    event_type: type[E],
    where: Callable[[E], bool] | None,
    timeout: float | timedelta | None,
    after: int,
) -> Maybe[E]:
    check_reader(actor, caller)
    if actor.event_types.get(getattr(event_type, "__name__", "")) is not event_type:
        raise InvalidInput(f"{actor.name} declares no event type {event_type!r}")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    deadline = None if seconds is None else time.monotonic() + seconds
    async with contextlib.aclosing(batches(sender, actor, ref, after, deadline)) as stream:
        async for batch in stream:
            for event in batch:
                value = event.value
                if isinstance(value, event_type) and (where is None or where(value)):
                    return Some(value)
    return cast(Maybe[E], Nothing)

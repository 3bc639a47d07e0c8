"""What users need to test their own actors and workflows: the database clock and fault points.

**The clock.** All durable time (due times, timeouts, expiries) is ``akter_now()`` in the
database: the server's clock plus an offset stored in the ``akter_clock`` row. ``Clock`` moves
that offset, so every connection and every process a test starts sees the jump at once, and a
test can skip a day without sleeping::

    clock = akter.testing.Clock(database_url)
    await clock.advance(timedelta(days=1))

**Fault points.** ``crash(point)`` makes the process SIGKILL itself when it reaches ``point``;
``pause(point)`` blocks there until the test calls ``release()``::

    gate = akter.testing.pause("turn.before_commit", match="order-7")
    task = asyncio.create_task(handle.send(pay, Pay(...)))
    await gate.reached()      # the turn holds the actor's lock now
    ...                       # act: a second connection, a rival send
    gate.release()

Processes a test starts arm crashes through ``AKTER_FAULTS`` (see ``akter.faults``). The points
are listed in ``akter.faults.POINTS``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import LiteralString

import psycopg

from akter import faults
from akter.faults import POINTS, Crash, Pause

__all__ = ["POINTS", "Clock", "Crash", "Pause", "crash", "disarm_all", "pause"]


class Clock:
    """Moves the database clock of one database (every connection, every process)."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    async def _exec(self, sql: LiteralString, params: tuple[object, ...] = ()) -> datetime:
        async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as conn:
            if sql:
                await conn.execute(sql, params)
                # workers waiting on a timer re-read their due rows (see akter.outbox)
                await conn.execute("NOTIFY akter_wake")
            row = await (await conn.execute("SELECT akter_now()")).fetchone()
        if row is None:  # pragma: no cover - a SELECT without FROM always returns one row
            raise AssertionError("SELECT akter_now() returned no row")
        now: datetime = row[0]
        return now

    async def now(self) -> datetime:
        """The database clock now."""
        return await self._exec("")

    async def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward (or back, with a negative delta); returns the new time."""
        return await self._exec("UPDATE akter_clock SET clock_offset = clock_offset + %s", (delta,))

    async def set(self, when: datetime) -> datetime:
        """Set the clock to ``when`` (it keeps running from there)."""
        return await self._exec(
            "UPDATE akter_clock SET clock_offset = %s::timestamptz - statement_timestamp()", (when,)
        )

    async def reset(self) -> datetime:
        return await self._exec("UPDATE akter_clock SET clock_offset = interval '0'")


def crash(point: str, *, match: str | None = None) -> Crash:
    """SIGKILL this process when it reaches ``point`` (for ids equal to ``match``, if given)."""
    fault = Crash(point=point, match=match)
    faults.arm(fault)
    return fault


def pause(point: str, *, match: str | None = None, once: bool = True) -> Pause:
    """Block at ``point`` until ``release()``; await ``reached()`` to know it got there."""
    fault = Pause(point=point, match=match, once=once)
    faults.arm(fault)
    return fault


def disarm_all() -> None:
    faults.disarm_all()

"""``Clock``: moves the durable clock, ``akter_now()``, of one database for every connection and
every process at once (``akter.testing``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, LiteralString

import psycopg


class Clock:
    """Moves the database clock of one database (every connection, every process)."""

    def __init__(self, database_url: str, *, conn: psycopg.AsyncConnection[Any] | None = None) -> None:
        self.database_url = database_url
        #: an autocommit connection to use instead of a new one per call (it stays open)
        self.conn = conn

    async def _exec(self, sql: LiteralString, params: tuple[object, ...] = ()) -> datetime:
        if self.conn is not None:
            return await self._on(self.conn, sql, params)
        async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as conn:
            return await self._on(conn, sql, params)

    @staticmethod
    async def _on(
        conn: psycopg.AsyncConnection[Any], sql: LiteralString, params: tuple[object, ...]
    ) -> datetime:
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

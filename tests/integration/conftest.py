"""Fixtures shared by the integration tests: an App on a fresh database, and a second
connection (``peek``) through which tests read what a user would observe."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql

from akter import testing
from tests.apps import counter

Query = LiteralString | sql.Composed


class Peek:
    """Reads the database through its own autocommit connection, as an outside observer."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def rows(self, query: Query, *params: object) -> list[tuple[Any, ...]]:
        cur = await self.conn.execute(query, params)
        return await cur.fetchall()

    async def value(self, query: Query, *params: object) -> Any:
        rows = await self.rows(query, *params)
        return rows[0][0] if rows else None

    async def count(self, table: str, actor_id: str | None = None) -> int:
        count = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
        if actor_id is None:
            return int(await self.value(count))
        return int(await self.value(count + sql.SQL(" WHERE actor_id = %s"), actor_id))


@pytest.fixture
async def peek(database_url: str) -> AsyncIterator[Peek]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        yield Peek(conn)


@pytest.fixture
def clock(database_url: str) -> testing.Clock:
    return testing.Clock(database_url)


@pytest.fixture(autouse=True)
def _clean_process_state() -> Any:
    counter.RUNS.clear()
    yield
    testing.disarm_all()


@pytest.fixture
def polls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reads ``run.result()`` makes (``Run._poll``), by execution id, with no fallback poll
    within the test: every read counted is one a notification, a reconnect or the first check
    asked for, never one a slow moment of the machine added."""
    from akter.workflow.client import run as run_module
    from akter.workflow.client.run import Run

    monkeypatch.setattr(run_module, "POLL_FALLBACK", 3600.0)
    seen: list[str] = []
    original = Run._poll

    async def counted(self: Run[Any], conn: Any) -> Any:
        seen.append(self.execution_id)
        return await original(self, conn)

    monkeypatch.setattr(Run, "_poll", counted)
    return seen

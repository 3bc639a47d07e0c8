"""Dedicated connections: the few that akter opens outside a pool, and a registry of them.

Most work borrows pooled connections (``pool.py``); a pool closes what it opened. A few parts
hold a connection of their own for as long as they run — the relay's ownership heartbeat (so a
full pool never starves it), its ``LISTEN`` connection (a session that must never be inside a
transaction or handed to someone else) and its bucket release at stop. Those are opened through
``connect`` here, which remembers each one with where it was opened until it is closed.

A connection that reaches the garbage collector still open ends its server session only with
its socket, and psycopg warns (``ResourceWarning: ... was deleted while still open``) from
wherever the collector happened to run. ``open_connections`` lists what is open now, with the
place each was opened, so a test (``akter.pytest_plugin``) can fail at the end of the test that
leaked one, naming the code that opened it.
"""

from __future__ import annotations

import traceback
from datetime import timedelta
from typing import Any

import attrs
import psycopg

from akter.store.pool import connection_kwargs


@attrs.frozen
class Opened:
    """A dedicated connection and where it was opened (the innermost frames, innermost last)."""

    conn: psycopg.AsyncConnection[Any]
    name: str
    where: tuple[str, ...]


_OPEN: dict[int, Opened] = {}


async def connect(
    url: str, *, name: str, lock_timeout: timedelta | None = None
) -> psycopg.AsyncConnection[Any]:
    """A new autocommit connection with akter's session settings, registered until closed."""
    kwargs = (
        connection_kwargs(url, name=name)
        if lock_timeout is None
        else connection_kwargs(url, name=name, lock_timeout=lock_timeout)
    )
    conn = await psycopg.AsyncConnection.connect(url, **kwargs)
    where = _where()
    _forget_closed()
    _OPEN[id(conn)] = Opened(conn, name, where)
    return conn


async def close(conn: psycopg.AsyncConnection[Any] | None) -> None:
    """Close ``conn`` (None: nothing). Closing ends the session at once and never suspends, so a
    cancellation arriving meanwhile cannot leave it open."""
    if conn is None:
        return
    _OPEN.pop(id(conn), None)
    if not conn.closed:
        await conn.close()


def open_connections() -> list[Opened]:
    """The dedicated connections open right now, oldest first."""
    _forget_closed()
    return list(_OPEN.values())


def _where() -> tuple[str, ...]:
    # the caller's frames, without this module's and the event loop's
    frames = [
        f"{frame.filename}:{frame.lineno} in {frame.name}"
        for frame in traceback.extract_stack(limit=24)[:-2]
        if "/asyncio/" not in frame.filename and "site-packages" not in frame.filename
    ]
    return tuple(frames[-6:])


def _forget_closed() -> None:
    for key in [key for key, opened in _OPEN.items() if opened.conn.closed]:
        del _OPEN[key]

"""Connection pools, configured the one way every akter component expects.

Turns, the relay and the workflow driver borrow connections from a pool made here. Every
connection is in autocommit mode, so nothing is ever left open by accident: code that writes opens
an explicit transaction (``async with conn.transaction():``), and a connection waiting between
transactions holds no snapshot and no locks. Every session also carries a ``lock_timeout``, so a
turn blocked behind another transaction's row lock fails fast with ``LockNotAvailable`` (see
``akter.store.sqlstate.is_lock_timeout``) instead of queueing, and an ``application_name``, so
``pg_stat_activity`` shows which akter component holds a connection.

Settings travel in the connection's startup packet (libpq ``options``), which costs no round trip
and works the same over TCP and over the embedded server's Unix socket. Any ``options`` already
in the URL are kept; akter's come after them.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from akter.errors import ConfigurationError

_LOCK_TIMEOUT = timedelta(milliseconds=500)


async def open_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    lock_timeout: timedelta = _LOCK_TIMEOUT,
    name: str = "akter",
) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
    """An open async pool on ``url`` holding at least ``min_size`` ready connections.

    Raises ``psycopg_pool.PoolTimeout`` when the database cannot be reached in 30 seconds; the
    caller closes the pool (``await pool.close()``, or ``async with pool:``).
    """
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
        url,
        kwargs=connection_kwargs(url, lock_timeout=lock_timeout, name=name),
        min_size=min_size,
        max_size=max_size,
        name=name,
        open=False,
    )
    try:
        await pool.open(wait=True)
    except BaseException:
        await pool.close()
        raise
    return pool


def open_sync_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    lock_timeout: timedelta = _LOCK_TIMEOUT,
    name: str = "akter",
) -> ConnectionPool[psycopg.Connection[Any]]:
    """The synchronous twin of ``open_pool``, for scripts and the CLI."""
    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        url,
        kwargs=connection_kwargs(url, lock_timeout=lock_timeout, name=name),
        min_size=min_size,
        max_size=max_size,
        name=name,
        open=False,
    )
    try:
        pool.open(wait=True)
    except BaseException:
        pool.close()
        raise
    return pool


def connection_kwargs(
    url: str, *, lock_timeout: timedelta = _LOCK_TIMEOUT, name: str = "akter"
) -> dict[str, Any]:
    """The keyword arguments of ``psycopg.connect`` that give a connection akter's session settings.

    Also for code that opens a single connection outside a pool and wants the same behaviour.
    """
    if lock_timeout < timedelta(0):
        raise ConfigurationError(f"lock_timeout must not be negative, got {lock_timeout}")
    # Rounded up: a positive timeout below 1 ms must not become 0, which PostgreSQL reads as "off".
    milliseconds = math.ceil(lock_timeout / timedelta(milliseconds=1))
    ours = f"-c lock_timeout={milliseconds}ms"
    existing = str(conninfo_to_dict(url).get("options") or "")
    return {
        "autocommit": True,
        "application_name": name,
        "options": f"{existing} {ours}".strip(),
    }

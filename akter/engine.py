"""The engine: what an ``App`` is once it runs in an event loop, and the one place it is built.

``Engine.open`` resolves the database (``AKTER_DATABASE_URL`` or the embedded server), migrates
it when asked to or checks that it is migrated, opens the pool, reads the deployment (the retry
window, the database clock), refuses actor types that would misread stored data and stores the
App's manifests. From those parts it builds, bottom up:

- the ``Session`` (``akter.store.session``): pool, URL, retry window, database-clock estimate;
- the ``Sender`` (``akter.actor.sender``): turns with retries, on the session, for the App's
  declared actor types and the hooks of the layers above the kernel;
- the result ``Listener`` (``akter.store.listener``): one ``LISTEN`` connection for every
  ``run.result()`` waiter of the process.

Clients are handed the sender and the listener; each relay the sender, and its own workflow
runner (``App.plugins_for_relay``). No module below ``akter.app`` imports this one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

import psycopg
import psycopg_pool

from akter import faults
from akter.actor.cache import ActorCache
from akter.actor.compat import refuse_misreads
from akter.actor.declare import Actor
from akter.actor.kernel import TurnHook, TurnOptions
from akter.actor.manifest import accept as accept_actor_manifests
from akter.actor.sender import Sender
from akter.actor.subscribe import EVENTS_CHANNEL
from akter.errors import ConfigurationError, DatabaseUnavailable, SchemaError
from akter.store.background import one_line
from akter.store.database import ENV_DATABASE_URL, describe, resolve_database_url
from akter.store.listener import Listener
from akter.store.migrate import (
    MIGRATIONS_TABLE,
    ROUTINES_TABLE,
    check_recorded,
    known_migrations,
    stale_routines,
)
from akter.store.migrate import migrate as apply_migrations
from akter.store.pool import open_pool
from akter.store.session import Session, local_ms
from akter.store.sqlstate import is_connection_lost
from akter.workflow.engine.manifest_store import accept as accept_manifests

#: the channel a finish notifies on (``akter_wf_finish``): the execution id, with a small result
#: before it (``akter.workflow.client.run``)
FINISHED_CHANNEL = "akter_finished"


class Declarations(Protocol):
    """What an engine is built from: an ``akter.App`` (named here by its parts, so that this
    module does not import the App above it)."""

    @property
    def actors(self) -> Mapping[str, Actor[Any]]: ...
    @property
    def hooks(self) -> Sequence[TurnHook]: ...
    @property
    def database_url(self) -> str | None: ...
    @property
    def migrate_on_start(self) -> bool | None: ...
    @property
    def pool_size(self) -> int: ...
    @property
    def lock_timeout(self) -> timedelta: ...
    @property
    def busy_timeout(self) -> timedelta: ...


class Engine:
    """The live side of an App in one event loop: session, sender, result listener."""

    def __init__(self, app: Declarations, session: Session) -> None:
        self.app = app
        self.session = session
        options = TurnOptions(busy_timeout=app.busy_timeout, hooks=app.hooks, cache=ActorCache())
        self.sender = Sender(session, app.actors, options)
        self.loop = asyncio.get_running_loop()
        #: the one ``LISTEN`` connection every ``run.result()`` and event subscription shares
        self.results = session.listener

    @classmethod
    async def open(cls, app: Declarations, *, migrate: bool | None = None) -> Engine:
        """Start an engine for ``app``: ``DatabaseUnavailable`` when PostgreSQL cannot be reached
        (the pool waits up to 30 s for its first connection), ``SchemaError`` when it is not
        migrated, ``IncompatibleStoredData`` when the code would misread what is stored."""
        faults.load_environment()
        url = await asyncio.to_thread(resolve_database_url, app.database_url)
        try:
            return await cls._open(app, url, migrate)
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            if not (isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc)):
                raise
            raise DatabaseUnavailable(
                f"cannot reach PostgreSQL at {describe(url)} to start the engine: {one_line(exc)}"
            ) from exc

    @classmethod
    async def _open(cls, app: Declarations, url: str, migrate: bool | None) -> Engine:
        embedded = not (app.database_url or os.environ.get(ENV_DATABASE_URL))
        if migrate is None:
            migrate = app.migrate_on_start
        if migrate is None:
            migrate = embedded
        if migrate:
            await asyncio.to_thread(apply_migrations, url)
        pool = await open_pool(url, max_size=app.pool_size, lock_timeout=app.lock_timeout)
        try:
            async with pool.connection() as conn:
                if not migrate:
                    await _require_migrated(conn, url)
                window, now_ms = await _read_deployment(conn)
                # the estimate from the reading as it arrives, not after the declarations' writes
                skew_ms = now_ms - local_ms()
                await _accept_declarations(conn, app)
        except BaseException:
            await pool.close()
            raise
        listener = Listener(
            url,
            FINISHED_CHANNEL,
            channels=(EVENTS_CHANNEL,),
            noting=(FINISHED_CHANNEL,),
            name="akter-results",
        )
        session = Session(url, pool, listener, retry_window_ms=window, skew_ms=skew_ms)
        return cls(app, session)

    async def close(self) -> None:
        await self.session.close()


async def _read_deployment(conn: psycopg.AsyncConnection[Any]) -> tuple[int, int]:
    """The retry window and the database clock now, both in milliseconds."""
    cur = await conn.execute(
        "SELECT (extract(epoch FROM retry_window) * 1000)::bigint,"
        " (extract(epoch FROM akter_now()) * 1000)::bigint FROM actor_deployment"
    )
    row = await cur.fetchone()
    if row is None:
        raise ConfigurationError("actor_deployment is empty; the schema was not migrated by akter")
    return int(row[0]), int(row[1])


async def _accept_declarations(conn: psycopg.AsyncConnection[Any], app: Declarations) -> None:
    """Refuse actor types that would misread stored data (``IncompatibleStoredData``, before
    anything is written), then store the App's actor and workflow manifests. Every manifest
    this process may start executions under is stored before any start commits, so a runner
    can always load an execution's start manifest."""
    await refuse_misreads(conn, app.actors.values())
    await accept_actor_manifests(conn, app.actors.values())
    await accept_manifests(conn, app.actors.values())


async def _require_migrated(conn: psycopg.AsyncConnection[Any], url: str) -> None:
    """Refuse a database whose schema is not the one this akter ships: behind or with routines
    of another akter (run ``akter migrate``), ahead (a newer akter migrated it), or migrated by
    the squashed development history (``migrate.check_recorded``)."""
    migrations = known_migrations()
    newest = migrations[-1].version
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", [MIGRATIONS_TABLE])
    row = await cur.fetchone()
    recorded: dict[int, tuple[str, str]] = {}
    applied: dict[str, str] = {}
    if row is not None and row[0]:
        cur = await conn.execute("SELECT version, name, checksum FROM akter_schema_migrations")
        recorded = {version: (name, checksum) for version, name, checksum in await cur.fetchall()}
        cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", [ROUTINES_TABLE])
        row = await cur.fetchone()
        if row is not None and row[0]:
            cur = await conn.execute("SELECT name, checksum FROM akter_schema_routines")
            applied = dict(await cur.fetchall())
    check_recorded(recorded, migrations)
    version = max(recorded, default=0)
    if version < newest:
        raise SchemaError(
            f"the database {describe(url)} is at schema version {version}, this akter needs "
            f"{newest}: run `akter migrate` first, or start the App with migrate_on_start=True"
        )
    stale = stale_routines(applied)
    if stale:
        raise SchemaError(
            f"the database {describe(url)} holds routines other than this akter's "
            f"({', '.join(stale)}): run `akter migrate` first, or start the App with "
            "migrate_on_start=True"
        )

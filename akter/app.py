"""``App``: the declared actor types, how to reach their database, and the engine's lifecycle.

An ``App`` is a value users build at module level (``akter relay module:app`` imports it). It
holds declarations and settings; the live parts — the connection pool, the one result listener
(``akter.store.listener``), the retry window read from ``actor_deployment``, the estimate of the
database clock — are the engine (``akter.engine.Engine``). This module and ``akter.engine`` are
the composition root: they build the engine and hand clients and relays its parts, and no lower
module imports them.

The engine has an explicit lifecycle, once per process: ``async with app:`` (or ``await
app.start()`` / ``await app.close()``), or, for synchronous code, ``app.start_sync()`` /
``app.close_sync()`` (``with app.running():``), which run it on one event-loop thread of its own.
Starting resolves the database (``AKTER_DATABASE_URL`` or the embedded server), applies the
migrations when asked to (``migrate_on_start``) or else checks that they were applied, opens the
pool, reads the deployment and stores the App's manifests. Clients and relays borrowed from a
started App then cost nothing. A client of an App nobody started (a script) starts the engine
itself and closes it when the last such user is done.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

from akter.actor.client import _LoopThread, _Portal
from akter.actor.declare import Actor
from akter.actor.kernel import TurnHook
from akter.actor.sender import check_declared
from akter.callers import Caller
from akter.engine import Engine
from akter.errors import (
    ConfigurationError,
    DeclarationError,
)
from akter.operate.client import Client, SyncClient
from akter.operate.gauges import observe_database
from akter.outbox.intents import OutboxHook
from akter.outbox.relay import Relay, RelayPlugin, RelaySettings
from akter.tuning import EngineTuning
from akter.workflow.api import schedules
from akter.workflow.api.declare import workflows_of
from akter.workflow.core import children

log = logging.getLogger("akter")


class App:
    """The actor types of an application and the settings to run them.

    ``database_url``: a PostgreSQL URL; ``None`` reads ``AKTER_DATABASE_URL`` and, when that is
    unset too, starts the embedded PostgreSQL. ``lock_timeout`` bounds one wait for a busy actor
    row; ``busy_timeout`` bounds all such waits of one send (then ``ActorBusy``), and also how long
    a send keeps retrying while the database is unreachable.

    ``workflow_retention``: how long finished executions and their steps are kept (``None``: the
    deployment's setting, 7 days by default; never less than the retry window).
    ``drop_steps_at_finish`` deletes an execution's steps when it finishes, for deployments that
    want the smallest tables and need no inspection or replay of finished histories.
    ``failed_pass_limit``: how many passes of one execution may fail in a row (an exception
    escaping the pass itself, not a declared error) before it needs attention instead of being
    retried by its recovery timer again (``akter.workflow.engine.holds``).

    ``migrate_on_start``: apply the ``sql/`` migrations when the engine starts. ``None`` (the
    default) migrates only the embedded PostgreSQL (no ``database_url``, no
    ``AKTER_DATABASE_URL``), so the quick start needs no step; a configured database is
    migrated by ``akter migrate`` or ``akter relay``, and an App started on one that is behind
    raises ``SchemaError`` saying so."""

    def __init__(
        self,
        actors: Sequence[Actor[Any]],
        *,
        database_url: str | None = None,
        pool_size: int = 10,
        lock_timeout: timedelta = timedelta(milliseconds=500),
        busy_timeout: timedelta = timedelta(seconds=30),
        workflow_retention: timedelta | None = None,
        drop_steps_at_finish: bool = False,
        migrate_on_start: bool | None = None,
        failed_pass_limit: int = 5,
    ) -> None:
        problems: list[str] = []
        self.actors: dict[str, Actor[Any]] = {}
        for actor in actors:
            if not isinstance(actor, Actor):
                problems.append(f"{actor!r} is not an akter.Actor")
            elif actor.name in self.actors:
                problems.append(f"two actor types are named {actor.name!r}")
            else:
                self.actors[actor.name] = actor
        if pool_size < 1:
            problems.append(f"pool_size must be at least 1, got {pool_size}")
        problems.extend(children.undeclared_children(self.actors))
        if problems:
            raise DeclarationError("App", problems)
        self.database_url = database_url
        self.pool_size = pool_size
        self.lock_timeout = lock_timeout
        self.busy_timeout = busy_timeout
        self.workflow_retention = workflow_retention
        self.drop_steps_at_finish = drop_steps_at_finish
        self.migrate_on_start = migrate_on_start
        self.failed_pass_limit = failed_pass_limit
        #: the engine's timing and batching constants (``akter.tuning``)
        self.tuning = EngineTuning()
        #: layers above the kernel (outbox, workflows) that take part in every turn
        self.hooks: list[TurnHook] = [OutboxHook()]
        #: work that runs beside every relay of this App (the workflow passes)
        self.relay_plugins: list[RelayPlugin] = []
        if any(workflows_of(a) for a in self.actors.values()):
            self._add_workflows()
        if any(schedules.enabled(a) for a in self.actors.values()):
            from akter.workflow.client.schedule_admin import install

            install(self)
        #: the engine; ``_started`` when ``start()`` opened it (else a script's client did)
        self._engine: Engine | None = None
        self._started = False
        #: clients and relays using an engine that a script's client opened
        self._users = 0
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        #: the event-loop thread of ``start_sync()``
        self._portal: _LoopThread | None = None
        self._portal_lock = threading.Lock()

    def _add_workflows(self) -> None:
        from akter.workflow.engine.hook import WorkflowHook
        from akter.workflow.engine.host import Handoffs
        from akter.workflow.engine.runner import WorkflowRunner

        problems = [p for a in self.actors.values() for w in workflows_of(a).values() for p in w.validate()]
        if problems:
            raise DeclarationError("App", problems)
        # the runners a turn of this process hands its executions to, while their relays run
        handoffs = Handoffs()
        # first, so that workflow rows are written before the outbox rows of the same turn
        self.hooks.insert(0, WorkflowHook(self.actors, handoffs, self.tuning))
        self.workflow_runner = WorkflowRunner(
            self.actors,
            handoffs,
            self.tuning,
            retention=self.workflow_retention,
            drop_steps=self.drop_steps_at_finish,
            failed_pass_limit=self.failed_pass_limit,
        )
        self.relay_plugins.append(self.workflow_runner)

    def plugins_for_relay(self) -> list[RelayPlugin]:
        """What a new relay of this App runs beside it: a workflow runner of its own (the App's
        ``workflow_runner`` for the first relay running at a time) and any other plugins."""
        from akter.workflow.engine.runner import WorkflowRunner

        return [p.claim() if isinstance(p, WorkflowRunner) else p for p in self.relay_plugins]

    def check_declared(self, actor: Actor[Any]) -> None:
        """Refuse an actor type that is not part of this App (``ConfigurationError``)."""
        check_declared(self.actors, actor)

    # --- lifecycle ---

    async def start(self, *, migrate: bool | None = None) -> None:
        """Start the engine in this event loop, once per process: resolve the database, migrate
        it (``migrate``, else ``migrate_on_start``) or check that it is migrated, open the pool,
        read the deployment, store the manifests. Starting a started App does nothing."""
        async with self._guard():
            engine = self._live_engine()
            if engine is not None and engine.loop is not asyncio.get_running_loop():
                raise ConfigurationError(
                    "this App's engine runs in another event loop (start_sync(), or another "
                    "thread); use it from there, or app.sync_client() from plain threads"
                )
            if engine is None:
                self._engine = await Engine.open(self, migrate=migrate)
            self._started = True

    async def close(self) -> None:
        """Close the engine: its listener, then its pool. Closing a closed App does nothing.
        Clients and relays borrowed from it must be done with first."""
        async with self._guard():
            engine, self._engine = self._engine, None
            self._started = False
            if engine is not None:
                if engine.loop is not asyncio.get_running_loop():
                    self._engine = engine
                    raise ConfigurationError(
                        "this App was started with start_sync(); close it with close_sync()"
                    )
                await engine.close()

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start_sync(self, *, migrate: bool | None = None) -> None:
        """Start the engine for synchronous code (Django, Flask), once per process: on one
        event-loop thread of its own, which every ``app.sync_client()`` then borrows, from any
        thread. Starting a started App does nothing; pair it with ``close_sync()``."""
        with self._portal_lock:
            if self._portal is not None:
                return
            portal = _LoopThread("akter-engine")
            try:
                portal.run(self.start(migrate=migrate))
            except BaseException:
                portal.stop()
                raise
            self._portal = portal

    def close_sync(self) -> None:
        """Close what ``start_sync()`` started, and stop its thread. Idempotent."""
        with self._portal_lock:
            portal, self._portal = self._portal, None
            if portal is None:
                return
            try:
                portal.run(self.close())
            finally:
                portal.stop()

    @contextmanager
    def running(self) -> Iterator[App]:
        """``with app.running():`` — ``start_sync()`` on entry, ``close_sync()`` on exit."""
        self.start_sync()
        try:
            yield self
        finally:
            self.close_sync()

    def _live_engine(self) -> Engine | None:
        engine = self._engine
        if engine is not None and engine.loop.is_closed():
            # started in a loop that ended without close() (a test's loop, an asyncio.run): its
            # connections went with that loop; this loop starts afresh
            log.warning("the engine of this App was never closed and its event loop has ended")
            self._engine, self._started, self._users = None, False, 0
            return None
        return engine

    def _guard(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def engine(self) -> Engine:
        """The engine of this event loop, started (``start()``) if it was not."""
        await self.start()
        if self._engine is None:  # pragma: no cover -- start() sets it or raises
            raise RuntimeError("the App's engine did not start")
        return self._engine

    @asynccontextmanager
    async def _borrow(self) -> AsyncIterator[Engine]:
        engine = self._live_engine()
        if engine is not None and engine.loop is not asyncio.get_running_loop():
            if self._started:
                raise ConfigurationError(
                    "this App's engine runs in another event loop (start_sync(), or another "
                    "thread); use app.sync_client() here, or start the App in this loop"
                )
            # a script's engine in another loop (another thread): this use opens its own
            private = await Engine.open(self)
            try:
                yield private
            finally:
                await private.close()
            return
        async with self._guard():
            if self._engine is None:
                self._engine = await Engine.open(self)
            engine = self._engine
            self._users += 1
        try:
            yield engine
        finally:
            self._users -= 1
            if self._users == 0 and not self._started and self._engine is engine:
                await self.close()

    # --- borrowing ---

    @asynccontextmanager
    async def client(self, caller: Caller | None = None) -> AsyncIterator[Client]:
        """``async with app.client() as client``. From a started App (``async with app:``) a
        client is cheap: it borrows the engine's pool, listener and clock, and opens nothing.

        Without a started App — a script — it starts the engine itself and closes it when the
        last such client or relay exits. Each such start resolves the database, checks or
        migrates it, opens a pool and stores the manifests: a web handler should not rely on it;
        start the App once per process instead."""
        async with self._borrow() as engine:
            yield Client(engine.sender, engine.results, caller)

    @asynccontextmanager
    async def relay(self, settings: RelaySettings | None = None) -> AsyncIterator[Relay]:
        """``async with app.relay() as relay``: the relay in this process, on the started engine
        (or on one it starts for the block, like a script's client), sharing bucket ownership
        with any ``akter relay`` processes on the same database. ``await relay.idle()`` waits
        until nothing it owns is due; leaving the block drains it."""
        async with self._borrow() as engine:
            relay = Relay(engine.sender, settings, plugins=self.plugins_for_relay())
            # a relay reports the database's gauges (executions by status, the outbox backlog)
            # to whatever OpenTelemetry SDK the process configured; with none, nothing reads them
            gauges = observe_database(engine.session.url)
            try:
                await relay.start()
                yield relay
            finally:
                gauges.close()
                await relay.stop()

    @contextmanager
    def sync_client(self, caller: Caller | None = None) -> Iterator[SyncClient]:
        """``with app.sync_client() as client``: the blocking facade, safe to use from any thread.

        After ``app.start_sync()`` it borrows the started engine and its event-loop thread, and
        opens nothing; so it does from the worker threads of an async server that started the
        App in its event loop (``async with app:`` in an ASGI lifespan). Without a started App —
        a script — it starts a private engine on a private thread for the block, and closes both
        at its end."""
        engine = self._engine
        portal: _Portal | None = self._portal
        if portal is None and engine is not None and self._started and engine.loop.is_running():
            # started by an async server (an ASGI lifespan) whose sync views run in threads
            portal = _Portal(engine.loop)
        if portal is not None and engine is not None:
            yield SyncClient(portal, Client(engine.sender, engine.results, caller))
            return
        loop = _LoopThread()
        try:
            private = loop.run(Engine.open(self))
            try:
                yield SyncClient(loop, Client(private.sender, private.results, caller))
            finally:
                loop.run(private.close())
        finally:
            loop.stop()

"""``App``: the declared actor types plus how to reach their database.

An ``App`` is a value users build at module level (``akter relay module:app`` imports it). It
holds declarations and settings only; the live parts — the connection pool, the retry window
read from ``actor_deployment``, the client's estimate of the database clock — are a ``Runtime``,
opened by ``app.client()`` (or ``app.sync_client()`` in its own thread) and closed with it.
Starting a runtime resolves the database (``AKTER_DATABASE_URL`` or the embedded server) and
applies migrations.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import psycopg_pool

from akter import faults
from akter.actor.client import _LoopThread
from akter.actor.compat import refuse_misreads
from akter.actor.declare import Actor, Command
from akter.actor.kernel import Committed, TurnHook, TurnOptions, run_turn
from akter.actor.manifest import accept as accept_actor_manifests
from akter.callers import Caller
from akter.errors import CommandExpired, ConfigurationError, DatabaseUnavailable, DeclarationError
from akter.ids import ActorRef, CommandId
from akter.outbox.intents import OutboxHook
from akter.outbox.relay import Relay, RelayPlugin, RelaySettings
from akter.store.database import resolve_database_url
from akter.store.migrate import migrate
from akter.store.pool import open_pool
from akter.store.sqlstate import is_connection_lost
from akter.workflow.manifest import accept as accept_manifests
from akter.workflow.run import SyncWorkflowClient, WorkflowClient

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
    want the smallest tables and need no inspection or replay of finished histories."""

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
        if problems:
            raise DeclarationError("App", problems)
        self.database_url = database_url
        self.pool_size = pool_size
        self.lock_timeout = lock_timeout
        self.busy_timeout = busy_timeout
        self.workflow_retention = workflow_retention
        self.drop_steps_at_finish = drop_steps_at_finish
        #: layers above the kernel (outbox, workflows) that take part in every turn
        self.hooks: list[TurnHook] = [OutboxHook()]
        #: work that runs beside every relay of this App (the workflow passes)
        self.relay_plugins: list[RelayPlugin] = []
        if any(a.extensions.get("workflows") for a in self.actors.values()):
            self._add_workflows()
        self._runtime: Runtime | None = None
        self._users = 0
        self._lock = asyncio.Lock()

    def _add_workflows(self) -> None:
        from akter.workflow.hook import WorkflowHook
        from akter.workflow.runner import WorkflowRunner

        problems = [
            p
            for a in self.actors.values()
            for w in a.extensions.get("workflows", {}).values()
            for p in w.validate()
        ]
        if problems:
            raise DeclarationError("App", problems)
        hook = WorkflowHook(self.actors)
        # first, so that workflow rows are written before the outbox rows of the same turn
        self.hooks.insert(0, hook)
        self.workflow_runner = WorkflowRunner(
            self, hook, retention=self.workflow_retention, drop_steps=self.drop_steps_at_finish
        )
        self.relay_plugins.append(self.workflow_runner)

    def check_declared(self, actor: Actor[Any]) -> None:
        from akter.actor.declare import Actor as ActorType

        if not isinstance(actor, ActorType):
            raise ConfigurationError(f"client.actor() takes an akter.Actor, got {type(actor).__name__}")
        if self.actors.get(actor.name) is not actor:
            raise ConfigurationError(f"{actor!r} is not part of this App; pass it to akter.App([...])")

    async def runtime(self) -> Runtime:
        """The running runtime of this event loop, opened on first use."""
        async with self._lock:
            if self._runtime is None:
                self._runtime = await Runtime.open(self)
            return self._runtime

    @asynccontextmanager
    async def client(self, caller: Caller | None = None) -> AsyncIterator[WorkflowClient]:
        """``async with app.client() as client``: opens the runtime on first use and closes it
        when the last client context exits."""
        runtime = await self.runtime()
        self._users += 1
        try:
            yield WorkflowClient(runtime, caller)
        finally:
            self._users -= 1
            if self._users == 0:
                await self.close()

    @asynccontextmanager
    async def relay(self, settings: RelaySettings | None = None) -> AsyncIterator[Relay]:
        """``async with app.relay() as relay``: the relay in this process, on this App's runtime,
        sharing bucket ownership with any ``akter relay`` processes on the same database.
        ``await relay.idle()`` waits until nothing it owns is due; leaving the block drains it."""
        runtime = await self.runtime()
        self._users += 1
        relay = Relay(runtime, settings, plugins=self.relay_plugins)
        try:
            await relay.start()
            yield relay
        finally:
            try:
                await relay.stop()
            finally:
                self._users -= 1
                if self._users == 0:
                    await self.close()

    async def close(self) -> None:
        async with self._lock:
            if self._runtime is not None:
                runtime, self._runtime = self._runtime, None
                await runtime.close()

    @contextmanager
    def sync_client(self, caller: Caller | None = None) -> Iterator[SyncWorkflowClient]:
        """``with app.sync_client() as client``: the blocking facade, with its own pool."""
        loop = _LoopThread()
        try:
            runtime = loop.run(Runtime.open(self))
            try:
                yield SyncWorkflowClient(loop, WorkflowClient(runtime, caller))
            finally:
                loop.run(runtime.close())
        finally:
            loop.stop()


class Runtime:
    """The live side of an App in one event loop: pool, retry window, database clock estimate."""

    def __init__(
        self,
        app: App,
        url: str,
        pool: psycopg_pool.AsyncConnectionPool[Any],
        retry_window_ms: int,
        skew_ms: int,
    ) -> None:
        self.app = app
        self.url = url
        self.pool = pool
        self.retry_window_ms = retry_window_ms
        #: database clock minus local clock, refreshed by every turn; ids are minted on it
        self.skew_ms = skew_ms
        self.options = TurnOptions(busy_timeout=app.busy_timeout, hooks=app.hooks)

    @classmethod
    async def open(cls, app: App) -> Runtime:
        faults.load_environment()
        url = await asyncio.to_thread(resolve_database_url, app.database_url)
        await asyncio.to_thread(migrate, url)
        pool = await open_pool(url, max_size=app.pool_size, lock_timeout=app.lock_timeout)
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT (extract(epoch FROM retry_window) * 1000)::bigint,"
                    " (extract(epoch FROM akter_now()) * 1000)::bigint FROM actor_deployment"
                )
                row = await cur.fetchone()
                await _accept_declarations(conn, app)
        except BaseException:
            await pool.close()
            raise
        if row is None:
            raise ConfigurationError("actor_deployment is empty; the schema was not migrated by akter")
        window, now_ms = row
        return cls(app, url, pool, window, now_ms - _local_ms())

    async def close(self) -> None:
        await self.pool.close()

    def mint_command_id(self) -> CommandId:
        return CommandId.mint(_local_ms() + self.skew_ms, self.retry_window_ms)

    async def send(
        self,
        ref: ActorRef,
        command: Command[Any, Any, Any],
        payload: object,
        command_id: CommandId | None,
        caller: Caller,
    ) -> Committed:
        """Run one turn, retrying lost connections with the same id until ``busy_timeout``.

        An id minted here that the database finds expired (the database clock moved past this
        process's estimate, as when a test jumps it) is re-minted once: nothing was written. A
        caller's own id (an activity's derived id) is never re-minted: its ``CommandExpired``
        reaches the caller. Either way the refusal corrects this process's clock estimate."""
        minted = command_id is None
        cid = command_id or self.mint_command_id()
        deadline = time.monotonic() + self.app.busy_timeout.total_seconds()
        delay = 0.05
        while True:
            try:
                async with self.pool.connection() as conn:
                    record = await run_turn(conn, command, ref, payload, cid, caller, self.options)
            except CommandExpired as exc:
                self.skew_ms = exc.database_now_ms - _local_ms()
                if not minted:
                    raise
                minted = False
                cid = self.mint_command_id()
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                if not (isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc)):
                    raise
                if time.monotonic() + delay > deadline:
                    raise DatabaseUnavailable(
                        f"PostgreSQL stayed unreachable past busy_timeout; {command!r} to {ref} "
                        f"(command id {cid}) may not have committed, send it again with that id: {exc}"
                    ) from exc
                log.warning("database unreachable (%s); retrying %s in %.2fs", exc, cid, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            else:
                self.skew_ms = record.now_ms - _local_ms()
                return record


async def _accept_declarations(conn: psycopg.AsyncConnection[Any], app: App) -> None:
    """Refuse actor types that would misread stored data (``IncompatibleStoredData``, before
    anything is written), then store the App's actor and workflow manifests. Every manifest
    this process may start executions under is stored before any start commits, so a runner
    can always load an execution's start manifest."""
    await refuse_misreads(conn, app.actors.values())
    await accept_actor_manifests(conn, app.actors.values())
    await accept_manifests(conn, app.actors.values())


def _local_ms() -> int:
    return time.time_ns() // 1_000_000

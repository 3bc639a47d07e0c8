"""Turns inside the application's own transaction: ``client.with_connection(conn)``.

Applications that write to the same PostgreSQL want "save the order and start its workflow" to
commit or roll back together. ``client.with_connection(conn)`` gives a client whose sends (and
the workflow starts, staged intents and events of their turns) are written through ``conn`` —
a psycopg connection whose transaction the application owns — instead of through the engine's
pool, each turn inside a savepoint of that transaction:

- nothing is committed here: the receipt, state, events, outbox rows and workflow rows become
  visible when the application commits, and a rollback (or a crash before the commit) leaves
  no trace of them;
- nothing is published before that commit: the notifications a turn sends (an intent due now,
  a started workflow, committed events) are delivered by PostgreSQL at the commit, and the
  in-process actions a pooled turn runs after its commit (``Committed.on_commit``,
  ``TurnHook.after_commit``) are not run, so no relay acts on work that may yet roll back;
- the actor's row lock is held from the turn until the application's transaction ends, so keep
  that transaction short; a turn waits for the lock as long as the connection's own
  ``lock_timeout`` lets it (then ``ActorBusy``);
- a turn that fails (a defect, a refused command id) is rolled back to its savepoint and
  raises; the application's transaction stays usable. A declared failure writes its failure
  receipt, as a pooled turn does, which commits or rolls back with the application.

The same turn logic as ``kernel.py`` runs here (it is reused, not copied): only the transaction
around it differs. An async client takes a ``psycopg.AsyncConnection``; the sync client a
``psycopg.Connection``, whose statements run in the calling thread (``Inline``), never on the
engine's event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import attrs
import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from returns.result import Success

from akter.actor import queries
from akter.actor.declare import Command
from akter.actor.kernel import (
    Committed,
    TurnOptions,
    _handle,
    _prepare_write,
    _replay,
    _Request,
    prepare_request,
)
from akter.actor.sender import Sender
from akter.callers import Caller
from akter.errors import ActorBusy, CommandExpired, ConfigurationError
from akter.ids import ActorRef, CommandId
from akter.store.sqlstate import is_lock_timeout

T = TypeVar("T")

SAVEPOINT = "akter_turn"

Connection = psycopg.Connection[Any] | psycopg.AsyncConnection[Any]


class _SyncCursor:
    """An awaitable face on a sync cursor, for the hooks (which are written for async)."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    async def fetchone(self) -> Any:
        return self._cur.fetchone()

    async def fetchall(self) -> list[Any]:
        return self._cur.fetchall()


class SyncAsAsync:
    """An awaitable face on a sync connection: every call blocks and returns, so a coroutine
    using it never suspends and ``Inline`` can drive it in the calling thread."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    async def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None) -> _SyncCursor:
        return _SyncCursor(self._conn.execute(query, params, prepare=prepare))

    async def call(self, query: str, params: Mapping[str, Any], *, fetch: bool = True) -> Any:
        """A ``CALL`` with client-side binding (as the kernel sends it); its OUT row."""
        cur = psycopg.ClientCursor(self._conn)
        cur.execute(query, params)
        return cur.fetchone() if fetch else None

    async def first(self, query: Any, params: Mapping[str, Any]) -> Any:
        """A statement's first row, or None when it returns no rows."""
        cur = psycopg.ClientCursor(self._conn)
        cur.execute(query, params)
        return cur.fetchone() if cur.description is not None else None


class _AsyncDb:
    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn

    async def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None) -> Any:
        return await self._conn.execute(query, params, prepare=prepare)

    async def call(self, query: str, params: Mapping[str, Any], *, fetch: bool = True) -> Any:
        cur = psycopg.AsyncClientCursor(self._conn)
        await cur.execute(query, params)
        return await cur.fetchone() if fetch else None

    async def first(self, query: Any, params: Mapping[str, Any]) -> Any:
        cur = psycopg.AsyncClientCursor(self._conn)
        await cur.execute(query, params)
        return await cur.fetchone() if cur.description is not None else None


def _db(conn: Connection) -> Any:
    return _AsyncDb(conn) if isinstance(conn, psycopg.AsyncConnection) else SyncAsAsync(conn)


def check_connection(conn: object, url: str, *, sync: bool) -> None:
    """Refuse what cannot join: the wrong kind of connection, or one to another database."""
    kind = psycopg.Connection if sync else psycopg.AsyncConnection
    if not isinstance(conn, kind):
        raise ConfigurationError(
            f"with_connection() of the {'sync' if sync else 'async'} client takes a "
            f"psycopg.{kind.__name__}, got {type(conn).__name__}"
        )
    ours = conninfo_to_dict(url).get("dbname")
    if ours is not None and conn.info.dbname != ours:
        raise ConfigurationError(
            f"with_connection(): the connection is to database {conn.info.dbname!r}, the App's is "
            f"{ours!r}; akter's rows and the application's must share one database to commit together"
        )


def _check_joinable(conn: Connection) -> None:
    if conn.closed:
        raise ConfigurationError("with_connection(): the connection is closed")
    if conn.autocommit and conn.info.transaction_status == pq.TransactionStatus.IDLE:
        raise ConfigurationError(
            "with_connection(): the connection is in autocommit mode outside a transaction, so "
            "there is no transaction to join; open one first (with conn.transaction(): ...)"
        )


async def run_joined_turn(  # noqa: PLR0917 -- mirrors kernel.run_turn
    conn: Connection,
    command: Command[Any, Any, Any],
    ref: ActorRef,
    payload: object,
    command_id: CommandId,
    caller: Caller,
    options: TurnOptions,
) -> Committed:
    """One turn in a savepoint of ``conn``'s open transaction; see the module docstring. A
    connection that cannot join is refused before anything about the command is checked."""
    _check_joinable(conn)
    request = prepare_request(command, ref, payload, command_id, caller)
    db = _db(conn)
    await db.execute(f"SAVEPOINT {SAVEPOINT}")
    try:
        record, keep = await _joined_once(db, conn, request, options)
    except BaseException as exc:
        # the turn's writes go; the application's transaction before the savepoint stays
        with contextlib.suppress(psycopg.Error):  # a broken connection has nothing to roll back
            await _rollback_to(db, conn)
        if isinstance(exc, psycopg.Error) and is_lock_timeout(exc):
            raise ActorBusy(f"{ref} stayed locked past this connection's lock_timeout") from exc
        raise
    if keep:
        await db.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")
    else:
        await _rollback_to(db, conn)
    return record


async def _rollback_to(db: Any, conn: Connection) -> None:
    if conn.closed or conn.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    await db.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
    await db.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")


async def _joined_once(
    db: Any, conn: Connection, request: _Request, options: TurnOptions
) -> tuple[Committed, bool]:
    """Lock and load, resolve the receipt, run the handler, write; whether to keep the writes
    (a replay writes nothing and releases the lock)."""
    fetched = await db.call(queries.LOAD, request.params)
    row = queries.Loaded(*fetched)
    if request.command_id.expires_ms < row.now_ms:
        raise CommandExpired(
            f"command id {request.command_id} expired {row.now_ms - request.command_id.expires_ms} ms ago",
            database_now_ms=row.now_ms,
        )
    if row.command is not None:
        return _replay(request, row), False
    turn, outcome = await _handle(request, row)
    write, record = _prepare_write(request, row, turn, outcome)
    record = attrs.evolve(record, joined=True)
    hook_conn = conn if isinstance(conn, psycopg.AsyncConnection) else db
    if isinstance(outcome, Success):
        for hook in options.hooks:
            await hook.before_commit(hook_conn, turn, record)
    # the hooks' statements (``Committed.with_write``), before the turn's own write, as the
    # kernel sends them; their answers come now, as nothing after the commit runs here
    for query, args, answer in record._batched:
        answered = await db.first(query, args)
        if answer is not None:
            answer(answered)
    await db.call(queries.write(len(record.events)), write, fetch=False)
    return record, True


class JoinedSender(Sender):
    """What a client sends through when its turns join the application's transaction: the
    engine's ``send`` replaced by a joined turn on ``conn``; everything else (the pool for
    reads, the listener, the clock) is the engine's session."""

    def __init__(self, sender: Sender, conn: Connection) -> None:
        super().__init__(sender.session, sender.actors, sender.options)
        self.conn = conn

    async def send(
        self,
        ref: ActorRef,
        command: Command[Any, Any, Any],
        payload: object,
        command_id: CommandId | None,
        caller: Caller,
    ) -> Committed:
        """One joined turn. An id minted here that the database finds expired is re-minted
        once, as the engine's send does (the savepoint rolled back, nothing was written)."""
        minted = command_id is None
        cid = command_id or self.session.mint_command_id()
        try:
            record = await run_joined_turn(self.conn, command, ref, payload, cid, caller, self.options)
        except CommandExpired as exc:
            self.session.observe_clock(exc.database_now_ms)
            if not minted:
                raise
            cid = self.session.mint_command_id()
            record = await run_joined_turn(self.conn, command, ref, payload, cid, caller, self.options)
        return record


class Inline:
    """A portal that runs a coroutine in the calling thread, to its end, without an event loop:
    for coroutines that never suspend (a joined turn on a sync connection). One that would
    suspend is a bug in akter, said so."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            coro.send(None)
        except StopIteration as done:
            value: T = done.value
            return value
        coro.close()
        raise RuntimeError("a call on a sync connection tried to wait on an event loop")

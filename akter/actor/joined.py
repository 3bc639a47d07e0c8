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

The turn is the plan every turn runs (``plan.py``); this module is its third driver, beside the
pooled and the optimistic ones (``drive.py``): only the transaction around it differs, and a
hook's batched statements are sent one by one. An async client takes a
``psycopg.AsyncConnection``; the sync client a ``psycopg.Connection``, whose statements run in
the calling thread (``Inline``), never on the engine's event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine, Mapping
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

from akter.actor import plan, queries
from akter.actor.declare import Command
from akter.actor.drive import drive
from akter.actor.kernel import Answer, Committed, Read, Request, TurnOptions, prepare_request
from akter.actor.sender import Sender
from akter.callers import Caller
from akter.errors import ActorBusy, CommandExpired, ConfigurationError
from akter.ids import ActorRef, CommandId
from akter.store.sqlstate import is_lock_timeout

T = TypeVar("T")

SAVEPOINT: LiteralString = "SAVEPOINT akter_turn"
RELEASE: LiteralString = "RELEASE SAVEPOINT akter_turn"
ROLLBACK_TO: LiteralString = "ROLLBACK TO SAVEPOINT akter_turn"

Connection = psycopg.Connection[Any] | psycopg.AsyncConnection[Any]


class _Joined:
    """The application's connection, sync or async, behind awaitables: a sync one's calls
    block and return, so a coroutine using it never suspends and ``Inline`` can drive it."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def execute(self, query: Any, params: Mapping[str, Any] | None = None) -> Answer:
        """A statement as the application's connection runs it (server-side binding)."""
        conn = self.conn
        if isinstance(conn, psycopg.AsyncConnection):
            acur = await conn.execute(query, params)
            rows = await acur.fetchall() if acur.description is not None else []
            return Answer(tuple(rows), acur.rowcount)
        cur = conn.execute(query, params)
        return Answer(tuple(cur.fetchall() if cur.description is not None else []), cur.rowcount)

    async def first(self, query: Any, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """A statement bound client-side, as the pooled turn sends it (a ``CALL``, a hook's
        batched statement); its first row, or None when it returns no rows."""
        conn = self.conn
        if isinstance(conn, psycopg.AsyncConnection):
            acur = psycopg.AsyncClientCursor(conn)
            await acur.execute(query, params)
            return await acur.fetchone() if acur.description is not None else None
        cur = psycopg.ClientCursor(conn)
        cur.execute(query, params)
        return cur.fetchone() if cur.description is not None else None


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


async def run_joined_turn(conn: Connection, request: Request, options: TurnOptions) -> Committed:
    """One turn in a savepoint of ``conn``'s open transaction; see the module docstring."""
    db = _Joined(conn)
    await db.execute(SAVEPOINT)
    try:
        record = await _joined(db, request, options)
    except BaseException as exc:
        # the turn's writes go; the application's transaction before the savepoint stays
        with contextlib.suppress(psycopg.Error):  # a broken connection has nothing to roll back
            await _rollback_to(db)
        if isinstance(exc, psycopg.Error) and is_lock_timeout(exc):
            raise ActorBusy(f"{request.ref} stayed locked past this connection's lock_timeout") from exc
        raise
    if record.replayed:
        await _rollback_to(db)  # a replay wrote nothing; the lock it took is let go
    else:
        await db.execute(RELEASE)
    return record


async def _rollback_to(db: _Joined) -> None:
    if db.conn.closed or db.conn.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    await db.execute(ROLLBACK_TO)
    await db.execute(RELEASE)


async def _joined(db: _Joined, request: Request, options: TurnOptions) -> Committed:
    """The plan driven on the application's connection: the load in its transaction, the
    hooks' statements one by one before the turn's write, their answers at once (nothing runs
    after the application's commit here), no commit."""

    async def serve(step: plan.Step) -> Any:
        match step:
            case plan.Load():
                fetched = await db.first(queries.LOAD_IN_TRANSACTION, request.params)
                if fetched is None:  # pragma: no cover - the procedure always returns the locked row
                    raise AssertionError(f"akter_turn_load_versioned returned no row for {request.ref}")
                return queries.Loaded(*fetched)
            case Read(query=query, params=params):
                return await db.execute(query, params)
            case plan.Commit(statements=statements, write=(write, params)):
                answers = [await db.first(query, args) for query, args in statements]
                await db.first(write, params)
                return answers
        raise AssertionError(step)  # pragma: no cover

    done = await drive(plan.turn(request, options.hooks, joined=True), request, serve)
    if not isinstance(done, plan.Done):  # pragma: no cover - only a turn on memory falls back
        raise TypeError(done)
    return done.record


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
        """One joined turn. A connection that cannot join is refused before anything about the
        command is checked. An id minted here that the database finds expired is re-minted
        once, as the engine's send does (the savepoint rolled back, nothing was written)."""
        _check_joinable(self.conn)
        minted = command_id is None
        cid = command_id or self.session.mint_command_id()
        try:
            request = prepare_request(command, ref, payload, cid, caller)
            return await run_joined_turn(self.conn, request, self.options)
        except CommandExpired as exc:
            self.session.observe_clock(exc.database_now_ms)
            if not minted:
                raise
            request = prepare_request(command, ref, payload, self.session.mint_command_id(), caller)
            return await run_joined_turn(self.conn, request, self.options)


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

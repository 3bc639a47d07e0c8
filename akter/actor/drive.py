"""The pooled and the optimistic drivers of the turn plan (``plan.py``), and ``run_turn``.

``run_turn`` handles one command on an autocommit connection of the engine's pool. A turn is two
round trips: ``BEGIN`` with the lock and load, and the hooks' statements with the write and
``COMMIT`` (client-side binding is what lets one round trip carry several statements: the simple
query protocol; ``queries.py``, docs/performance.md). A lock timeout (another transaction holds
the row) is retried with backoff, each retry taking the lock before it enters the handler, until
the busy deadline. A declared failure rolls back the business work and commits only its failure
receipt; a defect rolls everything back and reaches the caller as ``Defect``.

An optimistic turn — a fresh command id on an actor this process remembers (``cache.py``), with
the session's clock estimate — runs the plan on the remembered row first, and sends the lock, the
check that the memory still holds (``queries.CHECK``), the hooks' statements and the write in one
round trip with the commit. When the plan falls back or the check refuses, nothing was written and
the turn takes two round trips, reusing the handler's run when the loaded state is the one it
ran on.

``sender.py`` and the relay's delivery drive this module; ``joined.py`` is the third driver.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import psycopg
from psycopg import pq

from akter import faults, logs, telemetry
from akter.actor import plan, queries
from akter.actor.cache import ActorCache, Known
from akter.actor.declare import Command
from akter.actor.kernel import Answer, Clock, Committed, Read, Request, TurnOptions, prepare_request
from akter.callers import Caller
from akter.errors import ActorBusy
from akter.ids import ActorRef, CommandId
from akter.store import session
from akter.store.sqlstate import is_lock_timeout

log = logging.getLogger("akter.turn")

Rows = list[tuple[Any, ...] | None]


async def drive(
    steps: plan.Plan, request: Request, serve: Callable[[plan.Step], Awaitable[Any]]
) -> plan.Done | plan.Fallback:
    """Run ``steps`` to its end, ``serve`` answering each database step; fault points are passed
    here, alike for every driver."""
    answer: Any = None
    try:
        while True:
            try:
                step = steps.send(answer)
            except StopIteration as done:
                result: plan.Done | plan.Fallback = done.value
                return result
            if isinstance(step, plan.Fault):
                await faults.hit(step.point, request.ref.actor_id, str(request.command_id))
                answer = None
            else:
                answer = await serve(step)
    finally:
        steps.close()


@telemetry.traced_turn
async def run_turn(  # noqa: PLR0917 -- the relay's delivery (akter/outbox) calls it positionally
    conn: psycopg.AsyncConnection[Any],
    command: Command[Any, Any, Any],
    ref: ActorRef,
    payload: object,
    command_id: CommandId,
    caller: Caller,
    options: TurnOptions,
    *,
    fresh: bool = False,
    clock: Clock | None = None,
) -> Committed:
    """Handle one command as one turn on ``conn`` (an autocommit connection; the turn opens and
    commits its own transaction). Raises the kernel's typed errors; returns what committed.

    ``clock``: the session's estimate of the database clock, which every load and check
    corrects. ``fresh``: the caller minted ``command_id`` for this send and has not sent it
    before, so it has no receipt, and the turn may be optimistic (with ``options.cache`` and
    ``clock``), which runs the handler before it could know of one. A retried or caller-chosen
    id is never optimistic: a known id replays its outcome and never runs the handler."""
    request = prepare_request(command, ref, payload, command_id, caller)
    prior: plan.Prior | None = None
    deadline = time.monotonic() + options.busy_timeout.total_seconds()
    delay = 0.005
    while True:
        try:
            done = None
            if fresh and options.cache is not None and clock is not None:
                done, prior = await _optimistic(conn, request, options, options.cache, clock)
            if done is None:
                done = await _pooled(conn, request, options, prior, clock)
            break
        except BaseException as exc:
            # a retry takes the lock before it runs the handler again: however long the actor
            # stays busy, the handler ran at most once (optimistically) before the lock
            fresh = False
            await _abandon(conn)
            if not (isinstance(exc, psycopg.Error) and is_lock_timeout(exc)):
                raise
            if time.monotonic() + delay > deadline:
                raise ActorBusy(f"{ref} stayed locked for over {options.busy_timeout}") from exc
            log.info(
                "actor is busy; retrying in %.0f ms",
                delay * 1000,
                extra=logs.fields(actor=ref, command_id=command_id),
            )
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)
    if done.turn is not None:
        done.turn.close()
    record = done.record
    await faults.hit("turn.after_commit", ref.actor_id, str(command_id))
    if not record.replayed:
        for action in record.actions:
            action()
        for hook in options.hooks:
            hook.after_commit(record)
    return record


async def _abandon(conn: psycopg.AsyncConnection[Any]) -> None:
    """Roll back whatever the failed attempt left open. A connection too broken to roll back is
    left to the pool, which discards connections that are not idle when returned."""
    if conn.closed or conn.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    try:
        await conn.rollback()
    except psycopg.Error:
        log.debug("rollback failed on an abandoned turn connection", exc_info=True)


async def _pooled(
    conn: psycopg.AsyncConnection[Any],
    request: Request,
    options: TurnOptions,
    prior: plan.Prior | None,
    clock: Clock | None,
) -> plan.Done:
    """Two round trips: lock and load, then the hooks' statements with the write and the commit
    (a hook's ``Read`` between them, under the lock). Whatever it raises leaves the transaction
    open for ``run_turn`` to roll back. With a cache, the process forgets the actor until this
    turn tells what it is."""
    cur = psycopg.AsyncClientCursor(conn)
    cache = options.cache
    if cache is not None:
        cache.forget(request.ref)

    async def serve(step: plan.Step) -> Any:
        match step:
            case plan.Load():
                await cur.execute(queries.BEGIN_AND_LOAD_VERSIONED, request.params)
                cur.nextset()
                fetched = await cur.fetchone()
                if fetched is None:  # pragma: no cover - the procedure always returns the locked row
                    raise AssertionError(f"akter_turn_load_versioned returned no row for {request.ref}")
                row = queries.Loaded(*fetched)
                if clock is not None:
                    clock.observe_clock(row.now_ms)
                return row
            case Read(query=query, params=params):
                return await read(conn, query, params)
            case plan.Commit():
                return await _commit(
                    cur, request, [cur.mogrify(q, p) for q, p in (*step.statements, step.write)]
                )
        raise AssertionError(step)  # pragma: no cover

    done = await drive(plan.turn(request, options.hooks, prior=prior), request, serve)
    if not isinstance(done, plan.Done):  # pragma: no cover - only a turn on memory falls back
        raise TypeError(done)
    if done.record.replayed:
        await conn.rollback()
    if cache is not None and done.known.version is not None:
        cache.remember(request.ref, done.known)
    return done


async def read(conn: psycopg.AsyncConnection[Any], query: Any, params: Mapping[str, Any]) -> Answer:
    """A hook's statement under the lock, as the hook would have run it on the connection."""
    cur = await conn.execute(query, params)
    rows = await cur.fetchall() if cur.description is not None else []
    return Answer(tuple(rows), cur.rowcount)


async def _commit(cur: psycopg.AsyncClientCursor[Any], request: Request, parts: list[str]) -> Rows:
    """The hooks' statements and the turn's write (the last of ``parts``), bound client-side and
    sent as one batch with ``COMMIT``; the first row of each hook statement. A test that armed
    ``turn.before_commit`` gets the commit sent apart, to observe (or kill) the turn between."""
    split = faults.armed("turn.before_commit")
    await cur.execute(("; ".join(parts) + ("" if split else "; COMMIT")).encode())
    answers = await first_rows(cur, len(parts) - 1)
    if split:
        await faults.hit("turn.before_commit", request.ref.actor_id, str(request.command_id))
        await cur.connection.commit()
    return answers


async def first_rows(cur: psycopg.AsyncClientCursor[Any], count: int) -> Rows:
    """The first row of each of the next ``count`` results of a multi-statement batch (the
    cursor stands on the first)."""
    rows: Rows = []
    for _ in range(count):
        rows.append(await cur.fetchone() if cur.description is not None else None)
        cur.nextset()
    return rows


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


async def _optimistic(
    conn: psycopg.AsyncConnection[Any],
    request: Request,
    options: TurnOptions,
    cache: ActorCache,
    clock: Clock,
) -> tuple[plan.Done | None, plan.Prior | None]:
    """One round trip on what this process remembers of the actor: ``BEGIN``, the check, the
    hooks' statements, the write and ``COMMIT``. None when the turn must take two round trips
    (nothing remembered or guessed; the plan fell back; the check refused: nothing written
    then), with the handler's run for it to reuse."""
    known = cache.guess(request.ref, new=options.guess_new)
    if known is None or faults.armed("turn.before_handler"):
        return None, None
    row = plan.remembered(known, clock.now_ms())
    cur = psycopg.AsyncClientCursor(conn)
    sent: list[plan.Commit] = []

    async def serve(step: plan.Step) -> Any:
        if not isinstance(step, plan.Commit):  # pragma: no cover - a turn on memory loads nothing
            raise TypeError(step)
        sent.append(step)
        check = cur.mogrify(queries.CHECK, _check_params(request, known, row.now_ms))
        parts = [check, *(cur.mogrify(q, p) for q, p in (*step.statements, step.write))]
        split = faults.armed("turn.before_commit")
        await cur.execute(("BEGIN; " + "; ".join(parts) + ("" if split else "; COMMIT")).encode())
        cur.nextset()  # BEGIN's result, then the check's: the clock it read
        checked = await cur.fetchone()
        if checked is not None and checked[0] is not None:
            clock.observe_clock(int(checked[0]))
        cur.nextset()
        answers = await first_rows(cur, len(step.statements))
        if split:
            await faults.hit("turn.before_commit", request.ref.actor_id, str(request.command_id))
            await conn.commit()
        return answers

    try:
        done = await drive(plan.turn(request, options.hooks, memory=row), request, serve)
    except psycopg.Error as exc:
        if exc.sqlstate != queries.STALE:
            raise
        await _abandon(conn)
        cache.stale(request.ref, known)
        return None, sent[0].ran if sent else None
    if isinstance(done, plan.Fallback):
        return None, done.prior
    cache.hits += 1
    cache.remember(request.ref, done.known)
    return done, None


def _check_params(request: Request, known: Known, now_ms: int) -> dict[str, Any]:
    return {
        **request.params,
        "version": known.version,
        "state_md5": None if known.state is None else _md5(known.state),
        "shape": known.state_shape,
        "expires_ms": request.command_id.expires_ms,
        "now_ms": now_ms,
        "behind_ms": session.BEHIND_MS,
    }

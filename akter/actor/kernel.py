"""The kernel: one command handled as one turn, in one transaction, under the actor row lock.

A turn:

1. refuses what needs no database (an internal command from a non-System caller, a caller the
   access policy refuses, a payload that would not read back as it was sent (``codec.check``)
   or is over its actor type's cap) — nothing is opened;
2. takes the actor's row lock (creating the row on first use) and, in the same round trip, reads
   the state and the receipt of this command id as they stand once the lock is granted
   (``queries.LOAD``, the ``akter_turn_load`` procedure);
3. resolves the receipt: a known id with the same command and payload replays the stored outcome
   without running the handler; another caller is ``AccessDenied``; another command or payload is
   ``CommandConflict``; an id past its expiry is ``CommandExpired`` whether or not its receipt was
   pruned;
4. runs the handler in memory on a ``Turn``, on the state decoded exactly (a stored state of
   another shape is ``CorruptRecord`` and is left as it is, never replaced by a default); the
   state and events it leaves must read back as they are (else ``Defect``);
5. lets the layers above write what they staged (outbox intents, workflow starts) through
   ``TurnHook``s, then writes state, events and receipt in one statement and commits, in the same
   round trip; what a layer must do once the turn committed it registers on the record
   (``Committed.on_commit``), so a turn that fails to commit leaves nothing behind.

A turn is two round trips (one when optimistic, below): ``BEGIN`` with the load, and the write with ``COMMIT``
(``queries.py``; docs/performance.md has what the alternatives cost).

A declared failure rolls back the business work and commits only its failure receipt. A defect
rolls everything back and reaches the caller as ``Defect``. A lock timeout (another transaction
holds the row) is retried with backoff, each retry taking the lock before it enters the handler,
until the busy deadline.

An optimistic turn (``_turn_optimistic``, for a fresh command id on an actor this process
remembers, ``cache.py``) runs steps 4 and 5 on the remembered state first and sends the lock, a
check that the memory still holds, the hooks' statements and the write in one round trip with
the commit; when the check refuses, nothing was written and the turn runs as above.

``client.py`` drives this module; ``turn.py`` is what the handler sees.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import attrs
import psycopg
from psycopg import pq
from returns.result import Failure, Result, Success

from akter import codec, faults, logs, tagged, telemetry
from akter.actor import limits, queries
from akter.actor.cache import BEHIND_MS, ActorCache, Known
from akter.actor.declare import Command
from akter.actor.turn import Turn
from akter.actor.upgrade import read_state, state_shape
from akter.callers import Caller, System
from akter.errors import (
    AccessDenied,
    ActorBusy,
    CommandConflict,
    CommandExpired,
    CorruptRecord,
    Defect,
    InternalCommand,
    InvalidInput,
    StateTooLarge,
)
from akter.ids import ActorRef, CommandId
from akter.store.sqlstate import is_lock_timeout

log = logging.getLogger("akter.turn")

Outcome = Result[Any, Exception]


@attrs.frozen
class Committed:
    """What a committed (or replayed) turn tells the layers around it."""

    ref: ActorRef
    command: str
    command_id: str
    outcome: Outcome
    replayed: bool
    now_ms: int
    #: (sequence, tag, event) of the events this turn emitted; empty on replay
    events: tuple[tuple[int, str, object], ...] = ()
    #: written inside a transaction the application owns (``akter.actor.joined``): it commits
    #: when the application commits, and no ``on_commit`` action or after-commit hook runs
    joined: bool = False
    #: ``now_ms`` is this process's estimate of the database clock (an optimistic turn: the
    #: lock checked it within ``cache.BEHIND_MS`` behind), not a reading: never a source for
    #: correcting the estimate (``database_now_ms`` is)
    estimated: bool = False
    _read_ms: list[int] = attrs.field(factory=list, init=False, eq=False, repr=False)
    _after: list[Callable[[], None]] = attrs.field(factory=list, init=False, eq=False, repr=False)
    _batched: list[tuple[Any, dict[str, Any], Callable[[tuple[Any, ...] | None], None] | None]] = attrs.field(
        factory=list, init=False, eq=False, repr=False
    )

    @property
    def database_now_ms(self) -> int | None:
        """The database clock this turn read (to correct an estimate of it), if it read one."""
        if self._read_ms:
            return self._read_ms[0]
        return None if self.estimated else self.now_ms

    def with_write(
        self,
        query: Any,
        params: dict[str, Any],
        answer: Callable[[tuple[Any, ...] | None], None] | None = None,
    ) -> None:
        """Send ``query`` in the round trip of the turn's own write, just before it: a hook's
        statement whose answer nothing needs before commit. ``answer`` gets its first row (None
        when it returns none) once the turn committed; it may register ``on_commit`` actions.
        A turn that does not commit drops it with its record."""
        self._batched.append((query, params, answer))

    def on_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once this turn has committed; a hook's ``before_commit`` registers it.
        A turn that does not commit drops its actions with its record, so nothing a layer hands
        over outlives a failed commit. Like ``TurnHook.after_commit``, it must not block or fail."""
        self._after.append(action)


class TurnHook(Protocol):
    """How layers above the kernel take part in a turn without the kernel knowing them."""

    async def before_commit(
        self, conn: psycopg.AsyncConnection[Any], turn: Turn[Any], record: Committed
    ) -> None:
        """Write this layer's staged work in the turn's transaction (under the row lock)."""

    def after_commit(self, record: Committed) -> None:
        """React to a committed turn (wake a local relay); must not block or fail."""


@attrs.frozen
class TurnOptions:
    busy_timeout: timedelta = timedelta(seconds=30)
    hooks: Sequence[TurnHook] = ()
    #: the process's memory of actors, for optimistic (one round trip) turns; None: every turn
    #: takes two round trips
    cache: ActorCache | None = None
    #: whether an optimistic turn may guess that an actor this process never saw is new (a
    #: client's send to a new order); a relay's delivery, which mostly targets actors that
    #: exist, is optimistic only on an actor it remembers
    guess_new: bool = True


def _encode_outcome(command: Command[Any, Any, Any], outcome: Outcome) -> bytes:
    # the tagged dict is built from primitives already, so it is framed as is (codec.encode would
    # unstructure it a second time)
    match outcome:
        case Success(value):
            record = tagged.ok(value, command.output)
        case Failure(error):
            record = tagged.error(error)
        case _:  # pragma: no cover
            raise AssertionError(outcome)
    return codec.frame(codec.canonical_json(record))


def decode_outcome(command: Command[Any, Any, Any], data: bytes) -> Outcome:
    """A stored receipt outcome; anything but ``{"ok": v}`` or ``{"error": {"type", "value"}}``
    of a declared error is ``CorruptRecord`` (``codec.from_primitive`` raises it for values)."""
    primitive = codec.decode_primitive(data)
    match primitive:
        case {"ok": value} if len(primitive) == 1:
            return Success(tagged.read_ok(value, command.output))
        case {"error": body} if len(primitive) == 1:
            return Failure(tagged.read_error(body, command.errors, f"receipt of {command!r}"))
    raise CorruptRecord(f"receipt of {command!r} is not an outcome: {primitive!r:.200}")


def check_caller(command: Command[Any, Any, Any], caller: Caller) -> None:
    """The checks that need no database: internal commands and the access policy."""
    if command.internal and not isinstance(caller, System):
        raise InternalCommand(f"{command!r} is internal; only akter itself (System) may send it")
    if not command.internal and not command.actor.access(caller, command):
        raise AccessDenied(f"{caller!r} may not send {command!r}")


def _payload_json(command: Command[Any, Any, Any], payload: object) -> bytes:
    """The payload's canonical JSON, once ``codec.check`` proved it reads back as sent."""
    expected = command.input
    if isinstance(expected, type) and not isinstance(payload, expected):
        raise InvalidInput(f"{command!r} takes a {expected.__name__}, got {type(payload).__name__}")
    return codec.check(payload, expected)


@attrs.frozen
class _Request:
    """One send, checked and hashed: everything a turn attempt needs besides the connection."""

    command: Command[Any, Any, Any]
    ref: ActorRef
    payload: object
    caller: Caller
    command_id: CommandId
    payload_hash: bytes
    #: the actor's key and the command id, as the parameters of both turn statements
    params: dict[str, Any]


def prepare_request(
    command: Command[Any, Any, Any], ref: ActorRef, payload: object, command_id: CommandId, caller: Caller
) -> _Request:
    """The checks that need no database, in the order a caller meets them (the actor type, then
    the access policy, then the payload), and the request they leave: hashed and capped."""
    if ref.actor_type != command.actor.name:
        raise InvalidInput(f"{command!r} cannot be sent to {ref}")
    check_caller(command, caller)
    body = limits.payload_within_cap(command, _payload_json(command, payload))
    return _Request(
        command=command,
        ref=ref,
        payload=payload,
        caller=caller,
        command_id=command_id,
        payload_hash=codec.digest_json(body),
        params={**ref.key_params(), "command_id": str(command_id)},
    )


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
) -> Committed:
    """Handle one command as one turn on ``conn`` (an autocommit connection; the turn opens and
    commits its own transaction). Raises the kernel's typed errors; returns what committed.

    ``fresh``: the caller minted ``command_id`` for this send and has not sent it before, so it
    has no receipt, and the turn may be optimistic (``_turn_optimistic``), which runs the
    handler before it could know of one. A retried or caller-chosen id is never optimistic: a
    known id replays its outcome and never runs the handler."""
    request = prepare_request(command, ref, payload, command_id, caller)
    prior: _Prior | None = None
    deadline = time.monotonic() + options.busy_timeout.total_seconds()
    delay = 0.005
    while True:
        try:
            done = None
            if fresh:
                done, prior = await _turn_optimistic(conn, request, options)
            turn, record = done if done is not None else await _turn_once(conn, request, options, prior)
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
    if turn is not None:
        turn.close()
    await faults.hit("turn.after_commit", ref.actor_id, str(command_id))
    if not record.replayed:
        for action in record._after:
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


async def _turn_once(
    conn: psycopg.AsyncConnection[Any], request: _Request, options: TurnOptions, prior: _Prior | None = None
) -> tuple[Turn[Any] | None, Committed]:
    """One attempt: lock and load, resolve the receipt, run the handler, write and commit.
    Whatever it raises leaves the transaction open for ``run_turn`` to roll back."""
    # Client-side binding is what lets one round trip carry BEGIN with the load, and the write
    # with COMMIT (the simple query protocol); see queries.py and docs/performance.md.
    cache = options.cache
    row, cur = await _load(conn, request, cache)
    command_id = request.command_id
    if command_id.expires_ms < row.now_ms:
        raise CommandExpired(
            f"command id {command_id} expired {row.now_ms - command_id.expires_ms} ms ago",
            database_now_ms=row.now_ms,
        )
    if row.command is not None:
        record = _replay(request, row)
        await conn.rollback()
        if cache is not None and row.version is not None:
            cache.remember(request.ref, Known(row.version, row.event_seq, row.state, row.state_shape))
        return None, record

    turn, outcome = await _handled(request, row, prior)
    write, record = _prepare_write(request, row, turn, outcome)
    if isinstance(outcome, Success):
        # hooks write what the handler staged (outbox intents, workflow starts) in this
        # transaction, before the turn's own write; a hook with nothing to do sends nothing
        for hook in options.hooks:
            await hook.before_commit(conn, turn, record)
    statement: Any = queries.write(len(record.events))
    params: dict[str, Any] | None = write
    batched = record._batched
    if batched:
        # the hooks' statements bound here, client-side, and sent with the write: one round trip
        parts = [cur.mogrify(query, args) for query, args, _ in batched]
        statement, params = "; ".join([*parts, cur.mogrify(statement, write)]).encode(), None
    if faults.armed("turn.before_commit"):
        # split so that a test can observe (or kill) the turn between its write and its commit
        await cur.execute(statement, params)
        answers = await _answers(cur, batched)
        await faults.hit("turn.before_commit", request.ref.actor_id, str(command_id))
        await conn.commit()
    else:
        await cur.execute(statement + (b"; COMMIT" if params is None else "; COMMIT"), params)
        answers = await _answers(cur, batched)
    if cache is not None and row.version is not None:
        cache.remember(request.ref, _after_write(row.version, row, write, record))
    _hand_answers(record, answers)
    return turn, record


def _after_write(version: int, row: queries.Loaded, write: dict[str, Any], record: Committed) -> Known:
    """The actor as a turn that loaded ``row`` (at ``version``) and wrote ``write`` left it."""
    state = write["state"]
    return Known(
        version=version + 1,
        event_seq=row.event_seq + len(record.events),
        state=row.state if state is None else state,
        state_shape=row.state_shape if state is None else write["state_shape"],
    )


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class _NeedsLock(Exception):
    """A hook of an optimistic turn asked for the connection before the turn holds its lock."""


class _NoConnection:
    """What an optimistic turn's hooks get as the connection: using it makes the turn take the
    two-round-trip way, where the lock is held before any hook statement runs. A hook whose
    statements all go through ``Committed.with_write`` keeps the turn at one round trip."""

    def __getattr__(self, name: str) -> Any:
        raise _NeedsLock(name)


_NO_CONNECTION: Any = _NoConnection()


@attrs.frozen
class _Prior:
    """A handler's run on the state this process remembered, whose write was not sent or was
    refused: the two-round-trip turn uses its outcome when the state it loads is that state, so
    the handler runs once whenever the memory was right (the check may have refused only the
    version, the clock estimate or a hook's need for the connection)."""

    known: Known
    turn: Turn[Any]
    outcome: Outcome

    def holds_for(self, row: queries.Loaded) -> bool:
        return row.state == self.known.state and row.state_shape == self.known.state_shape


async def _turn_optimistic(
    conn: psycopg.AsyncConnection[Any], request: _Request, options: TurnOptions
) -> tuple[tuple[Turn[Any] | None, Committed] | None, _Prior | None]:
    """One round trip on what this process remembers of the actor (``cache.py``): the handler
    runs on the remembered state first, then the row lock, the check that the memory holds
    (``queries.CHECK``), the hooks' statements and the write go in one batch with the commit.

    Returns what committed, or None when the turn must take two round trips — nothing
    remembered or guessed, a handler that read ``turn.now`` or raised (its outcome may depend
    on a state it did not really have: it runs again on the loaded one), a hook that needed the
    connection, or a check that refused; nothing has been written then — with the handler's
    run for the two-round-trip turn to reuse (``_Prior``). A hook's own error is raised as in
    any turn."""
    cache = options.cache
    ran = None if cache is None else await _run_on_memory(request, options, cache)
    if cache is None or ran is None:
        return None, None
    known, row, turn, outcome = ran
    prior = _Prior(known, turn, outcome)
    prepared = await _prepare_optimistic(request, row, turn, outcome, options)
    if prepared is None:
        return None, prior
    write, record = prepared
    try:
        answers = await _send_optimistic(conn, request, known, row, write, record)
    except psycopg.Error as exc:
        if exc.sqlstate != queries.STALE:
            raise
        await _abandon(conn)
        cache.stale(request.ref, known)
        return None, prior
    cache.hits += 1
    if record.database_now_ms is not None:
        cache.observe_clock(record.database_now_ms)
    cache.remember(request.ref, _after_write(known.version or 0, row, write, record))
    _hand_answers(record, answers)
    return (turn, record), prior


async def _run_on_memory(
    request: _Request, options: TurnOptions, cache: ActorCache
) -> tuple[Known, queries.Loaded, Turn[Any], Outcome] | None:
    """The handler run on what the process remembers (or guesses) of the actor; None when
    there is nothing to run it on, or when its run does not count (it read the clock, or
    raised: the loaded state decides)."""
    now_ms = cache.now_ms()
    known = cache.guess(request.ref, new=options.guess_new)
    if known is None or now_ms is None or faults.armed("turn.before_handler"):
        return None
    if request.command_id.expires_ms < now_ms:
        return None
    row = _remembered(known, now_ms)
    try:
        turn, outcome = await _handle(request, row)
    except Exception:
        return None
    return None if turn._now_read else (known, row, turn, outcome)


def _remembered(known: Known, now_ms: int) -> queries.Loaded:
    """The row a load would have returned, were the memory right, at the estimated clock."""
    return queries.Loaded(
        known.event_seq, known.state, known.state_shape, None, None, None, None, now_ms, known.version
    )


async def _prepare_optimistic(
    request: _Request, row: queries.Loaded, turn: Turn[Any], outcome: Outcome, options: TurnOptions
) -> tuple[dict[str, Any], Committed] | None:
    """The write and the record of an optimistic turn, the hooks' statements staged on it; None
    when the write cannot be prepared from the remembered state (its size, a value that does not
    store: the loaded state decides) or a hook needs the connection."""
    try:
        write, record = _prepare_write(request, row, turn, outcome, estimated=True)
    except Exception:
        return None
    if isinstance(outcome, Success):
        try:
            for hook in options.hooks:
                await hook.before_commit(_NO_CONNECTION, turn, record)
        except _NeedsLock:
            return None
    return write, record


async def _send_optimistic(  # noqa: PLR0917 -- the parts of one optimistic turn
    conn: psycopg.AsyncConnection[Any],
    request: _Request,
    known: Known,
    row: queries.Loaded,
    write: dict[str, Any],
    record: Committed,
) -> list[tuple[Any, ...] | None]:
    """The batch: ``BEGIN``, the check, the hooks' statements, the write, ``COMMIT`` (sent
    apart when a test armed ``turn.before_commit``); the answers of the hooks' statements."""
    check = {
        **request.params,
        "version": known.version,
        "state_md5": None if known.state is None else _md5(known.state),
        "shape": known.state_shape,
        "expires_ms": request.command_id.expires_ms,
        "now_ms": row.now_ms,
        "behind_ms": BEHIND_MS,
    }
    cur = psycopg.AsyncClientCursor(conn)
    batched = record._batched
    parts = [
        cur.mogrify(queries.CHECK, check),
        *(cur.mogrify(query, args) for query, args, _ in batched),
        cur.mogrify(queries.write(len(record.events)), write),
    ]
    split = faults.armed("turn.before_commit")
    await cur.execute(("BEGIN; " + "; ".join(parts) + ("" if split else "; COMMIT")).encode())
    cur.nextset()  # BEGIN's result, then the check's: the clock it read
    checked = await cur.fetchone()
    if checked is not None and checked[0] is not None:
        record._read_ms.append(int(checked[0]))
    cur.nextset()
    answers = await _answers(cur, batched)
    if split:
        await faults.hit("turn.before_commit", request.ref.actor_id, str(request.command_id))
        await conn.commit()
    return answers


async def _load(
    conn: psycopg.AsyncConnection[Any], request: _Request, cache: ActorCache | None
) -> tuple[queries.Loaded, psycopg.AsyncClientCursor[Any]]:
    """``BEGIN`` and the lock and load, in one round trip; with a cache, the version too, and
    the process forgets the actor until this turn tells what it is."""
    cur = psycopg.AsyncClientCursor(conn)
    if cache is not None:
        cache.forget(request.ref)
    await cur.execute(
        queries.BEGIN_AND_LOAD if cache is None else queries.BEGIN_AND_LOAD_VERSIONED, request.params
    )
    cur.nextset()
    fetched = await cur.fetchone()
    if fetched is None:  # pragma: no cover - the procedure always returns the locked row
        raise AssertionError(f"akter_turn_load returned no row for {request.ref}")
    row = queries.Loaded(*fetched)
    if cache is not None:
        cache.observe_clock(row.now_ms)
    return row, cur


def _hand_answers(record: Committed, answers: list[tuple[Any, ...] | None]) -> None:
    """Give each batched statement's answer (its first row) to the hook that asked for it."""
    for (_, _, answer), answered in zip(record._batched, answers, strict=True):
        if answer is not None:
            answer(answered)


async def _answers(
    cur: psycopg.AsyncClientCursor[Any], batched: list[tuple[Any, dict[str, Any], Any]]
) -> list[tuple[Any, ...] | None]:
    """The first row of each batched statement's result, in order (the cursor stands on the
    first result of a multi-statement batch)."""
    rows: list[tuple[Any, ...] | None] = []
    for _ in batched:
        rows.append(await cur.fetchone() if cur.description is not None else None)
        cur.nextset()
    return rows


async def _handled(request: _Request, row: queries.Loaded, prior: _Prior | None) -> tuple[Turn[Any], Outcome]:
    """The handler's run on the loaded state: the optimistic run's, when it ran on this very
    state (its outcome stands, on the clock the lock read: the handler did not read the clock,
    the hooks do), else a run now."""
    if prior is not None and prior.holds_for(row):
        prior.turn._now = datetime.fromtimestamp(row.now_ms / 1000, tz=UTC)
        return prior.turn, prior.outcome
    return await _handle(request, row)


async def _handle(request: _Request, row: queries.Loaded) -> tuple[Turn[Any], Outcome]:
    """Run the handler in memory on the loaded state; the turn is closed when this returns."""
    actor = request.command.actor
    state = actor.initial_state() if row.state is None else read_state(actor, row.state, row.state_shape)
    now = datetime.fromtimestamp(row.now_ms / 1000, tz=UTC)
    turn: Turn[Any] = Turn(
        request.ref, request.caller, str(request.command_id), state, now, actor.event_types
    )
    await faults.hit("turn.before_handler", request.ref.actor_id, str(request.command_id))
    command = request.command
    outcome: Outcome
    try:
        outcome = Success(command.handler(turn, request.payload))
    except command.errors as declared:
        outcome = Failure(declared)
    except Defect:
        raise  # already the handler's defect, raised where it happened (an undeclared event)
    except Exception as exc:
        raise Defect(
            f"{command!r} raised {type(exc).__name__}: {exc}", error_type=type(exc).__qualname__
        ) from exc
    finally:
        # the handler's capabilities end here; staged work is read below through the object
        turn.close()
    return turn, outcome


def _prepare_write(
    request: _Request, row: queries.Loaded, turn: Turn[Any], outcome: Outcome, *, estimated: bool = False
) -> tuple[dict[str, Any], Committed]:
    """The parameters of the turn's write and the record it will commit. A declared failure
    writes only its receipt: no state, no events."""
    command = request.command
    actor = command.actor
    write: dict[str, Any] = {
        **request.params,
        "command": command.name,
        "payload_hash": request.payload_hash,
        "caller_key": request.caller.key,
        "outcome": _encode_outcome(command, outcome),
        "failed": isinstance(outcome, Failure),
        "expires_ms": request.command_id.expires_ms,
        "event_seq": row.event_seq,
        "state": None,
        "state_shape": state_shape(actor),
    }
    events: tuple[tuple[int, str, object], ...] = ()
    if isinstance(outcome, Success):
        state_json = _storable(command, "state", turn._state, actor.state_type)
        if len(state_json) > actor.max_state_bytes:
            raise StateTooLarge(actor.name, len(state_json), actor.max_state_bytes)
        framed = codec.frame(state_json)
        # a state read in an older shape is written back in the current one, changed or not
        if row.state is None or framed != row.state or row.state_shape != write["state_shape"]:
            write["state"] = framed
        events = tuple((row.event_seq + 1 + i, actor.event_tag(e), e) for i, e in enumerate(turn._events))
        for i, (_, tag, event) in enumerate(events):
            write[f"tag{i}"] = tag
            write[f"value{i}"] = codec.frame(
                limits.event_within_cap(actor, tag, _storable(command, "event", event, type(event)))
            )
    record = Committed(
        ref=request.ref,
        command=command.name,
        command_id=str(request.command_id),
        outcome=outcome,
        replayed=False,
        now_ms=row.now_ms,
        events=events,
        estimated=estimated,
    )
    return write, record


def _storable(command: Command[Any, Any, Any], what: str, value: object, as_type: Any) -> bytes:
    """The canonical JSON of a state or event the handler left. One that would not read back as
    it is (a field of the wrong type) is the handler's defect: stored, it would make every later
    turn (or wait) a ``CorruptRecord``."""
    try:
        return codec.check(value, as_type)
    except InvalidInput as exc:
        message = f"{command!r} left a {what} that cannot be stored: {exc}"
        raise Defect(message, error_type="InvalidInput") from exc


def _replay(request: _Request, row: queries.Loaded) -> Committed:
    """The stored outcome of a known command id, or why this send may not have it."""
    ref, command, command_id = request.ref, request.command, request.command_id
    if row.caller_key != request.caller.key:
        raise AccessDenied(f"command id {command_id} on {ref} belongs to another caller")
    if row.command != command.name or row.payload_hash != request.payload_hash:
        raise CommandConflict(
            f"command id {command_id} on {ref} was used for {row.command} with another payload"
            if row.command == command.name
            else f"command id {command_id} on {ref} was used for command {row.command!r}"
        )
    if row.outcome is None:  # pragma: no cover - the column is NOT NULL
        raise CorruptRecord(f"receipt of command id {command_id} on {ref} has no outcome")
    return Committed(
        ref=ref,
        command=command.name,
        command_id=str(command_id),
        outcome=decode_outcome(command, row.outcome),
        replayed=True,
        now_ms=row.now_ms,
    )

"""The turn as one plan without I/O: load, expiry, replay, handle, prepare, hooks, write.

``turn`` is a generator, in the way psycopg's ``generators.py`` decides a protocol exchange and
leaves the waiting to its callers: it yields what it needs from the database — ``LOAD`` (the
actor's row lock and row), a hook's ``Read`` under that lock, a ``Fault`` point to pass, the
``Commit`` of the hooks' batched statements with the turn's write — and is sent the answer. It
returns what the turn came to (``Done``), or, for a turn run on what the process remembers of
the actor instead of on a loaded row, that the turn must load after all (``Fallback``).

Three drivers serve it: the pooled and the optimistic ones in ``drive.py`` and the one inside the
application's transaction in ``joined.py``. They differ only in how they send a step: the
sequence, and every rule of it, is here. ``kernel.py`` holds the vocabulary (the request, the
record, the hooks' protocol).

On remembered state (``memory``) the plan is careful not to decide anything the loaded state
could decide otherwise: a handler that read ``turn.now`` or raised, a write that cannot be
prepared, a hook that must read under the lock, an id the estimated clock finds expired — each
returns ``Fallback``, with the handler's run (``Prior``) when the loaded state may still reuse it.
A hook's own error is raised as in any turn.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs
from returns.result import Failure, Success

from akter import codec
from akter.actor import limits, queries
from akter.actor.cache import Known
from akter.actor.declare import Command
from akter.actor.kernel import (
    Answer,
    Committed,
    Outcome,
    Read,
    Request,
    TurnHook,
    UnderLock,
    decode_outcome,
    encode_outcome,
)
from akter.actor.turn import Turn
from akter.actor.upgrade import read_state, state_shape
from akter.errors import (
    AccessDenied,
    CommandConflict,
    CommandExpired,
    CorruptRecord,
    Defect,
    InvalidInput,
    StateTooLarge,
)


@attrs.frozen
class Load:
    """Take the actor's row lock (creating the row on first use) and read its row: a ``Loaded``."""


LOAD = Load()


@attrs.frozen
class Fault:
    """Pass the fault point ``point`` (``akter.faults``) with the turn's actor and command ids."""

    point: str


@attrs.frozen
class Commit:
    """Send the hooks' batched statements, then the turn's write; the answer is the first row
    (or None) of each of ``statements``, in order. The driver commits (or, joined, does not)."""

    statements: tuple[tuple[Any, Mapping[str, Any]], ...]
    write: tuple[Any, Mapping[str, Any]]
    #: the handler's run on remembered state, for the turn that loads when the check refuses
    ran: Prior | None = None


Step = Load | Read | Fault | Commit


@attrs.frozen
class Prior:
    """A handler's run on the state this process remembered, whose write was not sent or was
    refused: a turn that loads exactly that state reuses its outcome, so the handler runs once
    whenever the memory was right (the check may have refused only the version, the clock
    estimate or a hook's need for the lock)."""

    state: bytes | None
    state_shape: str | None
    turn: Turn[Any]
    outcome: Outcome

    def holds_for(self, row: queries.Loaded) -> bool:
        return row.state == self.state and row.state_shape == self.state_shape


@attrs.frozen
class Done:
    """A turn that committed its write (or replayed a receipt: ``record.replayed``, nothing
    written, no turn), and what the actor is after it (for the process's memory)."""

    turn: Turn[Any] | None
    record: Committed
    known: Known


@attrs.frozen
class Fallback:
    """A turn on remembered state that must load instead; nothing was sent."""

    prior: Prior | None = None


Plan = Generator[Step, Any, Done | Fallback]


def remembered(known: Known, now_ms: int) -> queries.Loaded:
    """The row a load would return, were the memory right, at the estimated clock."""
    return queries.Loaded(
        known.event_seq, known.state, known.state_shape, None, None, None, None, now_ms, known.version
    )


def turn(
    request: Request,
    hooks: Sequence[TurnHook],
    *,
    memory: queries.Loaded | None = None,
    prior: Prior | None = None,
    joined: bool = False,
) -> Plan:
    """One turn's plan; see the module docstring. ``memory``: the row the process assumes,
    instead of a load (the optimistic turn; its write goes with the check that the assumption
    holds). ``prior``: an earlier run on remembered state. ``joined``: inside the application's
    transaction (the hooks run nothing after its commit)."""
    optimistic = memory is not None
    row: queries.Loaded = memory if memory is not None else (yield LOAD)
    command_id = request.command_id
    if command_id.expires_ms < row.now_ms:
        if optimistic:
            return Fallback()
        raise CommandExpired(
            f"command id {command_id} expired {row.now_ms - command_id.expires_ms} ms ago",
            database_now_ms=row.now_ms,
        )
    if row.command is not None:
        return Done(None, replay(request, row), _as_loaded(row))
    handled = yield from _handler_run(request, row, prior, optimistic=optimistic)
    if handled is None:
        return Fallback()
    ran, outcome = handled
    this_run = Prior(row.state, row.state_shape, ran, outcome) if optimistic else None
    try:
        write, record = prepare_write(request, row, ran, outcome, estimated=optimistic, joined=joined)
    except Exception:
        if optimistic:
            return Fallback(this_run)  # its size, a value that does not store: the loaded state decides
        raise
    if isinstance(outcome, Success):
        # hooks write what the handler staged (outbox intents, workflow starts) in this
        # transaction, before the turn's own write; a hook with nothing to do sends nothing
        for hook in hooks:
            needs_lock = yield from _run_hook(hook, ran, record, lockless=optimistic)
            if needs_lock:
                return Fallback(this_run)
    batched = record.writes
    answers = yield Commit(
        tuple((query, params) for query, params, _ in batched),
        (queries.write(len(record.events)), write),
        this_run,
    )
    for (_, _, answer), answered in zip(batched, answers, strict=True):
        if answer is not None:
            answer(answered)
    return Done(ran, record, _after_write(row, write, record))


def _handler_run(
    request: Request, row: queries.Loaded, prior: Prior | None, *, optimistic: bool
) -> Generator[Fault, None, tuple[Turn[Any], Outcome] | None]:
    """The handler's run on ``row``: an earlier run's, when it ran on this very state, else a
    run now. None when a run on remembered state does not count: it read the clock, or raised
    (its outcome may depend on a state it did not really have: the loaded state decides)."""
    if prior is not None and prior.holds_for(row):
        # its outcome stands, on the clock the lock read: the handler did not read the clock
        prior.turn._now = _at(row.now_ms)
        return prior.turn, prior.outcome
    yield Fault("turn.before_handler")
    try:
        ran, outcome = handle(request, row)
    except Exception:
        if optimistic:
            return None
        raise
    return None if optimistic and ran._now_read else (ran, outcome)


def _run_hook(
    hook: TurnHook, ran: Turn[Any], record: Committed, *, lockless: bool
) -> Generator[Read, Answer, bool]:
    """Drive one hook's ``before_commit``, passing each statement it awaits up to the driver;
    True when it awaited one while the turn holds no lock (``lockless``), which the hook is then
    not let see."""
    coro = hook.before_commit(UnderLock(), ran, record)
    answer: Answer | None = None
    try:
        while True:
            try:
                asked = coro.send(answer)
            except StopIteration:
                return False
            if not isinstance(asked, Read):
                raise TypeError(f"a turn hook awaited {asked!r}; it may await only UnderLock.execute")
            if lockless:
                return True
            answer = yield asked
    finally:
        coro.close()


def _at(now_ms: int) -> datetime:
    return datetime.fromtimestamp(now_ms / 1000, tz=UTC)


def _as_loaded(row: queries.Loaded) -> Known:
    return Known(row.version, row.event_seq, row.state, row.state_shape)


def _after_write(row: queries.Loaded, write: Mapping[str, Any], record: Committed) -> Known:
    """The actor as a turn that found ``row`` and wrote ``write`` left it (an actor that did not
    exist is created at version 0 by the lock)."""
    state = write["state"]
    return Known(
        version=(row.version or 0) + 1,
        event_seq=row.event_seq + len(record.events),
        state=row.state if state is None else state,
        state_shape=row.state_shape if state is None else write["state_shape"],
    )


def handle(request: Request, row: queries.Loaded) -> tuple[Turn[Any], Outcome]:
    """Run the handler in memory on the loaded state; the turn is closed when this returns."""
    actor = request.command.actor
    state = actor.initial_state() if row.state is None else read_state(actor, row.state, row.state_shape)
    ran: Turn[Any] = Turn(
        request.ref, request.caller, str(request.command_id), state, _at(row.now_ms), actor.event_types
    )
    command = request.command
    outcome: Outcome
    try:
        outcome = Success(command.handler(ran, request.payload))
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
        ran.close()
    return ran, outcome


def prepare_write(
    request: Request,
    row: queries.Loaded,
    ran: Turn[Any],
    outcome: Outcome,
    *,
    estimated: bool = False,
    joined: bool = False,
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
        "outcome": encode_outcome(command, outcome),
        "failed": isinstance(outcome, Failure),
        "expires_ms": request.command_id.expires_ms,
        "event_seq": row.event_seq,
        "state": None,
        "state_shape": state_shape(actor),
    }
    events: tuple[tuple[int, str, object], ...] = ()
    if isinstance(outcome, Success):
        state_json = _storable(command, "state", ran._state, actor.state_type)
        if len(state_json) > actor.max_state_bytes:
            raise StateTooLarge(actor.name, len(state_json), actor.max_state_bytes)
        framed = codec.frame(state_json)
        # a state read in an older shape is written back in the current one, changed or not
        if row.state is None or framed != row.state or row.state_shape != write["state_shape"]:
            write["state"] = framed
        events = tuple((row.event_seq + 1 + i, actor.event_tag(e), e) for i, e in enumerate(ran._events))
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
        joined=joined,
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


def replay(request: Request, row: queries.Loaded) -> Committed:
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

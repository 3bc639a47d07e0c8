"""The kernel's vocabulary: what a turn is asked (``Request``), what it tells (``Committed``), and
how the layers above take part in it (``TurnHook``, ``UnderLock``).

A turn handles one command in one transaction, under the actor's row lock:

1. it refuses what needs no database (an internal command from a non-System caller, a caller the
   access policy refuses, a payload that would not read back as it was sent (``codec.check``)
   or is over its actor type's cap) — nothing is opened (``prepare_request``, here);
2. it takes the actor's row lock (creating the row on first use) and, in the same round trip,
   reads the state and the receipt of this command id as they stand once the lock is granted
   (the ``akter_turn_load_versioned`` procedure);
3. it resolves the receipt: a known id with the same command and payload replays the stored
   outcome without running the handler; another caller is ``AccessDenied``; another command or
   payload is ``CommandConflict``; an id past its expiry is ``CommandExpired`` whether or not its
   receipt was pruned;
4. it runs the handler in memory on a ``Turn``, on the state decoded exactly (a stored state of
   another shape is ``CorruptRecord`` and is left as it is, never replaced by a default); the
   state and events it leaves must read back as they are (else ``Defect``);
5. it lets the layers above write what they staged (outbox intents, workflow starts) through
   ``TurnHook``s, then writes state, events and receipt in one statement and commits, in the
   same round trip; what a layer must do once the turn committed it registers on the record
   (``Committed.on_commit``), so a turn that fails to commit leaves nothing behind.

That sequence is written once, without I/O, in ``plan.py``; ``drive.py`` drives it on a pooled
connection (two round trips: ``BEGIN`` with the load, the write with ``COMMIT``) or optimistically
(one round trip, on what this process remembers of the actor: ``cache.py``), and ``joined.py``
inside a transaction the application owns. ``turn.py`` is what the handler sees.

A hook never gets a connection. It batches statements whose answer nothing needs before the
commit with ``Committed.with_write`` (they travel in the round trip of the turn's own write), and
runs a statement it must read before it decides (a keyed start's existing row, an interrupt's
target) with ``await db.execute(...)`` on the ``UnderLock`` it is handed: the plan passes that
statement to its driver, which runs it under the row lock — or, for an optimistic turn, which
holds no lock yet, takes the two-round-trip way instead.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

import attrs
from returns.result import Failure, Result, Success

from akter import codec, tagged
from akter.actor import limits
from akter.actor.cache import ActorCache
from akter.actor.declare import Command
from akter.actor.turn import Turn
from akter.callers import Caller, System
from akter.errors import AccessDenied, CorruptRecord, InternalCommand, InvalidInput
from akter.ids import ActorRef, CommandId

Outcome = Result[Any, Exception]
#: a statement's answer handler: its first row (None when it returns none)
AnswerHandler = Callable[[tuple[Any, ...] | None], None]


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
    #: ``now_ms`` is this process's estimate of the database clock (an optimistic turn, which
    #: the check refuses unless the estimate is close: ``akter.store.session``), not a reading
    estimated: bool = False
    _after: list[Callable[[], None]] = attrs.field(factory=list, init=False, eq=False, repr=False)
    _batched: list[tuple[Any, Mapping[str, Any], AnswerHandler | None]] = attrs.field(
        factory=list, init=False, eq=False, repr=False
    )

    def with_write(self, query: Any, params: Mapping[str, Any], answer: AnswerHandler | None = None) -> None:
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

    @property
    def writes(self) -> tuple[tuple[Any, Mapping[str, Any], AnswerHandler | None], ...]:
        """The hooks' batched statements, in the order they were added."""
        return tuple(self._batched)

    @property
    def actions(self) -> tuple[Callable[[], None], ...]:
        """What runs once the turn committed, in the order it was registered."""
        return tuple(self._after)


@attrs.frozen
class Read:
    """A hook's statement that must run under the lock before the hook goes on (``UnderLock``)."""

    query: Any
    params: Mapping[str, Any]


@attrs.frozen
class Answer:
    """What a ``Read`` returned: its rows and its row count, as a cursor would tell them."""

    rows: tuple[tuple[Any, ...], ...] = ()
    rowcount: int = 0

    async def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self.rows)


class _Asked:
    """The awaitable of one ``Read``: it hands the statement to whoever drives the hook (the
    plan, ``plan.py``) and resumes with the ``Answer`` it is sent back."""

    __slots__ = ("read",)

    def __init__(self, read: Read) -> None:
        self.read = read

    def __await__(self) -> Generator[Read, Answer, Answer]:
        answer = yield self.read
        return answer


class UnderLock:
    """What a hook's ``before_commit`` runs a statement through when it must see the answer
    before it decides: the statement runs in the turn's transaction, under its row lock. It is
    not a connection: awaiting it suspends the hook until the plan's driver has the answer, and
    a hook awaits nothing else."""

    async def execute(self, query: Any, params: Mapping[str, Any] | None = None) -> Answer:
        return await _Asked(Read(query, {} if params is None else params))


class TurnHook(Protocol):
    """How layers above the kernel take part in a turn without the kernel knowing them."""

    async def before_commit(self, db: UnderLock, turn: Turn[Any], record: Committed) -> None:
        """Write this layer's staged work in the turn's transaction (under the row lock):
        ``record.with_write`` for statements sent with the turn's write, ``db.execute`` for one
        whose answer it needs now."""

    def after_commit(self, record: Committed) -> None:
        """React to a committed turn (wake a local relay); must not block or fail."""


class Clock(Protocol):
    """The process's one estimate of the database clock (``akter.store.session.Session``)."""

    def now_ms(self) -> int: ...

    def observe_clock(self, database_now_ms: int) -> None: ...


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


def encode_outcome(command: Command[Any, Any, Any], outcome: Outcome) -> bytes:
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
class Request:
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
) -> Request:
    """The checks that need no database, in the order a caller meets them (the actor type, then
    the access policy, then the payload), and the request they leave: hashed and capped."""
    if ref.actor_type != command.actor.name:
        raise InvalidInput(f"{command!r} cannot be sent to {ref}")
    check_caller(command, caller)
    body = limits.payload_within_cap(command, _payload_json(command, payload))
    return Request(
        command=command,
        ref=ref,
        payload=payload,
        caller=caller,
        command_id=command_id,
        payload_hash=codec.digest_json(body),
        params={**ref.key_params(), "command_id": str(command_id)},
    )

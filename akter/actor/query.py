"""Read-only queries: ``@Actor.query`` handlers, run on a snapshot, never as a turn.

A query reads an actor's last committed state (and, when declared with ``recent=N``, its last N
events) in one plain ``SELECT`` on an autocommit connection: no transaction that writes, no
receipt, no row lock. It therefore never waits for a turn in flight and never sees one: what it
sees is what had committed when its statement started. The handler runs in memory on a
``View`` (``def handler(view, payload) -> result``), like a command handler on a ``Turn``, but
the view has nothing that writes.

A query is refused before anything is read when the actor's access policy refuses the caller
(the policy receives the ``Query``, which has a ``name``, an ``actor`` and ``kind == "query"``)
or when the payload is not of the declared type or would not read back as sent (``codec.check``,
as for commands: ``InvalidInput``). A declared error raised by the handler is
``Failure(error)``; any other exception is a ``Defect``. The result must be storable like a
command's (``codec.check``), so a query's answer can travel the same way a command's does.

``declare.py`` registers queries (``Actor.query``); ``snapshot.py`` reads the view and answers,
for ``client.py`` (``handle.query``). This module does no I/O, so declaring an actor does none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

import attrs
from returns.result import Failure, Result, Success

from akter import codec
from akter.actor._types import Actor
from akter.callers import Caller, Principal, principal_of
from akter.errors import AccessDenied, CorruptRecord, Defect, InvalidInput
from akter.ids import ActorRef

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a query's input type, named as in declare.py
O = TypeVar("O")  # noqa: E741 -- a query's output type, named as in declare.py

#: the most recent events a query may ask for (``recent=``)
MAX_RECENT = 1000


@attrs.frozen
class Event:
    """One committed event of an actor: its per-actor ``sequence``, the event and when it
    committed (the database clock)."""

    sequence: int
    value: object
    at: datetime


@attrs.frozen
class View(Generic[S]):
    """What a query handler sees: the actor's last committed ``state``, its last event
    ``sequence``, the ``recent`` events the query asked for (oldest first), the database clock
    when the snapshot was read, and the caller."""

    ref: ActorRef
    caller: Caller
    state: S
    sequence: int
    recent: tuple[Event, ...]
    now: datetime

    @property
    def principal(self) -> Principal | None:
        return principal_of(self.caller)


@attrs.frozen(eq=False)
class Query(Generic[S, I, O]):
    """A declared query of ``actor``: ``handler(view, payload) -> output``, run on a snapshot."""

    actor: Actor[S]
    name: str
    input: type[I]
    output: Any
    errors: tuple[type[Exception], ...]
    recent: int
    handler: Callable[[View[S], I], O]
    #: what an access policy can tell a query from a command by
    kind: str = "query"
    #: queries are never internal; an access policy may read this as it reads a command's
    internal: bool = False

    def __call__(self, view: View[S], payload: I) -> O:
        return self.handler(view, payload)

    def __repr__(self) -> str:
        return f"<query {self.actor.name}.{self.name}>"


def recent_problems(recent: object) -> list[str]:
    if not isinstance(recent, int) or isinstance(recent, bool) or not 0 <= recent <= MAX_RECENT:
        return [f"recent must be an int in 0..{MAX_RECENT}, got {recent!r}"]
    return []


def check_query(query: Query[Any, Any, Any], caller: Caller, payload: object) -> None:
    """What needs no database: the access policy, then the payload's type and storability."""
    if not query.actor.access(caller, cast(Any, query)):
        raise AccessDenied(f"{caller!r} may not ask {query!r}")
    expected = query.input
    if isinstance(expected, type) and not isinstance(payload, expected):
        raise InvalidInput(f"{query!r} takes a {expected.__name__}, got {type(payload).__name__}")
    codec.check(payload, expected)


def _decode_event(actor: Actor[Any], tag: str, value: bytes) -> object:
    event_type = actor.event_types.get(tag)
    if event_type is None:
        raise CorruptRecord(f"stored event tag {tag!r} is not an event type of {actor.name}")
    return codec.decode(value, event_type)


def decode_events(actor: Actor[Any], rows: Sequence[tuple[Any, ...]]) -> tuple[Event, ...]:
    """``(sequence, tag, value, created_at)`` rows as ``Event`` records, in the rows' order."""
    return tuple(Event(seq, _decode_event(actor, tag, bytes(value)), at) for seq, tag, value, at in rows)


def answer(query: Query[S, I, O], view: View[S], payload: I) -> Result[O, Exception]:
    """Run the handler on ``view``: ``Success(output)``, ``Failure(declared error)``, or a
    ``Defect`` raised (an undeclared exception, or an answer that would not read back)."""
    try:
        output = query.handler(view, payload)
    except query.errors as declared:
        return Failure(declared)
    except Exception as exc:
        raise Defect(
            f"{query!r} raised {type(exc).__name__}: {exc}", error_type=type(exc).__qualname__
        ) from exc
    if query.output is None and output is None:
        return Success(output)
    try:
        codec.check(output, query.output)
    except InvalidInput as exc:
        message = f"{query!r} answered a value that cannot be stored: {exc}"
        raise Defect(message, error_type="InvalidInput") from exc
    return Success(output)

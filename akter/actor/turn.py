"""The ``Turn``: what a command handler sees while its command is handled.

A turn is one transaction under the actor's generation row lock (see ``plan.py``). The handler
runs in memory between the load and the write: it reads and replaces ``turn.state``, emits
events, and stages work for other layers (outbox intents, workflow starts) that commits with the
turn or not at all. Every capability stops working when the turn ends, so a handler that leaks
its turn into a callback cannot write outside the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from akter import codec
from akter.actor import staged
from akter.actor._types import Actor, Command
from akter.callers import Caller, Principal, principal_of
from akter.errors import Defect, InvalidInput, TurnClosed
from akter.ids import ActorRef

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a command's input type, as in declare.py
I_contra = TypeVar("I_contra", contravariant=True)


class Startable(Protocol[I_contra]):
    """A member a turn can start (a workflow, ``akter.workflow.api.declare.Workflow``): its owner
    type, its input type, and how it stages its start on the turn. Defined here so that ``Turn.start``
    needs no import of the layer that implements it."""

    @property
    def actor(self) -> Actor[Any]: ...

    @property
    def input(self) -> type[Any]: ...

    def stage_start(self, turn: Turn[Any], payload: I_contra, key: str | None) -> str: ...


class Turn(Generic[S]):
    """One command being handled on one actor."""

    __slots__ = (
        "_closed",
        "_event_types",
        "_events",
        "_now",
        "_now_read",
        "_state",
        "caller",
        "command_id",
        "ref",
        "staged",
    )

    def __init__(  # noqa: PLR0917 -- built by the kernel alone
        self,
        ref: ActorRef,
        caller: Caller,
        command_id: str,
        state: S,
        now: datetime,
        event_types: Mapping[str, type] | None = None,
    ) -> None:
        self.ref = ref
        self.caller = caller
        self.command_id = command_id
        self._now = now
        self._now_read = False
        self._state = state
        self._events: list[object] = []
        #: the actor type's declared events by tag; None accepts any (a turn built by hand)
        self._event_types = event_types
        self._closed = False
        #: work other layers stage in this turn, by layer name; written before commit
        self.staged: dict[str, list[Any]] = {}

    def _check(self) -> None:
        if self._closed:
            raise TurnClosed(f"the turn of command {self.command_id} on {self.ref} has ended")

    @property
    def now(self) -> datetime:
        """The database clock when the turn took the actor's lock."""
        self._now_read = True
        return self._now

    @property
    def state(self) -> S:
        self._check()
        return self._state

    @state.setter
    def state(self, value: S) -> None:
        self._check()
        self._state = value

    @property
    def principal(self) -> Principal | None:
        """Whose action this turn serves: the caller, or a System caller's ``on_behalf_of``."""
        return principal_of(self.caller)

    def emit(self, event: object) -> None:
        """Record an event; it commits with the turn and gets the actor's next sequence number.

        An event of a type the actor does not declare is the handler's ``Defect``, raised here so
        its traceback points at the ``emit`` that made it; the turn rolls back."""
        self._check()
        types = self._event_types
        if types is not None and types.get(type(event).__name__) is not type(event):
            raise Defect(
                f"{self.ref.actor_type} does not declare event type {type(event).__qualname__}; "
                f"declared: {sorted(types)}",
                error_type="UndeclaredEvent",
            )
        self._events.append(event)

    @property
    def events(self) -> tuple[object, ...]:
        return tuple(self._events)

    def send(
        self,
        target: str | ActorRef,
        command: Command[I],
        payload: I,
        *,
        after: timedelta | None = None,
        at: datetime | None = None,
        key: str | None = None,
    ) -> None:
        """Stage ``command`` for delivery to ``target`` (an actor id of the command's type in this
        turn's tenant, or an ``ActorRef`` of this tenant) when the turn commits: now, ``after`` a
        delay or ``at`` a time on the database clock. A ``key`` replaces this actor's pending
        intent with that key (latest body wins). Nothing is staged if the turn fails."""
        self._check()
        intent = staged.build_send(self, target, command, payload, after=after, at=at, key=key)
        self.stage(staged.LAYER, intent)

    def cancel(self, key: str) -> None:
        """Remove this actor's pending intent with ``key`` when the turn commits (none: no-op)."""
        self._check()
        self.stage(staged.LAYER, staged.Cancel(staged.check_key(key)))

    def start(self, workflow: Startable[I], payload: I, *, key: str | None = None) -> str:
        """Start a workflow member of this actor when this turn commits; returns its execution
        id. Its event cursor sits before this turn's own events, so a wait in it sees them. With
        no ``key`` (and no key function on the workflow) the key derives from this turn's id."""
        self._check()
        if getattr(workflow, "actor", None) is None or workflow.actor.name != self.ref.actor_type:
            raise InvalidInput(
                f"{workflow!r} is not a member of {self.ref.actor_type}; start it through a send"
            )
        expected = workflow.input
        if not isinstance(payload, expected):
            raise InvalidInput(f"{workflow!r} takes a {expected.__name__}, got {type(payload).__name__}")
        codec.check(payload, expected)  # a payload that would not read back could never run
        return workflow.stage_start(self, payload, key)

    def stage(self, layer: str, item: Any) -> None:
        self._check()
        self.staged.setdefault(layer, []).append(item)

    def close(self) -> None:
        self._closed = True

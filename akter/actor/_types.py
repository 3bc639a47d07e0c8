"""What the kernel's helpers need of a declared actor type and command, as protocols.

``akter.actor.declare`` builds actor types and commands, and it uses the helpers that check
caps (``limits``), stage sends (``staged``), run turns (``turn``), read stored states
(``upgrade``) and answer queries (``query``). Those helpers annotate with the protocols below,
which ``declare.Actor`` and ``declare.Command`` satisfy by their shape, so no helper imports
``declare`` and the arrows inside ``akter.actor`` point one way: ``declare`` over the helpers
over this module, which imports only ``akter.ids``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from akter.ids import ActorRef

S_co = TypeVar("S_co", covariant=True)
I_contra = TypeVar("I_contra", contravariant=True)


class UpgradeStep(Protocol):
    """One declared upgrade (``akter.Upgrade``): states of ``source``'s shape go through
    ``function``."""

    @property
    def source(self) -> type[Any]: ...

    @property
    def function(self) -> Callable[[Any], Any]: ...


class Actor(Protocol[S_co]):
    """A declared actor type: its name, its state and event types, its access policy, its caps
    and its upgrades."""

    @property
    def name(self) -> str: ...

    @property
    def state_type(self) -> type[S_co]: ...

    @property
    def event_types(self) -> Mapping[str, type]: ...

    @property
    def access(self) -> Callable[[Any, Any], bool]: ...

    @property
    def max_payload_bytes(self) -> int: ...

    @property
    def max_event_bytes(self) -> int: ...

    @property
    def max_result_bytes(self) -> int: ...

    @property
    def upgrades(self) -> Sequence[UpgradeStep]: ...

    def initial_state(self) -> S_co: ...


class Command(Protocol[I_contra]):
    """A declared command of ``actor``'s type that takes an ``I_contra`` payload."""

    @property
    def actor(self) -> Actor[Any]: ...

    @property
    def name(self) -> str: ...

    @property
    def input(self) -> type[Any]: ...

    def __call__(self, turn: Any, payload: I_contra, /) -> Any: ...


class Turn(Protocol):
    """A turn as staging sees it (``akter.actor.turn.Turn``): the actor it runs on, and where the
    records it stages for other layers wait until its write."""

    @property
    def ref(self) -> ActorRef: ...

    def stage(self, layer: str, item: Any) -> None: ...

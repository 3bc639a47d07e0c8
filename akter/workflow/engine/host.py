"""What the workflow engine hands its parts, so that calls flow one way: down.

A pass (``passes.py``) is given a ``PassHost``: the pool and session it writes through, the
tuning it runs under, the declarations it looks workflows up in, and the few things it tells
the engine (schedule a pass again, forget a generation that fenced out). The turn hook
(``hook.py``) is given ``Handoffs``: the ``Handoff`` of each runner of this process, which
says whether the runner takes an execution and under which generation, and takes it after the
turn committed. The runner (``runner.py``) implements both; neither the pass nor the hook
imports it, so neither can reach past what these protocols name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from akter.ids import ActorRef, ExecutionId

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.actor.sender import Sender
    from akter.store.listener import Listener
    from akter.tuning import EngineTuning
    from akter.workflow.api.declare import Workflow
    from akter.workflow.engine.prefix import Finished


class Schedules(Protocol):
    def schedule(
        self,
        ref: ActorRef,
        eid: ExecutionId,
        generation: int | None = None,
        head: dict[str, Any] | None = None,
    ) -> None:
        """Run a pass of ``eid``: a continued execution's next run, or one a turn hands over
        once it committed (``generation``: the one it took or found held; ``head``: the row it
        wrote, so the pass needs no load)."""


class PassHost(Schedules, Protocol):
    """What a pass needs from the engine that runs it."""

    @property
    def sender(self) -> Sender:
        """The pool the pass writes through and the session whose clock and listener it uses."""

    @property
    def actors(self) -> Mapping[str, Actor[Any]]:
        """The declared actor types (a pass judges whether it can replay an execution)."""

    @property
    def tuning(self) -> EngineTuning:
        """The intervals the pass arms timers with and the times it holds and backs off."""

    @property
    def drop_steps(self) -> bool:
        """Whether a finished execution's steps are deleted with its finish."""

    @property
    def stopping(self) -> bool:
        """The relay drains: a pass starts nothing new and hands its execution on."""

    def workflow(self, actor_type: str, name: str) -> Workflow[Any, Any] | None:
        """The workflow ``name`` of ``actor_type`` as this process declares it."""

    def forget(self, ref: ActorRef, generation: int) -> None:
        """``generation`` of ``ref`` fenced out: another activation holds the actor."""


class Handoff(Schedules, Protocol):
    """What a turn of this process needs from the runner that may run its executions."""

    def owns(self, ref: ActorRef) -> bool:
        """Whether the runner takes new work of ``ref`` once the turn commits."""

    def generation(self, ref: ActorRef) -> int | None:
        """The generation of ``ref`` the runner holds, if any (the turn then takes none)."""

    def claiming(self, ref: ActorRef, turn: object) -> Callable[[], None]:
        """The turn is about to take a new generation of ``ref`` for the runner; the returned
        release is called once it handed it over (or ``turn`` is dropped, not committed)."""

    def try_finish(
        self, workflow: Workflow[Any, Any], eid: ExecutionId, params: dict[str, Any]
    ) -> Finished | None:
        """The start's body run in the turn up to its first effect: its finish, if it ended."""

    @property
    def listener(self) -> Listener:
        """Where a result finished in the turn is handed over to a waiting ``run.result()``."""


class Handoffs:
    """The ``Handoff`` of each runner of this process that runs (one per running relay)."""

    def __init__(self) -> None:
        self._handoffs: list[Handoff] = []

    def attach(self, handoff: Handoff) -> None:
        self._handoffs.append(handoff)

    def detach(self, handoff: Handoff) -> None:
        self._handoffs.remove(handoff)

    def owner(self, ref: ActorRef) -> Handoff | None:
        """The runner that takes new work of ``ref``, if one does."""
        return next((h for h in self._handoffs if h.owns(ref)), None)

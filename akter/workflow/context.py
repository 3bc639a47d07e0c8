"""``WorkflowContext``: what a body sees as its first argument (the running-driver marker it
consults is ``running.py``).

The context is rebuilt by every pass from the execution's durable record (tenant, principal,
key, version markers), never from whoever triggered the pass (invariant 9).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from akter.callers import Principal
from akter.ids import ActorRef
from akter.workflow.running import current_driver

if TYPE_CHECKING:
    from returns.result import Result

    from akter.actor.declare import Actor
    from akter.workflow.declare import ChildHandle, ChildStep, Workflow

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741 -- a child workflow's input type
O = TypeVar("O")  # noqa: E741 -- the conventional name of an output type


class ContinueAsNew(BaseException):
    """Raised by ``wf.continue_as_new(payload)``; ends the run and starts the next one (the pass
    sends the write, ``continue_as_new.py``)."""

    def __init__(self, payload: Any) -> None:
        self.payload = payload
        super().__init__("continue as new")


class Compensation:
    """A compensated forward step: registered before the body awaits it, so that an undo is
    known even for a step that succeeds after an interrupt abandoned the body."""

    __slots__ = ("effect", "result", "settled", "undo")

    def __init__(self, effect: Any, undo: Callable[[Any], Any]) -> None:
        self.effect = effect
        self.undo = undo
        self.settled = False
        self.result: Any = None


class WorkflowContext:
    """The execution a body runs for. Pure data plus two registries (compensations and
    finalizers) that the driver runs when the execution ends."""

    def __init__(
        self,
        *,
        execution_id: str,
        key: str,
        ref: ActorRef,
        principal: Principal | None,
        versions: dict[str, int],
        run_number: int = 1,
    ) -> None:
        from akter.workflow.determinism import ReplaySafeLogger

        self.execution_id = execution_id
        #: which run of the execution this is: 1, then one more per continue-as-new or new run
        self.run_number = run_number
        #: a logger that emits only past a step this pass settled, never on replay
        self.log = ReplaySafeLogger(self)
        self.key = key
        self.ref = ref
        self.principal = principal
        self._versions = versions
        self.compensations: list[Compensation] = []
        self.finalizers: list[Callable[[], Any]] = []

    def now(self) -> Awaitable[datetime]:
        """``await wf.now()``: the database clock, recorded the first time and the same on every
        replay (``determinism.py``)."""
        from akter.workflow.determinism import Now

        return cast("Awaitable[datetime]", Now())

    def random(self) -> float:
        """A float in [0, 1) derived from the execution and this call's position: the same on
        every replay, and nothing is written (``determinism.py``)."""
        from akter.workflow import determinism

        return determinism.random(self)

    def uuid4(self) -> uuid.UUID:
        """A version-4 UUID derived like ``random()``: the same on every replay."""
        from akter.workflow import determinism

        return determinism.uuid4(self)

    def continue_as_new(self, payload: Any) -> NoReturn:
        """End this run and start the next run of the same execution with ``payload``, in one
        fenced transaction that keeps the execution id and its event cursor
        (``continue_as_new.py``). Never returns; compensations do not run, finalizers do."""
        raise ContinueAsNew(payload)

    def version(self, name: str) -> int:
        """The version marker recorded when the execution started (0 if it predates it)."""
        return self._versions.get(name, 0)

    async def compensate(self, effect: Any, undo: Callable[[Any], Any]) -> Any:
        """Await ``effect``; if it succeeds, ``undo(result)`` (which returns an effect, usually an
        activity call) runs should the execution fail or be interrupted — also when the step
        succeeded only after an interrupt arrived. Nothing is undone before its forward step
        settled; a step that never succeeded is not undone. Compensations run in reverse order
        of registration, once, by the pass that records the result; a failing undo is reported
        on the result as ``CompensationFailed``."""
        entry = Compensation(effect, undo)
        self.compensations.append(entry)
        result = await effect
        entry.settled, entry.result = True, result
        return result

    async def start(
        self, actor: Actor[Any], actor_id: str, workflow: Workflow[I, O], input: I
    ) -> ChildHandle[O]:
        """``await wf.start(Warehouse, "w-1", Fulfil, line)``: start a child execution of
        ``workflow`` (a member of ``actor``) through the child step this workflow declared for
        it (``Parent.child(...)``); returns its ``ChildHandle`` (``await handle.result()``)."""
        from akter.workflow.declare import find_step

        return await self._child_step(actor, workflow, find_step).start(actor_id, input)

    async def run(
        self, actor: Actor[Any], actor_id: str, workflow: Workflow[I, O], input: I
    ) -> Result[O, Exception]:
        """``await wf.run(...)``: ``start`` and await the child's result, a ``Result``."""
        from akter.workflow.declare import find_step

        return await self._child_step(actor, workflow, find_step).run(actor_id, input)

    @staticmethod
    def _child_step(actor: Actor[Any], workflow: Workflow[Any, O], find: Callable[..., Any]) -> ChildStep[O]:
        driver = current_driver()
        if driver is None:
            raise RuntimeError("wf.start and wf.run are awaited in a workflow body")
        step: ChildStep[O] = find(driver.workflow, actor, workflow)
        return step

    def finalizer(self, thunk: Callable[[], Any]) -> None:
        """Register ``thunk()`` (returning an effect) to run once when the execution ends,
        whatever its outcome. Unlike a ``finally:`` block in the body — which runs at every
        suspension, because each pass closes the body's coroutine — a finalizer runs exactly
        once, by the pass that records the result."""
        self.finalizers.append(thunk)

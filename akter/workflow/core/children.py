"""Child executions: a workflow body starts a workflow member of another actor and awaits it.

A parent declares each kind of child it starts, at module level, as a step (so its manifest
knows the child's result schema, invariant 7)::

    fulfil = Order.child("fulfil", Fulfil)                 # Fulfil: a workflow of Warehouse

    @Order.body
    async def order(wf, o):
        line = await wf.run(Warehouse, "w-1", Fulfil, o.lines[0])   # Success(...) / Failure(...)
        child = await wf.start(Warehouse, "w-2", Fulfil, o.lines[1])  # a ChildHandle
        outcome = await child.result()
        results = await akter.all(*(fulfil.run("w-1", l) for l in o.lines), limit=10)

``wf.start(Actor, actor_id, Workflow, input)`` finds the child step the parent declared for
``Workflow`` (``fulfil.start(actor_id, input)`` names it directly). How it travels (the SQL is in
``sql/functions/``: ``akter_wf_start_child``, ``akter_wf_child_finished``,
``akter_wf_suspend_children``):

1. **Start** (``StartChild``, one occurrence of the child step): the parent's pass writes, in
   one fenced statement under the parent's lock, the child step row (pending, with the child's
   id) and an intent in the parent's outbox: the child actor's internal ``akter.wf.start_child``
   command. The child's key is derived from the parent's execution id and the occurrence, so a
   replay finds the row and starts nothing; a redelivered intent attaches to the execution
   already there. The intent's caller acts for the parent's principal.
2. The relay delivers it as a **turn on the child actor** (``register_start_child``): the
   child's execution row, linked to its parent (``ChildLinkMark``, written by the workflow hook
   with ``LINK``, which also interrupts a child whose parent already ended interrupted).
3. **Finish**: a trigger on the child's finish puts a resume of the parent in the child's outbox,
   in the finish's transaction. A parent that finished first ignores it.
4. **Result** (``ChildResult``, awaited under the start's occurrence): the parent's pass reads
   the finished child's result (one query for every child it waits on) and copies it into the
   child step row, with its next write. A suspension re-checks for finished children under the
   row lock (``akter_wf_suspend_children``), so a finish never slips between the pass's read and
   its suspension. Only the children a live branch awaits count there (``child_serve.prefetch`` names them):
   a child started and not awaited yet, or awaited by a race's losing branch, lets its
   parent rest (invariant 13), and a later await reads its result.

The result is a ``returns.Result``: ``Success(output)``, or ``Failure`` of the child's declared
error, ``Interrupted`` or a ``Defect`` — a child's failure never raises in the parent's body. It
is read as a client reads the child (``exits.execution_result``): an ``Interrupted`` names who
asked and why, which the parent copies from the child's row into its record.

A workflow declared with ``key=`` is refused as a child (``DeclarationError``): a child's key is
derived from its parent's start, and a key that is silently not applied deduplicates nothing.

**Lifetimes.** When a parent is interrupted, its finish interrupts (through its outbox) every
child it started whose result it has not recorded, unless the child step was declared with
``on_parent_interrupt="run_on"``. A child that finishes after its parent resumes nothing.

The child step, its effects and its handle are declared with the other steps (``declare.py``),
the internal start command with the member's other commands (``commands.py``). This module holds
what the driver makes of a child effect (``resolve``, the needs, the derived ids, no I/O); the
pass's side (``serve``, ``prefetch``) and the hook's (``LINK``) are ``child_serve.py``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import attrs

from akter.errors import CorruptRecord
from akter.ids import ActorRef, ExecutionId
from akter.workflow.api.declare import ChildHandle, ChildResult, ChildStep, StartChild, workflows_of
from akter.workflow.api.effects import Effect
from akter.workflow.core import exits
from akter.workflow.core.exits import Ok, Outcome

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from akter.actor.declare import Actor
    from akter.workflow.api.history import StepKey, StepRow

# ---- the App's check ------------------------------------------------------------------------


def undeclared_children(actors: Mapping[str, Actor[Any]]) -> list[str]:
    """The child steps whose workflow's actor type is not among ``actors`` (an App's check: a
    start sent to an actor type no process runs would never be delivered)."""
    return [
        f"{step.qualified_name} starts {step.child!r}, but the App does not declare {step.child.actor.name}"
        for actor in actors.values()
        for workflow in workflows_of(actor).values()
        for step in workflow.steps.values()
        if isinstance(step, ChildStep) and actors.get(step.child.actor.name) is not step.child.actor
    ]


# ---- ids ------------------------------------------------------------------------------------


def key_of(effect: Effect) -> StepKey | None:
    return effect.handle.key if isinstance(effect, ChildResult) else None


def child_id(  # noqa: PLR0917 -- the parts the id is derived from
    parent_eid: str, tenant: str, step: ChildStep[Any], actor_id: str, key: StepKey, run: int = 1
) -> ExecutionId:
    """The child's execution id, derived from its parent's, the parent's run (after a
    continue-as-new, the same start in the next run is another child) and the start's
    occurrence. A first run's ids are those of parents from before runs existed."""
    seed = f"{parent_eid}\x00{key.step}\x00{key.scope}\x00{key.occurrence}"
    if run > 1:
        seed += f"\x00run {run}"
    digest = hashlib.blake2b(seed.encode(), digest_size=12).hexdigest()
    ref = ActorRef(tenant, step.child.actor.name, actor_id)
    return ExecutionId(ref, step.child.name, f"{step.name}-{digest}")


# ---- needs: what the driver asks the pass to do ---------------------------------------------


@attrs.frozen
class StartChildNeed:
    effect: StartChild
    key: StepKey
    eid: ExecutionId


@attrs.frozen
class AwaitChildNeed:
    handle: ChildHandle[Any]
    key: StepKey


def resolve(  # noqa: PLR0917 -- the driver's view of one child effect
    effect: StartChild | ChildResult,
    key: StepKey,
    rows: Sequence[StepRow],
    parent_eid: str,
    tenant: str,
    run: int = 1,
) -> Outcome | StartChildNeed | AwaitChildNeed:
    """A child effect against the recorded history (no I/O)."""
    if isinstance(effect, StartChild):
        eid = child_id(parent_eid, tenant, effect.step, effect.actor_id, key, run)
        if not rows:
            return StartChildNeed(effect, key, eid)
        return Ok(ChildHandle(key=key, execution_id=str(eid), step=effect.step))
    if not rows:
        raise CorruptRecord(f"the result of child {key} is awaited but its start is not recorded")
    last = rows[-1]
    if last.exit is None:
        return AwaitChildNeed(effect.handle, key)
    step = effect.handle.step
    # what a client reading the child gets: the interrupter was folded in when it was recorded
    return Ok(exits.execution_result(last.exit, step.child.output, step.child.errors))

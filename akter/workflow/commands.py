"""The commands a workflow member adds to its actor, and what they stage in a turn.

* ``<Workflow name>`` (public): starts an execution. Its output is the execution id, so a retry
  of the same start (same command id) returns the same id from the receipt.
* ``akter.wf.interrupt:<Workflow name>`` (public, under the actor's access policy): what
  ``run.interrupt()`` sends. The turn flags the execution, records who asked in
  ``interrupted_by`` (the first to ask: its principal's key) and makes its timer due now, all
  committing with the receipt; a repeated id replays the receipt. The id in the payload must
  name an existing execution of this member, owned by this actor (so in this tenant):
  ``InvalidExecutionId`` otherwise, and nothing is written. A finished execution is left as it
  is, and the turn succeeds. An optional ``reason`` (at most ``MAX_REASON`` characters) is kept
  with the first asker in ``interrupt_reason``.
* ``akter.wf.retry:<Workflow name>`` (public, under the actor's access policy): an operator's
  retry (``akter.operate``). A failed or defect execution is started again as a new execution of
  the same input, keyed ``retry_key(old key)``, acting for the same principal, with
  ``retry_of`` (the old id) and ``retried_by`` (who asked); a blocked one has its timer made due
  now, so a runner offers it a pass at once. Anything else is ``ExecutionNotRetryable`` and
  nothing is written.
* ``akter.wf.pause:<Workflow name>``, ``akter.wf.unpause:<Workflow name>`` and
  ``akter.wf.resolve:<Workflow name>`` (public, under the actor's access policy): an operator's
  pause, resume and resolution of an execution that needs attention (``holds.py``).
* ``akter.wf.resume`` (internal, one per actor): delivered by the relay when an execution's
  timer fires. It marks the execution running and re-arms its timer as a recovery timer; after
  commit the process's workflow runner (``runner.py``) runs a pass.

``stage_start`` is also what ``Turn.start`` uses to start a workflow of the same actor inside
another turn: the execution row is written in that turn's transaction.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import attrs

from akter.actor import limits
from akter.actor.turn import Turn
from akter.callers import Anonymous, Caller, System, User, principal_of
from akter.errors import CorruptRecord, InvalidExecutionId
from akter.ids import ActorRef, ExecutionId
from akter.workflow.queries import RESUME

if TYPE_CHECKING:
    from akter.actor.declare import Command
    from akter.workflow.declare import Workflow

LAYER = "workflow"


@attrs.frozen
class Resume:
    execution_id: str


@attrs.frozen
class StartMark:
    execution_id: ExecutionId
    workflow: Workflow[Any, Any]
    payload: Any
    #: named by a key (the workflow's key function, or one given): the key policy applies
    keyed: bool = False
    #: the execution's deadline, from the start (``deadline.py``)
    timeout_ms: int | None = None


#: the longest reason an interrupt may carry (it is stored with the execution)
MAX_REASON = 1000


@attrs.frozen
class Interrupt:
    execution_id: str
    reason: str | None = None


@attrs.frozen
class RetryExecution:
    execution_id: str


@attrs.frozen
class ResumeMark:
    execution_id: ExecutionId


@attrs.frozen
class InterruptMark:
    """An interrupt as sent: the hook checks the id, so a refusal reaches the caller as itself
    (a handler's exception would reach it as a ``Defect``)."""

    workflow: Workflow[Any, Any]
    execution_id: str
    reason: str | None = None


@attrs.frozen
class RetryMark:
    """A retry as sent: the hook decides, under the row lock, what there is to retry."""

    workflow: Workflow[Any, Any]
    execution_id: str


_RETRY_SUFFIX = re.compile(r"~retry([0-9]*)\Z")


def retry_key(key: str) -> str:
    """The key of the execution that retries one keyed ``key``: ``k~retry``, then ``k~retry2``..."""
    found = _RETRY_SUFFIX.search(key)
    if found is None:
        return f"{key}~retry"
    return f"{key[: found.start()]}~retry{int(found.group(1) or 1) + 1}"


def stage_start(
    turn: Turn[Any],
    workflow: Workflow[Any, Any],
    payload: Any,
    key: str | None = None,
    *,
    timeout_ms: int | None = None,
) -> str:
    """Stage a start of ``workflow`` on the turn's actor; return the execution id. Without
    ``timeout_ms`` the workflow's declared timeout (if any) is the deadline."""
    limits.check_payload(workflow.start_command, payload)
    keyed = key is not None or workflow.key is not None
    if timeout_ms is None:
        timeout_ms = workflow.timeout_ms
    if key is None:
        key = workflow.key(payload) if workflow.key is not None else turn.command_id
        n = sum(1 for s in turn.staged.get(LAYER, []) if isinstance(s, StartMark))
        if workflow.key is None and n:
            key = f"{key}/{n}"  # a second default-keyed start in one turn gets its own execution
    eid = ExecutionId(turn.ref, workflow.name, key)
    turn.stage(LAYER, StartMark(eid, workflow, payload, keyed=keyed, timeout_ms=timeout_ms))
    return str(eid)


def parse_for(
    workflow: Workflow[Any, Any], execution_id: object, tenant: str, owner: ActorRef | None = None
) -> ExecutionId:
    """``execution_id`` parsed, if it names an execution of ``workflow`` in ``tenant`` (owned by
    ``owner``, if given); ``InvalidExecutionId`` otherwise."""
    eid = ExecutionId.parse(execution_id)
    if eid.owner.tenant != tenant:
        raise InvalidExecutionId("the execution id belongs to another tenant")
    if eid.owner.actor_type != workflow.actor.name or eid.workflow != workflow.name:
        raise InvalidExecutionId(f"the execution id is not of {workflow!r}")
    if owner is not None and eid.owner != owner:
        raise InvalidExecutionId(f"the execution id is not owned by {owner}")
    return eid


def interrupter_key(caller: Caller) -> str:
    """Who asked for an interrupt, as ``interrupted_by`` stores it: the principal's key, or for
    akter's own callers acting for nobody, the System caller's."""
    principal = principal_of(caller)
    return (caller if principal is None else principal).key


def decode_interrupter(key: str | None) -> Caller | None:
    if key is None:
        return None
    kind, _, name = key.partition(":")
    if kind == "user":
        return User(name)
    if kind == "system":
        return System(source=name)
    if key == Anonymous().key:
        return Anonymous()
    raise CorruptRecord(f"interrupted_by holds {key!r}, which names no caller")


def register_commands(workflow: Workflow[Any, Any]) -> Command[Any, Any, str]:
    actor = workflow.actor

    def start(turn: Turn[Any], payload: Any) -> str:
        return stage_start(turn, workflow, payload)

    start.__annotations__ = {"turn": Turn, "payload": workflow.input, "return": str}
    start.__name__ = workflow.name
    command: Command[Any, Any, str] = actor.command(name=workflow.name)(start)
    if RESUME not in actor.commands:
        actor.internal_command(RESUME, _resume, renewable=True)  # a resume only wakes a pass
    return command


def register_interrupt(workflow: Workflow[Any, Any]) -> Command[Any, Interrupt, None]:
    def interrupt(turn: Turn[Any], payload: Interrupt) -> None:
        turn.stage(LAYER, InterruptMark(workflow, payload.execution_id, payload.reason))

    interrupt.__annotations__ = {"turn": Turn, "payload": Interrupt, "return": None}
    # renewable: the first asker is kept and a finished execution is left as it is (INTERRUPT)
    return workflow.actor.member_command(f"akter.wf.interrupt:{workflow.name}", interrupt, renewable=True)


def register_retry(workflow: Workflow[Any, Any]) -> Command[Any, RetryExecution, None]:
    def retry(turn: Turn[Any], payload: RetryExecution) -> None:
        turn.stage(LAYER, RetryMark(workflow, payload.execution_id))

    retry.__annotations__ = {"turn": Turn, "payload": RetryExecution, "return": None}
    return workflow.actor.member_command(f"akter.wf.retry:{workflow.name}", retry)


def _resume(turn: Turn[Any], payload: Resume) -> None:
    eid = ExecutionId.parse(payload.execution_id)
    if eid.owner != turn.ref:
        raise InvalidExecutionId(f"{payload.execution_id} is not owned by {turn.ref}")
    turn.stage(LAYER, ResumeMark(eid))


_resume.__annotations__ = {"turn": Turn, "payload": Resume, "return": None}

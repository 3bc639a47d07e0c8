"""The commands a workflow member adds to its actor, and what they stage in a turn.

* ``<Workflow name>`` (public): starts an execution. Its output is the execution id, so a retry
  of the same start (same command id) returns the same id from the receipt.
* ``akter.wf.interrupt:<Workflow name>`` (public, under the actor's access policy): what
  ``run.interrupt()`` sends. The turn flags the execution, records who asked in
  ``interrupted_by`` (the first to ask: its principal's key) and makes its timer due now, all
  committing with the receipt; a repeated id replays the receipt. The id in the payload must
  name an existing execution of this member, owned by this actor (so in this tenant):
  ``InvalidExecutionId`` otherwise, and nothing is written. A finished execution is left as it
  is, and the turn succeeds. An optional ``reason`` (at most ``payloads.MAX_REASON`` characters) is kept
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

``register`` adds them all when a member is declared: ``akter.Actor`` (``akter.workflow.api.actor``)
calls it for each ``Workflow`` built on it, so this module sits above the declarations and they
never name it. The start a command stages (``StartMark``, ``stage_start``, also what
``Turn.start`` uses inside another turn) is the declarations' own (``declare.py``); the operator
commands' payloads are ``payloads.py``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

import attrs

from akter import codec
from akter.actor.turn import Turn
from akter.callers import Anonymous, Caller, System, User, principal_of
from akter.errors import CorruptRecord, InvalidExecutionId, InvalidInput
from akter.ids import ActorRef, ExecutionId
from akter.workflow.api.declare import LAYER, Workflow, stage_start, workflows_of
from akter.workflow.api.payloads import Interrupt, Pause, Resolve, RetryExecution, Unpause

if TYPE_CHECKING:
    from akter.actor.declare import Actor, Command

# the internal command the relay delivers when an execution's keyed timer is due (its outbox row's
# command, armed by the engine's SQL)
RESUME: Final = "akter.wf.resume"


@attrs.frozen
class Resume:
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


@attrs.frozen
class HoldMark:
    """A pause, unpause or resolution as sent; the hook applies it under the row lock."""

    workflow: Workflow[Any, Any]
    payload: Pause | Unpause | Resolve


def register_hold_commands(
    workflow: Workflow[Any, Any],
) -> tuple[Command[Any, Pause, None], Command[Any, Unpause, None], Command[Any, Resolve, None]]:
    made = []
    for verb, payload_type in (("pause", Pause), ("unpause", Unpause), ("resolve", Resolve)):

        def handler(turn: Turn[Any], payload: Any) -> None:
            turn.stage(LAYER, HoldMark(workflow, payload))

        handler.__annotations__ = {"turn": Turn, "payload": payload_type, "return": None}
        made.append(workflow.actor.member_command(f"akter.wf.{verb}:{workflow.name}", handler))
    return made[0], made[1], made[2]


_RETRY_SUFFIX = re.compile(r"~retry([0-9]*)\Z")


def retry_key(key: str) -> str:
    """The key of the execution that retries one keyed ``key``: ``k~retry``, then ``k~retry2``..."""
    found = _RETRY_SUFFIX.search(key)
    if found is None:
        return f"{key}~retry"
    return f"{key[: found.start()]}~retry{int(found.group(1) or 1) + 1}"


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


def command_name(workflow: Workflow[Any, Any]) -> str:
    return f"akter.wf.deadline:{workflow.name}"


def check_timeout(timeout: object, what: str) -> int | None:
    """A timeout as milliseconds; ``InvalidInput`` unless a positive ``timedelta`` (or None)."""
    if timeout is None:
        return None
    if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
        raise InvalidInput(f"{what} takes a positive timedelta, got {timeout!r}")
    return timeout // timedelta(milliseconds=1)


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


def register_deadline(workflow: Workflow[Any, Any]) -> Command[Any, Interrupt, None]:
    """The internal command a deadline intent delivers: an interrupt, checked and written by
    the workflow hook exactly as ``run.interrupt()``'s is."""

    def deadline(turn: Turn[Any], payload: Interrupt) -> None:
        turn.stage(LAYER, InterruptMark(workflow, payload.execution_id, payload.reason))

    deadline.__annotations__ = {"turn": Turn, "payload": Interrupt, "return": None}
    # renewable: an interrupt of a finished or already interrupted execution changes nothing
    return workflow.actor.internal_command(command_name(workflow), deadline, renewable=True)


def register_start_with(workflow: Workflow[Any, Any]) -> Command[Any, Any, str]:
    """``akter.wf.start:<workflow>`` (public, under the access policy): a start with options —
    what ``start(..., timeout=)`` sends. Its payload is the input and the timeout."""
    options = attrs.make_class(
        "StartWith",
        {
            "input": attrs.field(type=workflow.input),
            "timeout_ms": attrs.field(type=int | None, default=None),  # type: ignore[arg-type]
        },
        frozen=True,
    )

    def start_with(turn: Turn[Any], payload: Any) -> str:
        ms = (
            check_timeout(timedelta(milliseconds=payload.timeout_ms), "timeout")
            if payload.timeout_ms
            else None
        )
        return stage_start(turn, workflow, payload.input, timeout_ms=ms)

    start_with.__annotations__ = {"turn": Turn, "payload": options, "return": str}
    actor = workflow.actor
    command: Command[Any, Any, str] = actor.member_command(f"akter.wf.start:{workflow.name}", start_with)
    # a start with options is a start: the actor's policy is asked about the start command, so
    # a policy that restricts ``Workflow.start_command`` cannot be bypassed by adding a timeout
    policy = actor.access

    def access(caller: Any, asked: Any) -> bool:
        return policy(caller, workflow.start_command if asked is command else asked)

    actor.access = access
    return command


#: the internal command every actor type with workflows takes to start a child execution
START_CHILD = "akter.wf.start_child"


@attrs.frozen
class ChildStartPayload:
    """The internal start command's payload: which workflow, under which key, for which parent,
    and the child's input as the codec stores it."""

    workflow: str
    key: str
    parent: str
    input: bytes
    #: the child step's ``on_parent_interrupt``
    on_parent_interrupt: str = "interrupt"


@attrs.frozen
class ChildLinkMark:
    """Staged by the start command: the child's execution row names its parent."""

    execution_id: ExecutionId
    parent: ExecutionId
    on_parent_interrupt: str = "interrupt"


def register_start_child(actor: Actor[Any]) -> None:
    """The internal start command of ``actor`` (once per actor type with workflows)."""
    if START_CHILD in actor.commands:
        return

    def start_child(turn: Turn[Any], payload: ChildStartPayload) -> str:
        workflow = workflows_of(actor).get(payload.workflow)
        if workflow is None:
            raise InvalidInput(f"{turn.ref.actor_type} declares no workflow {payload.workflow!r}")
        parent = ExecutionId.parse(payload.parent)
        if parent.owner.tenant != turn.ref.tenant:
            raise InvalidInput("a child is started in its parent's tenant")
        value: Any = codec.decode(payload.input, workflow.input)
        eid = stage_start(turn, workflow, value, payload.key)
        turn.stage(LAYER, ChildLinkMark(ExecutionId.parse(eid), parent, payload.on_parent_interrupt))
        return eid

    start_child.__annotations__ = {"turn": Turn, "payload": ChildStartPayload, "return": str}
    actor.internal_command(START_CHILD, start_child, renewable=True)  # a second start attaches


def _resume(turn: Turn[Any], payload: Resume) -> None:
    eid = ExecutionId.parse(payload.execution_id)
    if eid.owner != turn.ref:
        raise InvalidExecutionId(f"{payload.execution_id} is not owned by {turn.ref}")
    turn.stage(LAYER, ResumeMark(eid))


_resume.__annotations__ = {"turn": Turn, "payload": Resume, "return": None}


def register(workflow: Workflow[Any, Any]) -> None:
    """Add the commands of a newly declared ``workflow`` to its actor, and name them on it."""
    workflow.start_command = register_commands(workflow)
    workflow.interrupt_command = register_interrupt(workflow)
    workflow.retry_command = register_retry(workflow)
    register_start_child(workflow.actor)
    workflow.deadline_command = register_deadline(workflow)
    workflow.start_with_command = register_start_with(workflow)
    workflow.pause_command, workflow.unpause_command, workflow.resolve_command = register_hold_commands(
        workflow
    )

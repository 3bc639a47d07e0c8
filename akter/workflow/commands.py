"""The commands a workflow member adds to its actor, and what they stage in a turn.

* ``<Workflow name>`` (public): starts an execution. Its output is the execution id, so a retry
  of the same start (same command id) returns the same id from the receipt.
* ``akter.wf.resume`` (internal, one per actor): delivered by the relay when an execution's
  timer fires. It marks the execution running and re-arms its timer as a recovery timer; after
  commit the process's workflow runner (``runner.py``) runs a pass.

``stage_start`` is also what ``Turn.start`` uses to start a workflow of the same actor inside
another turn: the execution row is written in that turn's transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from akter import limits
from akter.actor.turn import Turn
from akter.errors import InvalidExecutionId
from akter.ids import ExecutionId
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


@attrs.frozen
class ResumeMark:
    execution_id: ExecutionId


def stage_start(turn: Turn[Any], workflow: Workflow[Any, Any], payload: Any, key: str | None = None) -> str:
    """Stage a start of ``workflow`` on the turn's actor; return the execution id."""
    limits.check_payload(workflow.start_command, payload)
    if key is None:
        key = workflow.key(payload) if workflow.key is not None else turn.command_id
        n = sum(1 for s in turn.staged.get(LAYER, []) if isinstance(s, StartMark))
        if workflow.key is None and n:
            key = f"{key}/{n}"  # a second default-keyed start in one turn gets its own execution
    eid = ExecutionId(turn.ref, workflow.name, key)
    turn.stage(LAYER, StartMark(eid, workflow, payload))
    return str(eid)


def register_commands(workflow: Workflow[Any, Any]) -> Command[Any, Any, str]:
    actor = workflow.actor

    def start(turn: Turn[Any], payload: Any) -> str:
        return stage_start(turn, workflow, payload)

    start.__annotations__ = {"turn": Turn, "payload": workflow.input, "return": str}
    start.__name__ = workflow.name
    command: Command[Any, Any, str] = actor.command(name=workflow.name)(start)
    if RESUME not in actor.commands:
        actor.internal_command(RESUME, _resume)
    return command


def _resume(turn: Turn[Any], payload: Resume) -> None:
    eid = ExecutionId.parse(payload.execution_id)
    if eid.owner != turn.ref:
        raise InvalidExecutionId(f"{payload.execution_id} is not owned by {turn.ref}")
    turn.stage(LAYER, ResumeMark(eid))


_resume.__annotations__ = {"turn": Turn, "payload": Resume, "return": None}

"""What an operator does to executions: interrupt them, retry them.

Each action is a receipted command of the execution's workflow member, sent as the operator's
caller, so the actor's access policy decides and the execution records who asked:

* interrupt — ``akter.wf.interrupt:<Workflow>`` with an optional reason; the execution keeps who
  asked first and their reason (``interrupted_by``, ``interrupt_reason``), and its result and
  timeline show them;
* retry — ``akter.wf.retry:<Workflow>``: a failed or defect execution is started again as a new
  execution of the same input, acting for the same principal, linked to the old one
  (``retry_of``, ``retried_by``); a blocked one is offered to runners again now.

Acting on many (``act_on_matching``) reads the matching ids a page at a time first, then acts on
each: one refusal (access denied, finished meanwhile) is reported with its execution and does not
stop the others. Nothing here decides anything the turn does not decide again under the row lock:
the reading before a send only words the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, LiteralString, Protocol

import attrs
import psycopg_pool

from akter.actor.declare import Actor, Command
from akter.callers import Caller
from akter.errors import AccessDenied, AkterError, InvalidExecutionId, InvalidInput
from akter.ids import ActorRef, CommandId, ExecutionId
from akter.operate.query import ExecutionFilter, iterate
from akter.workflow.commands import MAX_REASON, Interrupt, RetryExecution, retry_key
from akter.workflow.declare import Workflow, workflows_of

OPEN_STATUSES = ("running", "suspended", "blocked")


class Engine(Protocol):
    """What the actions need of the engine: its pool, its declarations, and a way to send."""

    @property
    def pool(self) -> psycopg_pool.AsyncConnectionPool[Any]: ...

    @property
    def actors(self) -> Mapping[str, Actor[Any]]: ...

    async def send(
        self,
        ref: ActorRef,
        command: Command[Any, Any, Any],
        payload: object,
        command_id: CommandId | None,
        caller: Caller,
    ) -> Any: ...


@attrs.frozen
class Acted:
    """What one action did to one execution. ``done`` false: refused (``error`` says why, when
    akter refused it) or nothing to do (``message`` says why)."""

    execution_id: str
    done: bool
    message: str
    #: a retry that started a new execution: its id
    new_execution_id: str | None = None
    error: AkterError | None = None


def workflow_of(actors: Mapping[str, Actor[Any]], eid: ExecutionId) -> Workflow[Any, Any]:
    """The workflow member ``eid`` is an execution of, as this App declares it."""
    actor = actors.get(eid.owner.actor_type)
    workflows = workflows_of(actor)
    workflow = workflows.get(eid.workflow)
    if workflow is None:
        raise InvalidExecutionId(
            f"this App declares no workflow {eid.owner.actor_type}.{eid.workflow}, so it cannot act on {eid}"
        )
    return workflow


_STATUS: LiteralString = """
SELECT status, outcome, blocked_reason FROM actor_workflow_executions
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""


async def _status(engine: Engine, eid: ExecutionId) -> tuple[str, str | None, str | None] | None:
    async with engine.pool.connection() as conn:
        cur = await conn.execute(_STATUS, {"rk": eid.owner.routing_key, "eid": str(eid)})
        row = await cur.fetchone()
    return None if row is None else (row[0], row[1], row[2])


async def _send(
    engine: Engine, eid: ExecutionId, command: Command[Any, Any, Any], payload: object, caller: Caller
) -> Acted | None:
    """Send; ``None`` when it committed, else the refusal."""
    try:
        await engine.send(eid.owner, command, payload, None, caller)
    except (AccessDenied, InvalidInput) as exc:
        return Acted(str(eid), done=False, message=f"refused: {exc}", error=exc)
    return None


async def interrupt(engine: Engine, execution_id: str, *, caller: Caller, reason: str | None = None) -> Acted:
    """Ask one execution to stop, as ``caller``, with an optional reason."""
    if reason is not None and len(reason) > MAX_REASON:
        raise InvalidInput(f"an interrupt's reason is at most {MAX_REASON} characters")
    eid = ExecutionId.parse(execution_id)
    workflow = workflow_of(engine.actors, eid)
    status = await _status(engine, eid)
    if status is None:
        return Acted(execution_id, done=False, message="no such execution is stored")
    if status[0] == "finished":
        return Acted(execution_id, done=False, message=f"already finished ({status[1]})")
    refused = await _send(engine, eid, workflow.interrupt_command, Interrupt(execution_id, reason), caller)
    return refused or Acted(execution_id, done=True, message="interrupt requested")


async def retry(engine: Engine, execution_id: str, *, caller: Caller) -> Acted:
    """Start a failed or defect execution again as a new one, or offer a blocked one to
    runners now, as ``caller``."""
    eid = ExecutionId.parse(execution_id)
    workflow = workflow_of(engine.actors, eid)
    status = await _status(engine, eid)
    if status is None:
        return Acted(execution_id, done=False, message="no such execution is stored")
    refused = await _send(engine, eid, workflow.retry_command, RetryExecution(execution_id), caller)
    if refused is not None:
        return refused
    if status[0] != "finished":
        return Acted(execution_id, done=True, message="offered to runners again now")
    new = str(ExecutionId(eid.owner, eid.workflow, retry_key(eid.key)))
    return Acted(execution_id, done=True, message=f"retried as {new}", new_execution_id=new)


async def act_on_matching(
    engine: Engine,
    where: ExecutionFilter,
    act: Callable[[str], Awaitable[Acted]],
    *,
    statuses: tuple[str, ...],
) -> list[Acted]:
    """``act`` on every execution ``where`` matches whose status is one of ``statuses`` (all of
    them when ``where`` names none)."""
    wanted = tuple(s for s in (where.status or statuses) if s in statuses)
    if not wanted:
        return []
    ids = [row.execution_id async for row in iterate(engine.pool, attrs.evolve(where, status=wanted))]
    return [await act(execution_id) for execution_id in ids]


async def interrupt_matching(
    engine: Engine, where: ExecutionFilter, *, caller: Caller, reason: str | None = None
) -> list[Acted]:
    """Interrupt every open execution ``where`` matches."""

    async def act(execution_id: str) -> Acted:
        return await interrupt(engine, execution_id, caller=caller, reason=reason)

    return await act_on_matching(engine, where, act, statuses=OPEN_STATUSES)


async def retry_matching(engine: Engine, where: ExecutionFilter, *, caller: Caller) -> list[Acted]:
    """Retry every failed or defect execution ``where`` matches, and offer every blocked one
    again (a filter on outcome leaves the blocked ones out: they have none)."""

    async def act(execution_id: str) -> Acted:
        return await retry(engine, execution_id, caller=caller)

    acted: list[Acted] = []
    if not where.outcome:
        acted += await act_on_matching(engine, where, act, statuses=("blocked",))
    failed = tuple(o for o in (where.outcome or RETRIED_OUTCOMES) if o in RETRIED_OUTCOMES)
    if failed:
        acted += await act_on_matching(
            engine, attrs.evolve(where, outcome=failed), act, statuses=("finished",)
        )
    return acted


RETRIED_OUTCOMES = ("failed", "defect")

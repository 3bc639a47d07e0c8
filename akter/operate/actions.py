"""What an operator does to executions: interrupt, retry, pause, resume and resolve them.

Each action is a receipted command of the execution's workflow member, sent as the operator's
caller, so the actor's access policy decides and the execution records who asked:

* interrupt — ``akter.wf.interrupt:<Workflow>`` with an optional reason; the execution keeps who
  asked first and their reason (``interrupted_by``, ``interrupt_reason``), and its result and
  timeline show them;
* retry — ``akter.wf.retry:<Workflow>``: a failed or defect execution is started again as a new
  execution of the same input, acting for the same principal, linked to the old one
  (``retry_of``, ``retried_by``); a blocked one is offered to runners again now;
* pause and resume — ``akter.wf.pause:<Workflow>`` (with a reason) and
  ``akter.wf.unpause:<Workflow>`` (``akter.workflow.engine.holds``);
* resolve — ``akter.wf.resolve:<Workflow>``: an execution that needs attention gets the waiting
  attempt's result, a declared error, one more attempt (or pass), or fails. The resolution names
  the attempt this side read as waiting, so two operators deciding at once cannot both win: the
  second is refused with ``ExecutionNotResolvable``. An interrupt of an execution seen needing
  attention is sent the same way (a resolution that interrupts it), so it too loses to a decision
  taken first instead of overriding it.

Acting on many (``each_matching``) walks the matching executions a keyset page at a time and acts
on each row of a page before the next page is read, so a filter that matches 100,000 executions
holds one page (``query.DEFAULT_PAGE`` rows) at a time; executions that start meanwhile (a retry's
new execution among them) are newer than the cursor and never visited. One refusal (access
denied, finished meanwhile, an execution of a workflow this App does not declare, a busy actor,
a database error on its turn) is reported with its execution (``guarded``) and does not stop the
others: an operator's drain is never left half done without saying which half.
Nothing here decides anything the turn does not decide again under the row lock: the reading
before a send only words the answer and names what the operator saw.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, LiteralString, Protocol

import attrs
import psycopg
import psycopg_pool

from akter import faults
from akter.actor.declare import Actor, Command
from akter.callers import Caller
from akter.errors import AccessDenied, AkterError, InvalidExecutionId, InvalidInput
from akter.ids import ActorRef, CommandId, ExecutionId
from akter.operate.query import DEFAULT_PAGE, ExecutionFilter, iterate
from akter.workflow.api.commands import retry_key
from akter.workflow.api.declare import Workflow, workflows_of
from akter.workflow.api.payloads import MAX_REASON, Interrupt, Pause, Resolve, RetryExecution, Unpause

OPEN_STATUSES = ("running", "suspended", "blocked", "paused", "needs_attention")
#: what a pause applies to: every open execution but a paused one
PAUSABLE = ("running", "suspended", "blocked", "needs_attention")


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
SELECT status, outcome, blocked_reason, paused_by, attention_step, attention_scope,
       attention_occurrence, attention_attempt, attention_reason
  FROM actor_workflow_executions
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""


@attrs.frozen
class _Seen:
    """An execution as an action read it before sending."""

    status: str
    outcome: str | None
    blocked_reason: str | None
    paused_by: str | None
    #: the attempt waiting for a person (step, scope, occurrence, attempt); step None: passes failed
    attention: tuple[str | None, str | None, int | None, int | None]
    attention_reason: str | None


async def _status(engine: Engine, eid: ExecutionId) -> _Seen | None:
    async with engine.pool.connection() as conn:
        cur = await conn.execute(_STATUS, {"rk": eid.owner.routing_key, "eid": str(eid)})
        row = await cur.fetchone()
    if row is None:
        return None
    return _Seen(row[0], row[1], row[2], row[3], (row[4], row[5], row[6], row[7]), row[8])


async def _read(engine: Engine, execution_id: str) -> tuple[ExecutionId, Workflow[Any, Any], _Seen] | Acted:
    """What an action acts on, as read before it sends; an ``Acted`` when nothing is stored."""
    eid = ExecutionId.parse(execution_id)
    workflow = workflow_of(engine.actors, eid)
    seen = await _status(engine, eid)
    if seen is None:
        return Acted(execution_id, done=False, message="no such execution is stored")
    return eid, workflow, seen


async def _send(
    engine: Engine, eid: ExecutionId, command: Command[Any, Any, Any], payload: object, caller: Caller
) -> Acted | None:
    """Send; ``None`` when it committed, else the refusal."""
    await faults.hit("operate.before_send", str(eid))
    try:
        await engine.send(eid.owner, command, payload, None, caller)
    except (AccessDenied, InvalidInput) as exc:
        return Acted(str(eid), done=False, message=f"refused: {exc}", error=exc)
    return None


async def interrupt(engine: Engine, execution_id: str, *, caller: Caller, reason: str | None = None) -> Acted:
    """Ask one execution to stop, as ``caller``, with an optional reason."""
    if reason is not None and len(reason) > MAX_REASON:
        raise InvalidInput(f"an interrupt's reason is at most {MAX_REASON} characters")
    read = await _read(engine, execution_id)
    if isinstance(read, Acted):
        return read
    eid, workflow, status = read
    if status.status == "finished":
        return Acted(execution_id, done=False, message=f"already finished ({status.outcome})")
    if status.status == "needs_attention":
        # a decision on what it waits for: it loses to one taken first (see the module's doc)
        payload = _resolution(execution_id, status, "interrupt", reason=reason)
        refused = await _send(engine, eid, workflow.resolve_command, payload, caller)
        return refused or Acted(
            execution_id, done=True, message="interrupt requested (it needed attention; this resolves it)"
        )
    refused = await _send(engine, eid, workflow.interrupt_command, Interrupt(execution_id, reason), caller)
    return refused or Acted(execution_id, done=True, message="interrupt requested")


async def retry(engine: Engine, execution_id: str, *, caller: Caller) -> Acted:
    """Start a failed or defect execution again as a new one, or offer a blocked one to
    runners now, as ``caller``."""
    read = await _read(engine, execution_id)
    if isinstance(read, Acted):
        return read
    eid, workflow, status = read
    refused = await _send(engine, eid, workflow.retry_command, RetryExecution(execution_id), caller)
    if refused is not None:
        return refused
    if status.status != "finished":
        return Acted(execution_id, done=True, message="offered to runners again now")
    new = str(ExecutionId(eid.owner, eid.workflow, retry_key(eid.key)))
    return Acted(execution_id, done=True, message=f"retried as {new}", new_execution_id=new)


async def each_matching(
    engine: Engine,
    where: ExecutionFilter,
    act: Callable[[str], Awaitable[Acted]],
    *,
    statuses: tuple[str, ...],
    page_size: int = DEFAULT_PAGE,
) -> AsyncIterator[Acted]:
    """``act`` on every execution ``where`` matches whose status is one of ``statuses`` (all of
    them when ``where`` names none), a page at a time, yielding each outcome as it comes."""
    wanted = tuple(s for s in (where.status or statuses) if s in statuses)
    if not wanted:
        return
    async for row in iterate(engine.pool, attrs.evolve(where, status=wanted), page_size=page_size):
        yield await guarded(act, row.execution_id)


async def guarded(act: Callable[[str], Awaitable[Acted]], execution_id: str) -> Acted:
    """``act`` on one execution; what refuses it (akter's refusals, a database error on its turn,
    no connection in time) is its ``Acted``, refused, instead of ending the actions after it. A
    bug in akter is raised."""
    try:
        return await act(execution_id)
    except (AkterError, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        error = exc if isinstance(exc, AkterError) else None
        words = " ".join(str(exc).split()) or type(exc).__name__
        return Acted(execution_id, done=False, message=f"refused: {words}", error=error)


def interrupt_matching(
    engine: Engine,
    where: ExecutionFilter,
    *,
    caller: Caller,
    reason: str | None = None,
    page_size: int = DEFAULT_PAGE,
) -> AsyncIterator[Acted]:
    """Interrupt every open execution ``where`` matches."""
    act = functools.partial(interrupt, engine, caller=caller, reason=reason)
    return each_matching(engine, where, act, statuses=OPEN_STATUSES, page_size=page_size)


async def retry_matching(
    engine: Engine, where: ExecutionFilter, *, caller: Caller, page_size: int = DEFAULT_PAGE
) -> AsyncIterator[Acted]:
    """Retry every failed or defect execution ``where`` matches, and offer every blocked one
    again (a filter on outcome leaves the blocked ones out: they have none)."""
    act = functools.partial(retry, engine, caller=caller)
    if not where.outcome:
        async for acted in each_matching(engine, where, act, statuses=("blocked",), page_size=page_size):
            yield acted
    failed = tuple(o for o in (where.outcome or RETRIED_OUTCOMES) if o in RETRIED_OUTCOMES)
    if failed:
        async for acted in each_matching(
            engine, attrs.evolve(where, outcome=failed), act, statuses=("finished",), page_size=page_size
        ):
            yield acted


def pause_matching(
    engine: Engine,
    where: ExecutionFilter,
    *,
    caller: Caller,
    reason: str | None = None,
    page_size: int = DEFAULT_PAGE,
) -> AsyncIterator[Acted]:
    """Pause every open execution ``where`` matches that is not paused already."""
    act = functools.partial(pause, engine, caller=caller, reason=reason)
    return each_matching(engine, where, act, statuses=PAUSABLE, page_size=page_size)


def unpause_matching(
    engine: Engine, where: ExecutionFilter, *, caller: Caller, page_size: int = DEFAULT_PAGE
) -> AsyncIterator[Acted]:
    """Resume every paused execution ``where`` matches."""
    act = functools.partial(unpause, engine, caller=caller)
    return each_matching(engine, where, act, statuses=("paused",), page_size=page_size)


# ---- pause, resume, resolve ---------------------------------------------------------------------


async def pause(engine: Engine, execution_id: str, *, caller: Caller, reason: str | None = None) -> Acted:
    """Pause one execution, as ``caller``: it finishes its in-flight attempts, then holds."""
    if reason is not None and len(reason) > MAX_REASON:
        raise InvalidInput(f"a pause's reason is at most {MAX_REASON} characters")
    read = await _read(engine, execution_id)
    if isinstance(read, Acted):
        return read
    eid, workflow, status = read
    if status.status == "finished":
        return Acted(execution_id, done=False, message=f"already finished ({status.outcome})")
    if status.paused_by is not None:
        return Acted(execution_id, done=True, message=f"already paused by {status.paused_by}")
    refused = await _send(engine, eid, workflow.pause_command, Pause(execution_id, reason), caller)
    if refused is not None:
        return refused
    held = "paused now" if status.status == "suspended" else "pause requested"
    return Acted(execution_id, done=True, message=held)


async def unpause(engine: Engine, execution_id: str, *, caller: Caller) -> Acted:
    """Resume one paused execution, as ``caller``: its timer is due now, and it goes on."""
    read = await _read(engine, execution_id)
    if isinstance(read, Acted):
        return read
    eid, workflow, status = read
    if status.status == "finished":
        if status.paused_by is not None:
            # asked to pause while it ran, it finished before it held: the unpause only drops
            # what is left of the pause (``holds.UNPAUSE``); nothing of it goes on
            await _send(engine, eid, workflow.unpause_command, Unpause(execution_id), caller)
        return Acted(execution_id, done=False, message=f"already finished ({status.outcome})")
    if status.paused_by is None:
        return Acted(execution_id, done=False, message=f"not paused ({status.status})")
    refused = await _send(engine, eid, workflow.unpause_command, Unpause(execution_id), caller)
    return refused or Acted(execution_id, done=True, message="goes on now")


def _resolution(
    execution_id: str, seen: _Seen, decision: str, *, value: str | None = None, reason: str | None = None
) -> Resolve:
    step, scope, occurrence, attempt = seen.attention
    return Resolve(execution_id, decision, value, step, scope, occurrence, attempt, reason=reason)


async def resolve(
    engine: Engine,
    execution_id: str,
    *,
    caller: Caller,
    decision: str,
    value: str | None = None,
    reason: str | None = None,
) -> Acted:
    """Resolve one execution that needs attention, as ``caller``: ``decision`` is ``result``
    (``value`` the JSON of the waiting activity's result), ``error`` (``value`` the JSON of
    ``{"type": <declared error>, "value": <its fields>}``), ``retry``, ``fail`` or
    ``interrupt``. The turn checks ``value`` against the step's declarations
    (``InvalidResolution``) and that the attempt read here as waiting still is
    (``ExecutionNotResolvable``); either refusal writes nothing."""
    read = await _read(engine, execution_id)
    if isinstance(read, Acted):
        return read
    eid, workflow, seen = read
    payload = _resolution(execution_id, seen, decision, value=value, reason=reason)
    refused = await _send(engine, eid, workflow.resolve_command, payload, caller)
    if refused is not None:
        return refused
    return Acted(execution_id, done=True, message=_DONE[decision])


_DONE = {
    "result": "its result supplied; it goes on",
    "error": "its error supplied; it goes on",
    "retry": "one more attempt allowed; it goes on",
    "fail": "failed",
    "interrupt": "interrupted; it compensates and finishes",
}


async def waiting_step(engine: Engine, execution_id: str) -> Any:
    """The activity declaration an execution that needs attention waits at (``None``: it does
    not, or its passes failed), to check a supplied value before it is sent."""
    eid = ExecutionId.parse(execution_id)
    seen = await _status(engine, eid)
    if seen is None or seen.status != "needs_attention" or seen.attention[0] is None:
        return None
    return workflow_of(engine.actors, eid).steps.get(seen.attention[0])


RETRIED_OUTCOMES = ("failed", "defect")

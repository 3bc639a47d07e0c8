"""Child executions, the engine's side (``children.py`` holds the declarations, effects and
needs): what a pass writes and reads for the children it starts and awaits (``serve``,
``prefetch``, the suspension that knows them) and what the turn hook writes for a started child
(``LINK``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, LiteralString

from psycopg.rows import dict_row

from akter import codec, telemetry
from akter.callers import Principal, System
from akter.ids import ExecutionId
from akter.outbox.intents import encode_caller
from akter.workflow.api.commands import START_CHILD, ChildLinkMark, ChildStartPayload
from akter.workflow.api.history import StepKey, StepRow
from akter.workflow.api.payloads import Interrupt
from akter.workflow.core import exits
from akter.workflow.core.children import AwaitChildNeed, StartChildNeed

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import psycopg_pool

    from akter.workflow.core.driver import Driver
    from akter.workflow.engine.outcomes import Outcomes

# ---- the pass's side ------------------------------------------------------------------------

_CHILD_ARGS = (
    "%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s, %(eid)s, %(bucket)s::smallint, "
    "%(steps)s::text[], %(scopes)s::text[], %(occurrences)s::int[], %(attempts)s::int[], %(exits)s::bytea[]"
)

START: LiteralString = (
    "SELECT fenced, settled, started, started_ms FROM akter_wf_start_child("
    + _CHILD_ARGS
    + ", %(step)s, %(scope)s, %(occurrence)s, %(child_id)s, %(child_rk)s, %(child_type)s,"
    " %(child_actor_id)s, %(child_workflow)s, %(policy)s, %(command)s, %(payload)s, %(caller)s,"
    " %(trace)s)"
)

# the suspension of an execution that has children (sql/functions/akter_wf_suspend_children.sql):
# the parameters of queries.SUSPEND and the children the pass's live branches await (``awaited``)
SUSPEND: LiteralString = (
    "SELECT fenced, interrupt, unscanned FROM akter_wf_suspend_children("
    + _CHILD_ARGS
    + ", %(due)s, %(abandon)s::text[], %(knows_interrupt)s, %(abandoned)s, %(notify_within)s,"
    " %(awaited)s::text[])"
)

# the finished children among those a pass waits on: a point read by each child's routing key
FINISHED: LiteralString = """
SELECT c.execution_id, c.result, c.interrupted_by, c.interrupt_reason
  FROM unnest(%(child_rks)s::bigint[], %(child_ids)s::text[]) AS u(rk, eid)
  JOIN actor_workflow_executions c ON c.routing_key = u.rk AND c.execution_id = u.eid
 WHERE c.status = 'finished'"""


def has_children(history: dict[StepKey, list[StepRow]]) -> bool:
    return any(rows and rows[0].kind == "child" for rows in history.values())


async def prefetch(
    pool: psycopg_pool.AsyncConnectionPool[Any], needs: Sequence[object]
) -> dict[str, bytes | None]:
    """Read, in one query, which of the children the pass waits on have finished. Every child a
    live branch awaits is a key of the answer (its result exit, None while it runs): those, and
    only those, refuse the pass's suspension once finished (``SUSPEND``)."""
    waiting = [n for n in needs if isinstance(n, AwaitChildNeed)]
    results: dict[str, bytes | None] = dict.fromkeys((n.handle.execution_id for n in waiting), None)
    if not waiting:
        return results
    eids = [ExecutionId.parse(n.handle.execution_id) for n in waiting]
    async with pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            FINISHED, {"child_rks": [e.owner.routing_key for e in eids], "child_ids": [str(e) for e in eids]}
        )
        for r in await cur.fetchall():
            results[r["execution_id"]] = _recorded(
                bytes(r["result"]), r["interrupted_by"], r["interrupt_reason"]
            )
    return results


def _recorded(result: bytes, by: str | None, reason: str | None) -> bytes:
    """The child's result as its parent records it: with who asked for its interrupt and why
    (which the child's row keeps beside its result), so the parent's replays read what a
    client reading the child reads (``exits.execution_result``)."""
    if by is None and reason is None:
        return result
    exit_ = codec.decode_primitive(result)
    folded = exits.with_interrupter(exit_, by, reason)
    return result if folded == exit_ else codec.encode(folded)


def suspend_params(child_results: Mapping[str, bytes | None]) -> dict[str, Any]:
    """``SUSPEND``'s own parameter: the children the pass's live branches await, as ``prefetch``
    found them this round."""
    return {"awaited": sorted(child_results)}


async def serve(
    need: StartChildNeed | AwaitChildNeed,
    out: Outcomes,
    driver: Driver,
    child_results: Mapping[str, bytes | None],
    principal: Principal | None,
) -> bool | None:
    """True: recorded (advance again; a row changed); None: the child is still running."""
    if isinstance(need, AwaitChildNeed):
        result = child_results.get(need.handle.execution_id)
        if result is None:
            return None
        # recorded in the driver now, written with the pass's next write (outcomes.py)
        out.add((need.key, 1, result))
        driver.record(StepRow(need.key, 1, "child", codec.decode_primitive(result)))
        return True
    effect, eid = need.effect, need.eid
    step, child = effect.step, effect.step.child
    payload = ChildStartPayload(
        workflow=child.name,
        key=eid.key,
        parent=out.params["eid"],
        input=codec.encode(effect.input, child.input),
        on_parent_interrupt=step.on_parent_interrupt,
    )
    caller = System(source="workflow", ref=out.params["eid"], on_behalf_of=principal)
    row = await out.carrying(
        START,
        {
            "step": need.key.step,
            "scope": need.key.scope,
            "occurrence": need.key.occurrence,
            "child_id": str(eid),
            "child_rk": eid.owner.routing_key,
            "child_type": eid.owner.actor_type,
            "child_actor_id": eid.owner.actor_id,
            "child_workflow": child.name,
            "policy": step.on_parent_interrupt,
            "command": START_CHILD,
            "payload": codec.encode(payload, ChildStartPayload),
            "caller": encode_caller(caller),
            "trace": telemetry.carrier(),
        },
    )
    driver.record(StepRow(need.key, 1, "child", None, None, row["started_ms"] or 0))
    return True


# ---- the hook's side ------------------------------------------------------------------------

# The child's row names its parent. A parent that already ended interrupted (its interrupt of
# this child, sent at its finish, reached this actor before this start and found nothing) is read
# here, after the start turn holds the child's lock: the child then gets that interrupt from its
# own outbox, delivered after this turn commits. A parent that ends after this read sends its
# interrupt after this turn took the lock, so that one waits for the lock and finds the child.
LINK: LiteralString = """
WITH link AS (
    UPDATE actor_workflow_executions
       SET parent_id = %(parent)s, parent_type = %(parent_type)s, parent_actor_id = %(parent_actor_id)s
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND parent_id IS NULL
    RETURNING principal, trace_context),
late AS (
    SELECT 1 FROM actor_workflow_executions p
     WHERE p.routing_key = %(parent_rk)s AND p.execution_id = %(parent)s
       AND p.status = 'finished' AND p.interrupt AND %(policy)s = 'interrupt'),
wake AS (SELECT pg_notify('akter_outbox', CAST(%(bucket)s AS text)) FROM late)
INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at,
                          timer_key, target_type, target_id, command, payload, caller, created_at,
                          trace_context)
SELECT %(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, akter_mint_intent_id(NULL), %(bucket)s,
       akter_now(), NULL, %(actor_type)s, %(actor_id)s, %(interrupt)s, %(reason)s, link.principal,
       akter_now(), link.trace_context
  FROM link, late, wake"""


def link_params(item: ChildLinkMark) -> dict[str, Any]:
    reason = Interrupt(str(item.execution_id), f"its parent {item.parent} was interrupted")
    return {
        "eid": str(item.execution_id),
        "parent": str(item.parent),
        "parent_rk": item.parent.owner.routing_key,
        "parent_type": item.parent.owner.actor_type,
        "parent_actor_id": item.parent.owner.actor_id,
        "policy": item.on_parent_interrupt,
        "interrupt": f"akter.wf.interrupt:{item.execution_id.workflow}",
        "reason": codec.encode(reason, Interrupt),
    }

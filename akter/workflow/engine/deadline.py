"""Execution deadlines: ``start(..., timeout=)`` and a workflow's declared ``timeout``.

Past its deadline an execution is interrupted — the path of ``run.interrupt()``
(``commands.py``, ``sql/functions/akter_wf_interrupt.sql``): its in-flight attempts settle, its
compensations run, and its result is
``Failure(Interrupted(by="system:deadline", reason="deadline of ... passed"))``.

The deadline is a keyed intent in the owner's outbox (timer key ``wfdl:<execution id>``), written
by the start turn in its transaction, due at the start's database clock plus the timeout. It is
durable as every intent is: it fires while the execution is suspended (nothing in memory waits
for it), and a relay that dies after claiming it leaves it to be claimed again. Its command is
the member's internal ``akter.wf.deadline:<workflow>``, so the actor's access policy (written for
its users) never refuses it; its caller is ``System(source="deadline")`` acting for nobody, which
is what ``interrupted_by`` records. A finish deletes it in the same transaction (a trigger,
``sql/functions/akter_wf_deadline_finished.sql``), so a finished execution leaves no intent behind; one
delivered after the finish anyway would be a no-op, as any interrupt of a finished execution is.

The deadline bounds the execution, not a run: a ``continue_as_new`` keeps it (Temporal's
execution timeout), while a new run started by a keyed start (``KeyReuse.NEW_RUN``) gets its own.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, LiteralString

from akter import codec
from akter.callers import System
from akter.outbox.intents import encode_caller
from akter.workflow.api.commands import command_name
from akter.workflow.api.payloads import Interrupt

if TYPE_CHECKING:
    from akter.workflow.api.declare import StartMark

#: the outbox timer key prefix of deadlines (``wf:`` is the execution's own timer)
KEY_PREFIX = "wfdl:"
CALLER = System(source="deadline")

# The start turn sets the deadline of the execution it just inserted (or started a new run of)
# and arms its intent; a repeated keyed start that attached writes neither.
ARM: Final[LiteralString] = """
WITH x AS (
    UPDATE actor_workflow_executions
       SET deadline_at = akter_now() + %(timeout_ms)s * interval '1 millisecond'
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND status <> 'finished'
    RETURNING routing_key, tenant, actor_type, actor_id, execution_id, deadline_at, trace_context)
INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at,
                          timer_key, target_type, target_id, command, payload, caller, created_at,
                          trace_context)
SELECT x.routing_key, x.tenant, x.actor_type, x.actor_id, akter_mint_intent_id(x.deadline_at),
       %(bucket)s, x.deadline_at, 'wfdl:' || x.execution_id, x.actor_type, x.actor_id, %(command)s,
       %(payload)s, %(caller)s, akter_now(), x.trace_context
  FROM x
ON CONFLICT (routing_key, tenant, actor_type, actor_id, timer_key) WHERE timer_key IS NOT NULL
DO UPDATE SET intent_id = excluded.intent_id, due_at = excluded.due_at, payload = excluded.payload,
              command = excluded.command, caller = excluded.caller, attempts = 0, last_error = NULL,
              claim = NULL, claimed_by = NULL, created_at = excluded.created_at,
              trace_context = excluded.trace_context"""


def reason(timeout_ms: int) -> str:
    return f"deadline of {timedelta(milliseconds=timeout_ms)} passed"


def arm_params(base: dict[str, Any], item: StartMark) -> dict[str, Any] | None:
    """The parameters of ``ARM`` for a start with a timeout (None: no deadline)."""
    if item.timeout_ms is None:
        return None
    eid = str(item.execution_id)
    payload = Interrupt(eid, reason(item.timeout_ms))
    return {
        **base,
        "eid": eid,
        "timeout_ms": item.timeout_ms,
        "command": command_name(item.workflow),
        "payload": codec.frame(codec.check(payload, Interrupt)),
        "caller": encode_caller(CALLER),
    }

"""The parked intents an execution is waiting on, beyond its resume timer (which ``why`` reads).

akter's own intents are delivered however long an outage lasts (``akter.outbox.delivery``:
an expired id is renewed), but the relay still parks one that failed ``max_attempts`` times.
Then the execution waits on it without saying so: its deadline (``wfdl:<execution id>``), a child
start or a child's interrupt it sent (rows of its owner's outbox addressed to one of its
children's actors). ``akter executions show`` prints one line per such row, with what an
operator runs to deliver it again. Read only; the owner's rows are addressed by its key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, LiteralString

import attrs
import psycopg
from psycopg.rows import dict_row

from akter.ids import ACTOR_KEY, ExecutionId

# The owner's parked rows that belong to this execution: its deadline, and the child starts and
# interrupts it sent to its children's actors (a child start carries no key, so the target
# actor is what ties it to the execution's child steps).
PARKED_OF_EXECUTION: LiteralString = f"""
SELECT o.intent_id, o.command, o.target_type, o.target_id, o.parked_at, o.parked_reason
  FROM actor_outbox o
 WHERE o.{ACTOR_KEY.replace(" AND ", " AND o.")} AND o.parked_at IS NOT NULL
   AND (o.timer_key = 'wfdl:' || %(eid)s
        OR ((o.command = 'akter.wf.start_child' OR o.command LIKE 'akter.wf.interrupt:%%')
            AND EXISTS (SELECT 1 FROM actor_workflow_step s
                         WHERE s.routing_key = o.routing_key AND s.execution_id = %(eid)s
                           AND s.kind = 'child' AND s.child_type = o.target_type
                           AND s.child_actor_id = o.target_id)))
 ORDER BY o.parked_at"""


@attrs.frozen
class ParkedOfExecution:
    """One parked intent an execution waits on."""

    intent_id: str
    command: str
    target: str
    parked_at: datetime
    parked_reason: str | None

    def as_json(self) -> dict[str, str | None]:
        """The row as ``executions show --json`` carries it (absolute UTC time)."""
        return {
            "intent_id": self.intent_id,
            "command": self.command,
            "target": self.target,
            "parked_at": self.parked_at.astimezone(UTC).isoformat(),
            "parked_reason": self.parked_reason,
            "retry": f"akter outbox retry {self.intent_id}",
        }

    def line(self) -> str:
        reason = " ".join((self.parked_reason or "").split())
        return (
            f"  parked     {self.command} to {self.target}: {reason}"
            f" (deliver it again: akter outbox retry {self.intent_id})"
        )


async def parked_of_execution(
    conn: psycopg.AsyncConnection[Any], eid: ExecutionId
) -> list[ParkedOfExecution]:
    """The parked intents of ``eid`` other than its resume timer, oldest parking first."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(PARKED_OF_EXECUTION, {**eid.owner.key_params(), "eid": str(eid)})
    return [
        ParkedOfExecution(
            intent_id=r["intent_id"],
            command=r["command"],
            target=f"{eid.owner.tenant}/{r['target_type']}/{r['target_id']}",
            parked_at=r["parked_at"],
            parked_reason=r["parked_reason"],
        )
        for r in await cur.fetchall()
    ]

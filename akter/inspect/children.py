"""A parent's children as ``akter inspect execution`` and the operate timeline show them.

One read per execution: how many children it started (its ``child`` step rows), how
many of them finished and how (from each child's own execution row, read by its routing key),
and the parent it is a child of, if any. Read in the same snapshot as the rest of the view.
"""

from __future__ import annotations

from typing import Any, LiteralString

import attrs
import psycopg
from psycopg.rows import dict_row


@attrs.frozen
class ChildProgress:
    """Aggregate progress of the children an execution started: ``started``; ``finished``, of
    which ``failed`` did not succeed (failed, defect, interrupted); ``running`` (started, not
    finished); ``recorded``: results the parent has already taken into its history."""

    started: int
    finished: int
    failed: int
    running: int
    recorded: int

    def text(self) -> str:
        failed = f" ({self.failed} failed)" if self.failed else ""
        return (
            f"{self.started} started, {self.finished} finished{failed}, {self.running} running, "
            f"{self.recorded} recorded by the parent"
        )


_PROGRESS: LiteralString = """
SELECT count(*) AS started,
       count(*) FILTER (WHERE c.status = 'finished') AS finished,
       count(*) FILTER (WHERE c.status = 'finished' AND c.outcome <> 'succeeded') AS failed,
       count(*) FILTER (WHERE s.exit IS NOT NULL) AS recorded,
       (SELECT parent_id FROM actor_workflow_executions
         WHERE routing_key = %(rk)s AND execution_id = %(eid)s) AS parent_id
  FROM actor_workflow_step s
  LEFT JOIN actor_workflow_executions c ON c.routing_key = s.child_rk AND c.execution_id = s.child_id
 WHERE s.routing_key = %(rk)s AND s.execution_id = %(eid)s AND s.kind = 'child'"""


async def read_children(
    conn: psycopg.AsyncConnection[Any], params: dict[str, Any]
) -> tuple[ChildProgress | None, str | None]:
    """The execution's child progress (``None`` when it started no child) and its parent's id."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(_PROGRESS, params)
    row = await cur.fetchone()
    if row is None:  # pragma: no cover -- an aggregate returns one row
        return None, None
    if not row["started"]:
        return None, row["parent_id"]
    progress = ChildProgress(
        started=row["started"],
        finished=row["finished"],
        failed=row["failed"],
        running=row["started"] - row["finished"],
        recorded=row["recorded"],
    )
    return progress, row["parent_id"]

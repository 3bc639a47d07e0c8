"""What a resume turn hands its pass, so the pass needs no read of its own.

A resume delivered by the relay to the process that owns the actor is a turn (invariant 4):
``queries.RESUME_HERE`` marks the execution running, re-arms its timer as a recovery timer and
takes the runner's generation, all under the owner's row lock (``akter_wf_resume``).
``RESUME_HERE_HEAD`` is that call, unchanged, plus the execution's row as ``queries.LOAD`` would
read it, when the
execution has no step yet — the first pass of an execution started by a process that runs no
workflows (a web request, a script), which is every remote start. The pass then runs from it
(``Pass(head=...)``, as after a start turn of this process) instead of loading what the turn
just read under the same lock.

Why the head is the one the pass would load: the turn reads it under the owner's row lock, and
every write to the execution's row and steps takes that lock too (invariant 1). A turn that
commits after this one and before the pass (an interrupt, a pause) arms the execution's timer
due now, so its change reaches the pass as a new resume (``WorkflowRunner.schedule`` wakes or
reruns the running pass), and every fenced write of the pass re-checks the interrupt flag: the
same reasoning as the start turn's head (``hook.py``). An execution with steps, or one the
resume may not set running (finished, resting), has no head here: its pass loads as before.

The statement reads the execution as it was before the resume's own ``UPDATE`` (the statement's
snapshot predates the function's writes); the resume changes only ``status`` (to ``running``) and
``updated_at``, so the head states ``running`` and takes every other column from that row.
"""

from __future__ import annotations

from typing import Any, Final, LiteralString

from akter.workflow.engine import queries

#: the columns of a head, in the order ``RESUME_HERE_HEAD`` returns them after the generation
HEAD_COLUMNS: Final = (
    "workflow",
    "key",
    "manifest_hash",
    "payload",
    "principal",
    "versions",
    "event_cursor",
    "status",
    "interrupt",
    "run_number",
    "pause",
    "failed_passes",
    "now_ms",
)

# ``queries.RESUME_HERE`` (the generation taken), then the head: the execution's row as this
# statement's snapshot holds it — as it stood before the resume marked it running, hence the
# status — when the resume set it running and it has no step yet.
RESUME_HERE_HEAD: LiteralString = (
    """
SELECT r.generation,
       h.workflow, h.key, h.manifest_hash, h.payload, h.principal, h.versions, h.event_cursor,
       h.status, h.interrupt, h.run_number, h.pause, h.failed_passes, h.now_ms
  FROM """
    + queries.RESUME_HERE_FROM
    + """
  LEFT JOIN LATERAL (
    SELECT e.workflow, e.key, e.manifest_hash, e.payload, e.principal, e.versions, e.event_cursor,
           'running' AS status, e.interrupt, e.run_number,
           e.paused_at IS NOT NULL AS pause, e.failed_passes,
           (extract(epoch FROM akter_now()) * 1000)::bigint AS now_ms
      FROM actor_workflow_executions e
     WHERE e.routing_key = %(rk)s AND e.execution_id = %(eid)s AND r.resumed
       AND NOT EXISTS (SELECT FROM actor_workflow_step s
                        WHERE s.routing_key = e.routing_key AND s.execution_id = e.execution_id)
  ) AS h ON true"""
)


def head_of(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    """The head ``RESUME_HERE_HEAD`` returned (a ``queries.LOAD`` row with no step), or None:
    the pass loads."""
    if row is None or len(row) < 1 + len(HEAD_COLUMNS) or row[1] is None:
        return None
    head = dict(zip(HEAD_COLUMNS, row[1:], strict=False))
    head["step"] = None
    return head

"""The SQL of workflow executions and steps.

Every engine write (a step written pending, a step settled, a suspension, a finish) is *fenced*:
it locks the owner's ``actor_generations`` row ``FOR UPDATE`` only where the generation still
equals the one this runner's activation took, and writes from that row. A stale runner's fence
selects nothing, so its write changes nothing and it abandons the pass (invariant 1).

The execution's keyed timer is an ``actor_outbox`` row with ``timer_key = 'wf:' || execution id``
whose command is the internal ``akter.wf.resume``: arming replaces it (``ON CONFLICT`` on the
timer-key index), finishing deletes it. The stored caller is the execution's ``principal``
column, already encoded as the outbox's System caller, so SQL can arm a timer without Python.
"""

from __future__ import annotations

from typing import LiteralString

from akter.ids import ACTOR_KEY

OWNER = ACTOR_KEY

# One occurrence of a step (its attempts, for an activity).
_OCCURRENCE = "s.step = %(step)s AND s.scope = %(scope)s AND s.occurrence = %(occurrence)s"

# The fence (``akter_wf_fence``) as a CTE for the statements that write in the same statement:
# one row while our generation holds (the owner row then locked), none otherwise.
FENCE: LiteralString = """fence AS (
    SELECT WHERE akter_wf_fence(%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s))"""

# The owner and the execution, as the transition functions take them.
_OWNER_ARGS: LiteralString = "%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s"
_START_ARGS: LiteralString = (
    _OWNER_ARGS + ", %(eid)s, %(workflow)s, %(key)s, %(manifest_hash)s, %(payload)s, %(principal)s,"
    " %(versions)s::jsonb, %(trace)s, %(bucket)s::smallint, %(due)s::timestamptz"
)

# A start (``akter_wf_start``): the execution inserted running with its cursor at the owner's
# event sequence before this turn's events, its timer armed at %(due)s. A repeated keyed start
# attaches: it writes nothing.
START: LiteralString = "SELECT started FROM akter_wf_start(" + _START_ARGS + ", false)"

# A start whose owner this process runs: its timer is armed as a recovery timer (%(due)s, no
# NOTIFY, no relay hop), the turn takes the runner's generation when it holds none
# (%(activate)s), and the runner runs the first pass once the turn commits. ``started`` is 0 for
# a repeated keyed start (it attaches: nothing to run).
START_HERE: LiteralString = (
    "SELECT generation, started, event_cursor FROM akter_wf_start(" + _START_ARGS + ", %(activate)s)"
)

# A resume turn (``akter_wf_resume``): the execution is running again, and its timer becomes a
# recovery timer at %(due)s. A paused execution, or one that needs attention, is left as it is
# (``holds.py``): the delivered timer changes nothing, and its pass finds nothing to run.
_RESUME_ARGS: LiteralString = _OWNER_ARGS + ", %(eid)s, %(bucket)s::smallint, %(due)s::timestamptz"
RESUME_TURN: LiteralString = "SELECT resumed FROM akter_wf_resume(" + _RESUME_ARGS + ", false)"

# The resume turn for the runner of this process that owns the actor, taking its generation in
# the turn when it holds none (%(activate)s). ``claim.RESUME_HERE_HEAD`` selects more from
# ``RESUME_HERE_FROM``, the function's row ``r`` (generation, resumed).
RESUME_HERE_FROM: LiteralString = "akter_wf_resume(" + _RESUME_ARGS + ", %(activate)s) AS r"
RESUME_HERE: LiteralString = "SELECT r.generation FROM " + RESUME_HERE_FROM

# A turn emitted events: executions of this owner with a pending wait on one of %(tags)s get
# their timer due at %(due)s (inserted if the wait had none), so no event is missed (invariant
# 6). One row per execution woken.
_WAKE_ARGS: LiteralString = _OWNER_ARGS + ", %(tags)s::text[], %(bucket)s::smallint, %(due)s::timestamptz"
WAKE_WAITS: LiteralString = "SELECT * FROM akter_wf_wake_waits(" + _WAKE_ARGS + ")"

# The same, where the runner of this process owns the actor: the turn is the resume turn of every
# execution it wakes (as ``RESUME_HERE``), so the pass runs here once it commits
# (``akter_wf_wake_here``). One row: the generation taken (NULL: the runner holds one), the ids
# woken and their trace contexts, and how many timers it armed.
WAKE_HERE: LiteralString = (
    "SELECT generation, woken, traces, armed FROM akter_wf_wake_here(" + _WAKE_ARGS + ", %(activate)s)"
)

# An interrupt turn (``commands.py``), under the owner's row lock the turn holds: flag the
# execution, keep who asked first, and make its timer due at %(due)s (``akter_wf_interrupt``).
# ``status`` is NULL when no such execution exists; a finished one is left as it is (``armed`` 0).
INTERRUPT: LiteralString = (
    "SELECT status, armed FROM akter_wf_interrupt(%(rk)s, %(eid)s, %(by)s, %(reason)s,"
    " %(bucket)s::smallint, %(due)s::timestamptz)"
)

# An operator's retry (``commands.py``), under the owner's row lock the turn holds: what there
# is to retry, and whether the execution that would retry it exists already.
RETRY_READ: LiteralString = """
SELECT x.status, x.outcome, x.blocked_reason, x.payload, x.principal,
       (SELECT r.retry_of FROM actor_workflow_executions r
         WHERE r.routing_key = %(rk)s AND r.execution_id = %(new_eid)s) AS taken_by
  FROM actor_workflow_executions x
 WHERE x.routing_key = %(rk)s AND x.execution_id = %(eid)s"""

# The execution a retry started (with ``START``, in the same turn) links to the one it retries.
RETRY_LINK: LiteralString = """
UPDATE actor_workflow_executions SET retry_of = %(retry_of)s, retried_by = %(by)s
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""

# A blocked execution offered again: its timer due now (which un-parks a parked one: the trigger
# actor_outbox_unpark).
OFFER_NOW: LiteralString = "SELECT akter_wf_arm(%(rk)s, %(eid)s, %(bucket)s::smallint, NULL)"

# A pass reads the execution and all its steps in one query.
LOAD: LiteralString = """
SELECT e.workflow, e.key, e.manifest_hash, e.payload, e.principal, e.versions, e.event_cursor,
       e.status, e.interrupt, e.run_number, e.paused_at IS NOT NULL AS pause,
       e.failed_passes,
       (extract(epoch FROM akter_now()) * 1000)::bigint AS now_ms,
       s.step, s.scope, s.occurrence, s.attempt, s.kind, s.exit,
       (extract(epoch FROM s.due_at) * 1000)::bigint AS due_ms,
       (extract(epoch FROM s.started_at) * 1000)::bigint AS started_ms, s.wait_cursor, s.scanned
  FROM actor_workflow_executions e
  LEFT JOIN actor_workflow_step s ON s.routing_key = e.routing_key AND s.execution_id = e.execution_id
 WHERE e.routing_key = %(rk)s AND e.execution_id = %(eid)s
 ORDER BY s.step, s.scope, s.occurrence, s.attempt"""

ACTIVATE: LiteralString = (
    "UPDATE actor_generations SET generation = generation + 1 WHERE " + OWNER + " RETURNING generation"
)

# The owner, the generation and the execution: the fence of the lock-first functions.
_FENCED_ARGS = "%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s, %(eid)s"
# Activity attempts the pass ran and has not written yet, settled first by the statements that
# take them (akter_wf_settle_many): parallel arrays of step, scope, occurrence, attempt and exit.
_SETTLES = (
    "%(steps)s::text[], %(scopes)s::text[], %(occurrences)s::int[], %(attempts)s::int[], %(exits)s::bytea[]"
)

# Settle what the pass ran, before it waits for anything but its own writes
# (akter_wf_settle_steps).
SETTLE_STEPS: LiteralString = (
    "SELECT fenced, settled FROM akter_wf_settle_steps(" + _FENCED_ARGS + ", " + _SETTLES + ")"
)

# A step recorded settled at once (a race's winner, a version marker) or pending with a due
# time recorded once (a clock, a wait's deadline), after settling what the pass ran, returning
# the step's row; DO NOTHING keeps the first record, and a clock already due is settled in the
# same statement (akter_wf_record).
RECORD_STEP: LiteralString = (
    "SELECT * FROM akter_wf_record("
    + _FENCED_ARGS
    + ", "
    + _SETTLES
    + ", %(kind)s, %(step)s, %(scope)s, %(occurrence)s, %(exit)s, %(after_ms)s, %(wait_tag)s,"
    " %(cursor)s, %(clock_exit)s)"
)

STEP_ROW: LiteralString = (
    """
SELECT s.step, s.scope, s.occurrence, s.attempt, s.kind, s.exit,
       (extract(epoch FROM s.due_at) * 1000)::bigint AS due_ms,
       (extract(epoch FROM s.started_at) * 1000)::bigint AS started_ms, s.wait_cursor, s.scanned
  FROM actor_workflow_step s
 WHERE s.routing_key = %(rk)s AND s.execution_id = %(eid)s AND """
    + _OCCURRENCE
    + """
 ORDER BY s.attempt"""
)

# A clock settles only once the database clock has passed its recorded due time; one due within
# %(hold_ms)s is waited for on the server first (akter_wf_settle_clock), so the pass may ask a little early.
SETTLE_CLOCK: LiteralString = """SELECT fenced, settled, due_ms, now_ms FROM akter_wf_settle_clock(
    %(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s, %(eid)s,
    %(step)s, %(scope)s, %(occurrence)s, %(exit)s, %(hold_ms)s)"""

# The events a pending wait has not scanned yet (of its tag, after its scanned mark), with the
# database clock; the predicate runs in Python, outside any lock.
SCAN: LiteralString = (
    """
SELECT sequence, value, (extract(epoch FROM created_at) * 1000)::bigint AS created_ms,
       (extract(epoch FROM akter_now()) * 1000)::bigint AS now_ms
  FROM actor_events
 WHERE """
    + ACTOR_KEY
    + """ AND tag = %(tag)s AND sequence > %(after)s
 ORDER BY sequence
 LIMIT %(limit)s"""
)

# A wait settles with a match (advancing the execution's cursor) or with its timeout — the
# latter only if no event of its tag stamped by the deadline lies beyond the scanned mark,
# decided after the fence's row lock is held, so no emitting turn can commit in between
# (a lock-first function: akter_wf_settle_wait).
SETTLE_WAIT: LiteralString = """
SELECT fenced, settled
  FROM akter_wf_settle_wait(%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s, %(eid)s,
                            %(step)s, %(scope)s, %(occurrence)s, %(tag)s, %(exit)s, %(scanned)s,
                            %(timeout)s)"""

MARK_SCANNED: LiteralString = (
    "WITH "
    + FENCE
    + """
UPDATE actor_workflow_step s SET scanned = greatest(s.scanned, %(scanned)s)
  FROM fence
 WHERE s.routing_key = %(rk)s AND s.execution_id = %(eid)s AND """
    + _OCCURRENCE
    + """ AND s.attempt = 1
RETURNING 1 AS fenced"""
)

# Suspension (a lock-first function: akter_wf_suspend_settled, after the settles): abandoned
# branches' pending waits and clocks are settled; refused (nothing else written) when an
# interrupt the pass does not know of is pending or a live wait has an event it has not scanned
# — the pass goes on instead. Otherwise the execution is suspended and its timer armed at
# %(due)s, or deleted when nothing is due.
SUSPEND: LiteralString = (
    "SELECT fenced, interrupt, unscanned FROM akter_wf_suspend_settled("
    + _FENCED_ARGS
    + ", %(bucket)s::smallint, "
    + _SETTLES
    + ", %(due)s, %(abandon)s::text[], %(knows_interrupt)s, %(abandoned)s, %(notify_within)s)"
)

# A runner that cannot replay the execution leaves it blocked (``akter_wf_leave_blocked``).
LEAVE_BLOCKED: LiteralString = (
    "SELECT fenced FROM akter_wf_leave_blocked("
    + _FENCED_ARGS
    + ", %(bucket)s::smallint, %(due)s::timestamptz, %(reason)s)"
)

# Finishing (a lock-first function: akter_wf_finish_settled, after the settles): the first terminal
# write wins; steps still pending are settled with %(pending_exit)s; the timer is deleted;
# waiting clients are notified.
FINISH: LiteralString = (
    "SELECT fenced, finished FROM akter_wf_finish_settled("
    + _FENCED_ARGS
    + ", "
    + _SETTLES
    + ", %(outcome)s, %(result)s, %(interrupt_exit)s, %(drop_steps)s)"
)

# An execution whose resume timer the relay parked (actor_outbox.parked_at) is blocked too, for that reason.
POLL: LiteralString = """
SELECT e.status, e.outcome, e.result, e.interrupt, e.paused_at IS NOT NULL AS pause,
       nullif(concat_ws('; ', e.blocked_reason,
                        (SELECT 'its resume timer is parked: ' || o.parked_reason
                           FROM actor_outbox o
                          WHERE o.routing_key = e.routing_key AND o.tenant = e.tenant
                            AND o.actor_type = e.actor_type AND o.actor_id = e.actor_id
                            AND o.timer_key = 'wf:' || e.execution_id AND o.parked_at IS NOT NULL)),
              '') AS blocked_reason
  FROM actor_workflow_executions e
 WHERE e.routing_key = %(rk)s AND e.execution_id = %(eid)s"""

# Retention: finished executions older than the retention, with their steps, in bounded batches.
# Retention of finished executions, for the owned buckets only (through the bucket-led partial
# index actor_workflow_executions_bucket_finished), SKIP LOCKED so two runners never wait for each other.
PRUNE: LiteralString = """
WITH old AS (
    SELECT routing_key, execution_id FROM actor_workflow_executions
     WHERE (routing_key >> 56) = ANY(%(buckets)s::bigint[]) AND status = 'finished'
       AND finished_at < akter_now() - %(retention_ms)s * interval '1 millisecond'
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED),
steps AS (
    DELETE FROM actor_workflow_step s USING old
     WHERE s.routing_key = old.routing_key AND s.execution_id = old.execution_id)
DELETE FROM actor_workflow_executions x USING old
 WHERE x.routing_key = old.routing_key AND x.execution_id = old.execution_id
RETURNING 1"""

ACCEPT_MANIFEST: LiteralString = """
INSERT INTO actor_workflow_manifests (actor_type, workflow, manifest_hash, manifest)
VALUES (%(actor_type)s, %(workflow)s, %(manifest_hash)s, %(manifest)s::jsonb)
ON CONFLICT DO NOTHING"""

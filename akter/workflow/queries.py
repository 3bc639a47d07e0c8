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

from typing import Final, LiteralString

from akter.ids import ACTOR_KEY

RESUME: Final = "akter.wf.resume"

OWNER = ACTOR_KEY

# One occurrence of a step (its attempts, for an activity).
_OCCURRENCE = "s.step = %(step)s AND s.scope = %(scope)s AND s.occurrence = %(occurrence)s"

# The fence: the owner row, locked, only while our generation holds.
FENCE = f"""fence AS (
    SELECT generation FROM actor_generations
     WHERE {OWNER} AND generation = %(generation)s
       FOR UPDATE)"""

# A resume payload is framed raw JSON ({"execution_id": ...}); codec.unframe reads it.
_RESUME_PAYLOAD = "'\\x00'::bytea || convert_to(json_build_object('execution_id', {eid})::text, 'UTF8')"

# Arm (insert or replace) the execution's timer at %(due)s (NULL = now). Appended to statements
# that select the execution row as "x". The id is minted by akter_mint_intent_id (sql/005), the
# one definition of a timer's id on the database clock.
_ARM_FROM = """
INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at,
                          timer_key, target_type, target_id, command, payload, caller, created_at,
                          trace_context)
SELECT x.routing_key, x.tenant, x.actor_type, x.actor_id, akter_mint_intent_id(%(due)s::timestamptz),
       %(bucket)s, coalesce(%(due)s::timestamptz, akter_now()), 'wf:' || x.execution_id,
       x.actor_type, x.actor_id, '{resume}', {payload}, x.principal, akter_now(), x.trace_context
  FROM {source} x
ON CONFLICT (routing_key, tenant, actor_type, actor_id, timer_key) WHERE timer_key IS NOT NULL
DO UPDATE SET intent_id = excluded.intent_id, due_at = excluded.due_at, payload = excluded.payload,
              caller = excluded.caller, attempts = 0, last_error = NULL, claim = NULL,
              claimed_by = NULL, created_at = excluded.created_at, trace_context = excluded.trace_context"""


def _arm_from(source: str) -> str:
    return _ARM_FROM.format(
        source=source, resume=RESUME, payload=_RESUME_PAYLOAD.format(eid="x.execution_id")
    )


# A start: insert the execution (a repeated keyed start attaches: DO NOTHING) with its cursor at
# the owner's event sequence as it stands before this turn's own events are written (the turn
# hooks run before the kernel's write), and arm its timer due now.
_START_CTES: LiteralString = (
    """
g AS (SELECT event_seq FROM actor_generations WHERE """
    + OWNER
    + """),
ins AS (
    INSERT INTO actor_workflow_executions
        (routing_key, execution_id, tenant, actor_type, actor_id, workflow, key, manifest_hash,
         payload, principal, versions, event_cursor, status, started_at, updated_at, trace_context)
    SELECT %(rk)s, %(eid)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(workflow)s, %(key)s,
           %(manifest_hash)s, %(payload)s, %(principal)s, %(versions)s::jsonb, g.event_seq,
           'running', akter_now(), akter_now(), %(trace)s
      FROM g
    ON CONFLICT (routing_key, execution_id) DO NOTHING
    RETURNING routing_key, execution_id, tenant, actor_type, actor_id, principal, trace_context)"""
)
START: LiteralString = "WITH" + _START_CTES + _arm_from("ins")

# The activation a turn takes for the runner of this process that owns the actor and holds no
# generation of it yet: the turn holds the owner's row lock already, so the new generation
# commits with the turn instead of in a commit of its own before the pass (%(activate)s false:
# the runner holds one, which the pass reuses).
_ACTIVATE_IN_TURN: LiteralString = (
    """
gen AS (
    UPDATE actor_generations SET generation = generation + 1
     WHERE """
    + OWNER
    + """ AND %(activate)s
    RETURNING generation)"""
)

# A start whose owner this process runs: its timer is armed as a recovery timer (%(due)s, no
# NOTIFY, no relay hop) and the runner runs the first pass once the turn commits. ``started``
# is 0 for a repeated keyed start (it attaches: nothing to run).
START_HERE: LiteralString = (
    "WITH"
    + _ACTIVATE_IN_TURN
    + ","
    + _START_CTES
    + ",\narm AS ("
    + _arm_from("ins")
    + """ RETURNING 1)
SELECT (SELECT generation FROM gen) AS generation, (SELECT count(*) FROM arm) AS started,
       (SELECT event_seq FROM g) AS event_cursor"""
)

# A resume turn: the execution is running again, and its timer becomes a recovery timer a fixed
# interval ahead, so that if this process dies before the pass suspends or finishes, the relay
# delivers another resume. A paused execution, or one that needs attention, is left as it is
# (``holds.py``): the delivered timer changes nothing, and its pass finds nothing to run.
# What a resume may set running: an open execution, except one that rests until a person acts
# (paused, needs attention: holds.py), unless it is being interrupted.
_RESUMABLE: LiteralString = (
    "status <> 'finished' AND status <> 'needs_attention' AND (status <> 'paused' OR interrupt)"
)
_RESUME_CTE: LiteralString = (
    """
x AS (
    UPDATE actor_workflow_executions SET status = 'running', updated_at = akter_now()
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND """
    + _RESUMABLE
    + """
    RETURNING routing_key, execution_id, tenant, actor_type, actor_id, principal, trace_context)"""
)
RESUME_TURN: LiteralString = "WITH" + _RESUME_CTE + _arm_from("x")

# The resume turn for the runner of this process that owns the actor, taking its generation in
# the turn when it holds none (``_ACTIVATE_IN_TURN``).
RESUME_HERE: LiteralString = (
    "WITH"
    + _ACTIVATE_IN_TURN
    + ","
    + _RESUME_CTE
    + ",\narm AS ("
    + _arm_from("x")
    + """ RETURNING 1)
SELECT (SELECT generation FROM gen) AS generation"""
)

# A turn emitted events: executions of this owner with a pending wait on one of their tags get
# their timer due now (inserted if the wait had none), so no event is missed (invariant 6).
# The open executions of this owner with a pending wait on one of %(tags)s (after the columns).
_WAITING_ON_TAGS: LiteralString = """
      FROM actor_workflow_step s
      JOIN actor_workflow_executions e
        ON e.routing_key = s.routing_key AND e.execution_id = s.execution_id
     WHERE s.routing_key = %(rk)s AND s.kind = 'wait' AND s.exit IS NULL
       AND s.wait_tag = ANY(%(tags)s::text[])
       AND e.tenant = %(tenant)s AND e.actor_type = %(actor_type)s AND e.actor_id = %(actor_id)s
       AND e.status <> 'finished')"""

WAKE_WAITS: LiteralString = (
    """
WITH x AS (
    SELECT DISTINCT e.routing_key, e.execution_id, e.tenant, e.actor_type, e.actor_id, e.principal,
                    e.trace_context"""
    + _WAITING_ON_TAGS
    + "\n"
    + _arm_from("x")
    + " RETURNING 1"
)

# The same, where the runner of this process owns the actor: the turn is the resume turn of every
# execution it wakes (as ``RESUME_HERE``), so the pass runs here once it commits, with no
# ``NOTIFY``, claim or resume turn between; each one's timer becomes a recovery timer. One that
# rests until a person acts (paused, needs attention) is left as it is, as a resume leaves it: its
# resume (or resolution) arms its timer, and the pass then finds the event. One row: the
# generation taken (NULL: the runner holds one), the ids woken and their trace contexts.
WAKE_HERE: LiteralString = (
    """WITH
w AS (
    SELECT DISTINCT e.routing_key, e.execution_id"""
    + _WAITING_ON_TAGS
    + """,
gen AS (
    UPDATE actor_generations SET generation = generation + 1
     WHERE """
    + OWNER
    + """ AND %(activate)s AND EXISTS (SELECT FROM w)
    RETURNING generation),
x AS (
    UPDATE actor_workflow_executions e SET status = 'running', updated_at = akter_now()
      FROM w
     WHERE e.routing_key = w.routing_key AND e.execution_id = w.execution_id AND """
    + _RESUMABLE
    + """
    RETURNING e.routing_key, e.execution_id, e.tenant, e.actor_type, e.actor_id, e.principal,
              e.trace_context),
arm AS ("""
    + _arm_from("x")
    + """ RETURNING 1)
SELECT (SELECT generation FROM gen) AS generation,
       (SELECT array_agg(execution_id ORDER BY execution_id) FROM x) AS woken,
       (SELECT array_agg(trace_context ORDER BY execution_id) FROM x) AS traces,
       (SELECT count(*) FROM arm) AS armed"""
)

# An interrupt turn (``commands.py``), under the owner's row lock the turn holds: flag the
# execution, keep who asked first, and make its timer due now. ``status`` is NULL when no such
# execution exists; a finished one is left as it is (``armed`` = 0).
INTERRUPT: LiteralString = (
    """
WITH e AS (
    SELECT status FROM actor_workflow_executions WHERE routing_key = %(rk)s AND execution_id = %(eid)s),
x AS (
    UPDATE actor_workflow_executions
       SET interrupt = true, interrupted_by = coalesce(interrupted_by, %(by)s),
           interrupt_reason = CASE WHEN interrupted_by IS NULL THEN %(reason)s ELSE interrupt_reason END,
           updated_at = akter_now()
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND status <> 'finished'
    RETURNING routing_key, execution_id, tenant, actor_type, actor_id, principal, trace_context),
arm AS ("""
    + _arm_from("x")
    + """ RETURNING 1)
SELECT (SELECT status FROM e) AS status, (SELECT count(*) FROM arm) AS armed"""
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

# A blocked execution offered again: its timer due now (which un-parks a parked one, sql/007).
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
# take them (sql/010): parallel arrays of step, scope, occurrence, attempt and exit.
_SETTLES = (
    "%(steps)s::text[], %(scopes)s::text[], %(occurrences)s::int[], %(attempts)s::int[], %(exits)s::bytea[]"
)

# Settle what the pass ran, before it waits for anything but its own writes (sql/010).
SETTLE_STEPS: LiteralString = (
    "SELECT fenced, settled FROM akter_wf_settle_steps(" + _FENCED_ARGS + ", " + _SETTLES + ")"
)

# A step recorded settled at once (a race's winner, a version marker) or pending with a due
# time recorded once (a clock, a wait's deadline), after settling what the pass ran, returning
# the step's row; DO NOTHING keeps the first record, and a clock already due is settled in the
# same statement (sql/010).
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
# %(hold_ms)s is waited for on the server first (sql/019), so the pass may ask a little early.
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
# (a lock-first function: sql/005).
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

# Suspension (a lock-first function: sql/005, after the settles of sql/010): abandoned
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

LEAVE_BLOCKED: LiteralString = (
    "WITH "
    + FENCE
    + """,
x AS (
    UPDATE actor_workflow_executions e SET status = 'suspended', blocked_reason = %(reason)s,
           updated_at = akter_now()
      FROM fence
     WHERE e.routing_key = %(rk)s AND e.execution_id = %(eid)s AND e.status <> 'finished'
    RETURNING e.routing_key, e.execution_id, e.tenant, e.actor_type, e.actor_id, e.principal,
              e.trace_context),
arm AS ("""
    + _arm_from("x")
    # fenced like every engine write: a pass fenced out must learn it (and run on under the
    # newer generation its runner may hold), never leave the execution as it found it
    + """ RETURNING 1)
SELECT (SELECT count(*) FROM fence) AS fenced"""
)

# Finishing (a lock-first function: sql/005, after the settles of sql/010): the first terminal
# write wins; steps still pending are settled with %(pending_exit)s; the timer is deleted;
# waiting clients are notified.
FINISH: LiteralString = (
    "SELECT fenced, finished FROM akter_wf_finish_settled("
    + _FENCED_ARGS
    + ", "
    + _SETTLES
    + ", %(outcome)s, %(result)s, %(interrupt_exit)s, %(drop_steps)s)"
)

# An execution whose resume timer the relay parked (sql/007) is blocked too, for that reason.
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
# index of sql/009), SKIP LOCKED so two runners never wait for each other.
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

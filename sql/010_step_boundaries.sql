-- One statement per step boundary.
--
-- A pass that ran an activity attempt no longer settles it in a commit of its own: it records
-- the exit in its driver, advances the body, and sends the settle with whatever the body needs
-- next, under one fence — the next attempt written pending (akter_wf_begin), the suspension
-- (akter_wf_suspend_settled) or the finish (akter_wf_finish_settled). The next attempt's body
-- starts only once that statement committed, so nothing outside the pass ever acts on an
-- unsettled step (invariant 5); a pass that is about to wait for anything else writes its
-- settles first (akter_wf_settle_steps).
--
-- Durable times are taken from the database clock here (akter_now()), not from the process's
-- clock plus an estimate of its skew: the recovery timer is p_recovery after akter_now().

-- Settle the listed activity attempts (parallel arrays) under a fence the caller holds. Returns
-- how many it settled; fewer than listed means another writer settled one first, which the
-- fence rules out, so the pass treats it as losing the fence.
CREATE FUNCTION akter_wf_settle_many(
    p_rk bigint, p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[]
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
BEGIN
    IF coalesce(cardinality(p_steps), 0) = 0 THEN
        RETURN 0;
    END IF;
    UPDATE actor_workflow_step s SET exit = u.exit, settled_at = akter_now()
      FROM unnest(p_steps, p_scopes, p_occurrences, p_attempts, p_exits)
           AS u(step, scope, occurrence, attempt, exit)
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = u.step
       AND s.scope = u.scope AND s.occurrence = u.occurrence AND s.attempt = u.attempt
       AND s.exit IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Fence, then settle: the write a pass sends before it waits for anything but its own writes.
CREATE FUNCTION akter_wf_settle_steps(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[], p_attempts integer[],
    p_exits bytea[],
    OUT fenced boolean, OUT settled integer
)
LANGUAGE plpgsql AS $$
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    settled := 0;
    IF fenced THEN
        settled := akter_wf_settle_many(p_rk, p_eid, p_steps, p_scopes, p_occurrences, p_attempts, p_exits);
    END IF;
END
$$;

-- Settle what the pass ran (the arrays), then write an activity attempt pending before its work
-- starts; a rerun finds its own row and reuses it, and an attempt another runner settled returns
-- its exit. The execution's timer is never moved later: one due earlier is a pending wake-up or
-- already a recovery timer, and leaving it costs no write (most steps find one well ahead);
-- only a missing one, or one due later than p_recovery from now, is armed at p_recovery.
CREATE FUNCTION akter_wf_begin(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_step text, p_scope text, p_occurrence integer,
    p_attempt integer, p_recovery interval,
    OUT fenced boolean, OUT settled integer, OUT started_ms bigint, OUT exit bytea
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    timer_due timestamptz;
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    IF NOT fenced THEN
        RETURN;
    END IF;
    INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence, attempt,
                                          kind, started_at)
    VALUES (p_rk, p_eid, p_step, p_scope, p_occurrence, p_attempt, 'activity', akter_now())
    ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt)
    DO UPDATE SET kind = excluded.kind
    RETURNING (extract(epoch FROM s.started_at) * 1000)::bigint, s.exit INTO started_ms, exit;
    SELECT o.due_at INTO timer_due FROM actor_outbox o
     WHERE o.routing_key = p_rk AND o.tenant = p_tenant AND o.actor_type = p_actor_type
       AND o.actor_id = p_actor_id AND o.timer_key = 'wf:' || p_eid;
    IF timer_due IS NULL OR timer_due > akter_now() + p_recovery THEN
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, akter_now() + p_recovery);
    END IF;
END
$$;

-- akter_wf_suspend (sql/005) after settling what the pass ran (a stale fence does neither).
CREATE FUNCTION akter_wf_suspend_settled(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_due timestamptz, p_abandon text[],
    p_knows_interrupt boolean, p_abandoned bytea, p_notify_within interval,
    OUT fenced boolean, OUT settled integer, OUT interrupt boolean, OUT unscanned boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    SELECT s.fenced, s.interrupt, s.unscanned INTO fenced, interrupt, unscanned
      FROM akter_wf_suspend(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid, p_bucket,
                            p_due, p_abandon, p_knows_interrupt, p_abandoned, p_notify_within) s;
END
$$;

-- akter_wf_finish (sql/005) after settling what the pass ran (before the finish settles what is
-- still pending as interrupted).
CREATE FUNCTION akter_wf_finish_settled(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[], p_attempts integer[],
    p_exits bytea[], p_outcome text, p_result bytea, p_pending_exit bytea, p_drop_steps boolean,
    OUT fenced boolean, OUT settled integer, OUT finished boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    SELECT f.fenced, f.finished INTO fenced, finished
      FROM akter_wf_finish(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid, p_outcome,
                           p_result, p_pending_exit, p_drop_steps) f;
END
$$;

-- Settle what the pass ran, then record a step settled at once (a race's winner) or pending with
-- a due time recorded once (a clock, a wait's deadline: p_after_ms after the database clock);
-- DO NOTHING keeps the first record. A clock already due (a zero sleep) is settled with
-- p_clock_exit in the same statement. Returns the step's row as it stands, so the pass reads
-- nothing back.
CREATE FUNCTION akter_wf_record(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[], p_attempts integer[],
    p_exits bytea[], p_kind text, p_step text, p_scope text, p_occurrence integer, p_exit bytea,
    p_after_ms double precision, p_wait_tag text, p_cursor bigint, p_clock_exit bytea,
    OUT fenced boolean, OUT settled integer, OUT step text, OUT scope text, OUT occurrence integer,
    OUT attempt integer, OUT kind text, OUT exit bytea, OUT due_ms bigint, OUT started_ms bigint,
    OUT wait_cursor bigint, OUT scanned bigint
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    IF NOT fenced THEN
        RETURN;
    END IF;
    INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence, attempt,
                                          kind, exit, due_at, wait_tag, wait_cursor, scanned,
                                          started_at, settled_at)
    VALUES (p_rk, p_eid, p_step, p_scope, p_occurrence, 1, p_kind, p_exit,
            akter_now() + p_after_ms * interval '1 millisecond', p_wait_tag, p_cursor, p_cursor,
            akter_now(), CASE WHEN p_exit IS NULL THEN NULL ELSE akter_now() END)
    ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt) DO NOTHING;
    IF p_kind = 'clock' THEN
        UPDATE actor_workflow_step s SET exit = p_clock_exit, settled_at = akter_now()
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
           AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1
           AND s.exit IS NULL AND s.due_at <= akter_now();
    END IF;
    SELECT s.step, s.scope, s.occurrence, s.attempt, s.kind, s.exit,
           (extract(epoch FROM s.due_at) * 1000)::bigint,
           (extract(epoch FROM s.started_at) * 1000)::bigint, s.wait_cursor, s.scanned
      INTO step, scope, occurrence, attempt, kind, exit, due_ms, started_ms, wait_cursor, scanned
      FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1;
END
$$;

-- The step boundary of a lone pass, its usual shape: the attempt it just ran settled (at most
-- one, as scalars; p_settle_step NULL: none), then the next attempt written pending before its
-- work starts. A rerun finds its own row and reuses it, and an attempt another runner settled
-- returns its exit. The execution's timer is never moved later: one due earlier is a pending
-- wake-up or already a recovery timer, and leaving it costs no write (most steps find one well
-- ahead); only a missing one, or one due later than p_recovery from now, is armed at p_recovery.
-- Several passes' boundaries go together to akter_wf_begin_many, which writes the same.
CREATE OR REPLACE FUNCTION akter_wf_begin_one(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_settle_step text, p_settle_scope text,
    p_settle_occurrence integer, p_settle_attempt integer, p_settle_exit bytea, p_step text,
    p_scope text, p_occurrence integer, p_attempt integer, p_recovery interval,
    OUT fenced boolean, OUT settled integer, OUT started_ms bigint, OUT exit bytea
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    timer_due timestamptz;
    v_now timestamptz := akter_now();
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    settled := 0;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF p_settle_step IS NOT NULL THEN
        UPDATE actor_workflow_step s SET exit = p_settle_exit, settled_at = v_now
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_settle_step
           AND s.scope = p_settle_scope AND s.occurrence = p_settle_occurrence
           AND s.attempt = p_settle_attempt AND s.exit IS NULL;
        GET DIAGNOSTICS settled = ROW_COUNT;
    END IF;
    INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence, attempt,
                                          kind, started_at)
    VALUES (p_rk, p_eid, p_step, p_scope, p_occurrence, p_attempt, 'activity', v_now)
    ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt)
    DO UPDATE SET kind = excluded.kind
    RETURNING (extract(epoch FROM s.started_at) * 1000)::bigint, s.exit INTO started_ms, exit;
    SELECT o.due_at INTO timer_due FROM actor_outbox o
     WHERE o.routing_key = p_rk AND o.tenant = p_tenant AND o.actor_type = p_actor_type
       AND o.actor_id = p_actor_id AND o.timer_key = 'wf:' || p_eid;
    IF timer_due IS NULL OR timer_due > v_now + p_recovery THEN
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, v_now + p_recovery);
    END IF;
END
$$;

-- A pass holds: it knows of a pause (p_status 'paused') or holds an attempt whose outcome is
-- unknown (p_status 'needs_attention', with the attempt and the reason). Like akter_wf_suspend:
-- the fence in its own statement, the settles of what the pass ran, abandoned branches' waits
-- and clocks settled, then the decision in later statements. Refused (held false, nothing else
-- written) when an interrupt the pass does not know of is pending, or — for a pause — the
-- execution was resumed meanwhile. Unscanned events do not refuse it: they are read when the
-- execution goes on. The timer is armed at p_due (the earliest time the pass knows of) or
-- deleted, as a suspension would.
CREATE OR REPLACE FUNCTION akter_wf_hold(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_due timestamptz, p_abandon text[],
    p_knows_interrupt boolean, p_abandoned bytea, p_status text, p_reason text,
    p_step text, p_scope text, p_occurrence integer, p_attempt integer,
    OUT fenced boolean, OUT settled integer, OUT interrupt boolean, OUT held boolean
)
LANGUAGE plpgsql AS $$
DECLARE
    pause_asked boolean;
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    interrupt := false;
    held := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF cardinality(p_abandon) > 0 THEN
        UPDATE actor_workflow_step s SET exit = p_abandoned, settled_at = akter_now()
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.exit IS NULL
           AND s.kind IN ('wait', 'clock')
           AND EXISTS (SELECT 1 FROM unnest(p_abandon) a(prefix) WHERE starts_with(s.scope, a.prefix));
    END IF;
    SELECT e.interrupt AND NOT p_knows_interrupt, e.paused_at IS NOT NULL INTO interrupt, pause_asked
      FROM actor_workflow_executions e
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid;
    IF interrupt OR (p_status = 'paused' AND NOT pause_asked) THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET status = p_status, updated_at = akter_now(), blocked_reason = NULL,
           failed_passes = 0, pass_errors = NULL,
           attention_reason = CASE WHEN p_status = 'needs_attention' THEN p_reason END,
           attention_at = CASE WHEN p_status = 'needs_attention' THEN akter_now() END,
           attention_step = p_step, attention_scope = p_scope,
           attention_occurrence = p_occurrence, attention_attempt = p_attempt
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid AND e.status <> 'finished';
    held := FOUND;
    IF p_due IS NULL THEN
        DELETE FROM actor_outbox o
         WHERE o.routing_key = p_rk AND o.tenant = p_tenant AND o.actor_type = p_actor_type
           AND o.actor_id = p_actor_id AND o.timer_key = 'wf:' || p_eid;
    ELSE
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, p_due);
    END IF;
END
$$;

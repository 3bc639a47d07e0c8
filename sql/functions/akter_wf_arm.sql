-- Arm (insert or replace) an execution's keyed timer ('wf:<execution id>') at p_due (NULL: now),
-- as its resume. The timer carries the execution's principal and trace context: a resume after
-- a suspension joins the trace that started the execution.
CREATE OR REPLACE FUNCTION akter_wf_arm(p_rk bigint, p_eid text, p_bucket smallint, p_due timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at,
                              timer_key, target_type, target_id, command, payload, caller, created_at,
                              trace_context)
    SELECT x.routing_key, x.tenant, x.actor_type, x.actor_id, akter_mint_intent_id(p_due), p_bucket,
           coalesce(p_due, akter_now()), 'wf:' || x.execution_id, x.actor_type, x.actor_id,
           'akter.wf.resume',
           '\x00'::bytea || convert_to(json_build_object('execution_id', x.execution_id)::text, 'UTF8'),
           x.principal, akter_now(), x.trace_context
      FROM actor_workflow_executions x
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid
    ON CONFLICT (routing_key, tenant, actor_type, actor_id, timer_key) WHERE timer_key IS NOT NULL
    DO UPDATE SET intent_id = excluded.intent_id, due_at = excluded.due_at, payload = excluded.payload,
                  caller = excluded.caller, attempts = 0, last_error = NULL, claim = NULL,
                  claimed_by = NULL, created_at = excluded.created_at,
                  trace_context = excluded.trace_context;
END
$$;

-- Settle what the pass ran, then record a child's start: its step row, pending until the
-- child's result is copied into it, and the start intent (an internal command of the child's
-- actor) in the parent's outbox, due now. A replayed start finds its row and writes nothing.
-- Nothing here writes the child's rows (invariant 1): the relay delivers the start as a turn on
-- the child's actor (invariant 4).
CREATE OR REPLACE FUNCTION akter_wf_start_child(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_step text, p_scope text, p_occurrence integer,
    p_child_id text, p_child_rk bigint, p_child_type text, p_child_actor_id text,
    p_child_workflow text, p_child_policy text, p_command text, p_payload bytea, p_caller bytea,
    p_trace text,
    OUT fenced boolean, OUT settled integer, OUT started boolean, OUT started_ms bigint
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    started := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence, attempt,
                                          kind, started_at, child_id, child_rk, child_type,
                                          child_actor_id, child_workflow, child_policy)
    VALUES (p_rk, p_eid, p_step, p_scope, p_occurrence, 1, 'child', akter_now(), p_child_id,
            p_child_rk, p_child_type, p_child_actor_id, p_child_workflow, p_child_policy)
    ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt) DO NOTHING;
    started := FOUND;
    SELECT (extract(epoch FROM s.started_at) * 1000)::bigint INTO started_ms
      FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step AND s.scope = p_scope
       AND s.occurrence = p_occurrence AND s.attempt = 1;
    IF started THEN
        INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket,
                                  due_at, timer_key, target_type, target_id, command, payload,
                                  caller, created_at, trace_context)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id, akter_mint_intent_id(NULL), p_bucket,
                akter_now(), NULL, p_child_type, p_child_actor_id, p_command, p_payload, p_caller,
                akter_now(), p_trace);
        PERFORM pg_notify('akter_outbox', p_bucket::text);
    END IF;
END
$$;

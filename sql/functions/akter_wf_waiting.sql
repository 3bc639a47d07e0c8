-- The open executions of an owner with a pending wait on one of p_tags: what a turn that
-- emitted events of those tags wakes (akter_wf_wake_waits, akter_wf_wake_here).
CREATE OR REPLACE FUNCTION akter_wf_waiting(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_tags text[]
) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT e.execution_id
      FROM actor_workflow_step s
      JOIN actor_workflow_executions e
        ON e.routing_key = s.routing_key AND e.execution_id = s.execution_id
     WHERE s.routing_key = p_rk AND s.kind = 'wait' AND s.exit IS NULL
       AND s.wait_tag = ANY (p_tags)
       AND e.tenant = p_tenant AND e.actor_type = p_actor_type AND e.actor_id = p_actor_id
       AND e.status <> 'finished'
$$;

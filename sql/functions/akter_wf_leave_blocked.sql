-- A runner that cannot replay an execution (an incompatible deploy: akter/workflow/engine/adopt.py)
-- leaves it suspended with p_reason as its blocked reason, and its timer at p_due, fenced like
-- every engine write: a pass fenced out must learn it (and run on under the newer generation
-- its runner may hold), never leave the execution as it found it. A pause asked meanwhile
-- leaves it paused instead (trigger actor_workflow_executions_paused).
CREATE OR REPLACE FUNCTION akter_wf_leave_blocked(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_due timestamptz, p_reason text,
    OUT fenced boolean
)
LANGUAGE plpgsql AS $$
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    IF NOT fenced THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET status = 'suspended', blocked_reason = p_reason, updated_at = akter_now()
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid AND e.status <> 'finished';
    IF FOUND THEN
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, p_due);
    END IF;
END
$$;

-- The ended run's row, then its steps deleted (rows of a run are never read again).
CREATE OR REPLACE FUNCTION akter_wf_end_run(p_rk bigint, p_eid text, p_outcome text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO actor_workflow_runs (routing_key, execution_id, run_number, payload, manifest_hash,
                                     outcome, result, steps, started_at, ended_at)
    SELECT x.routing_key, x.execution_id, x.run_number, x.payload, x.manifest_hash,
           coalesce(p_outcome, x.outcome), CASE WHEN p_outcome IS NULL THEN x.result END,
           (SELECT count(*) FROM actor_workflow_step s
             WHERE s.routing_key = p_rk AND s.execution_id = p_eid),
           coalesce(x.run_started_at, x.started_at), akter_now()
      FROM actor_workflow_executions x
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM actor_workflow_step s WHERE s.routing_key = p_rk AND s.execution_id = p_eid;
    RETURN true;
END
$$;

-- Continue as new, under the fence, after settling what the pass ran: the run ends
-- (akter_wf_end_run) and the execution row becomes the next run, keeping its id, principal,
-- interrupt flag and event cursor. Its timer becomes a recovery timer p_recovery ahead: the pass
-- that continued runs the next run's first pass itself. Nothing is written for a finished
-- execution.
CREATE OR REPLACE FUNCTION akter_wf_continue(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_payload bytea, p_manifest_hash text, p_versions jsonb,
    p_recovery interval,
    OUT fenced boolean, OUT settled integer, OUT continued boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    continued := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM actor_workflow_executions x
                    WHERE x.routing_key = p_rk AND x.execution_id = p_eid AND x.status <> 'finished') THEN
        RETURN;
    END IF;
    PERFORM akter_wf_end_run(p_rk, p_eid, 'continued');
    UPDATE actor_workflow_executions x
       SET payload = p_payload, manifest_hash = p_manifest_hash, versions = p_versions,
           run_number = x.run_number + 1, run_started_at = akter_now(),
           status = 'running', blocked_reason = NULL, updated_at = akter_now()
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, akter_now() + p_recovery);
    continued := true;
END
$$;

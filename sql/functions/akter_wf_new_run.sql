-- A new run of a finished execution, in a start turn that holds the owner's row lock (the
-- NEW_RUN key policy): the finished run is kept in actor_workflow_runs with its outcome and
-- result, and the execution starts again as a fresh start would — the new input, principal,
-- manifest and markers, the cursor at the owner's event sequence, no interrupt, no result —
-- with its timer due now. Returns false (nothing written) unless the execution is finished.
CREATE OR REPLACE FUNCTION akter_wf_new_run(
    p_rk bigint, p_eid text, p_bucket smallint, p_payload bytea, p_principal bytea,
    p_manifest_hash text, p_versions jsonb, p_trace text
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM actor_workflow_executions x
                    WHERE x.routing_key = p_rk AND x.execution_id = p_eid AND x.status = 'finished') THEN
        RETURN false;
    END IF;
    PERFORM akter_wf_end_run(p_rk, p_eid, NULL);
    UPDATE actor_workflow_executions x
       SET payload = p_payload, principal = p_principal, manifest_hash = p_manifest_hash,
           versions = p_versions, run_number = x.run_number + 1, run_started_at = akter_now(),
           status = 'running', interrupt = false, interrupted_by = NULL,
           interrupt_reason = NULL, outcome = NULL, result = NULL, finished_at = NULL,
           blocked_reason = NULL, deadline_at = NULL, trace_context = p_trace, updated_at = akter_now(),
           event_cursor = (SELECT g.event_seq FROM actor_generations g
                            WHERE g.routing_key = x.routing_key AND g.tenant = x.tenant
                              AND g.actor_type = x.actor_type AND g.actor_id = x.actor_id)
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, NULL);
    RETURN true;
END
$$;

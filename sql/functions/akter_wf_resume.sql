-- A resume turn (the execution's timer delivered), under the owner's row lock the turn holds:
-- the execution is running again, and its timer becomes a recovery timer at p_due (NULL: now),
-- so that if the process running its pass dies before the pass suspends or finishes, the relay
-- delivers another resume. One a resume may not set running (akter_wf_resumable: finished, or
-- resting until a person acts) is left as it is (resumed false), and its pass finds nothing to
-- run. p_activate: the turn takes the generation of this process's runner (akter_wf_activate).
CREATE OR REPLACE FUNCTION akter_wf_resume(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_eid text, p_bucket smallint,
    p_due timestamptz, p_activate boolean,
    OUT generation bigint, OUT resumed boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF p_activate THEN
        generation := akter_wf_activate(p_rk, p_tenant, p_actor_type, p_actor_id);
    END IF;
    UPDATE actor_workflow_executions e SET status = 'running', updated_at = akter_now()
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid
       AND akter_wf_resumable(e.status, e.interrupt);
    resumed := FOUND;
    IF resumed THEN
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, p_due);
    END IF;
END
$$;

-- A pass failed (an exception escaped it: a defect of the pass, not a declared error, not a
-- lost connection). Count it with its error, under the fence of the pass's generation; at
-- p_limit failures in a row the execution needs attention instead of being resumed by its
-- recovery timer again and again (that timer still fires, and changes nothing).
CREATE OR REPLACE FUNCTION akter_wf_pass_failed(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_error text, p_limit integer,
    OUT fenced boolean, OUT failures integer, OUT attention boolean
)
LANGUAGE plpgsql AS $$
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    failures := 0;
    attention := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET failed_passes = e.failed_passes + 1,
           -- bounded: once the count reaches p_limit, nothing counts until it is resolved
           pass_errors = coalesce(e.pass_errors, '[]'::jsonb)
               || jsonb_build_array(jsonb_build_object('at', akter_now(), 'error', p_error)),
           status = CASE WHEN e.failed_passes + 1 >= p_limit THEN 'needs_attention' ELSE e.status END,
           attention_reason = CASE WHEN e.failed_passes + 1 >= p_limit
               THEN (e.failed_passes + 1) || ' passes failed in a row; the last: ' || p_error END,
           attention_at = CASE WHEN e.failed_passes + 1 >= p_limit THEN akter_now() END,
           updated_at = akter_now()
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid
       AND e.status NOT IN ('finished', 'paused', 'needs_attention')
    RETURNING e.failed_passes, e.status = 'needs_attention' INTO failures, attention;
END
$$;

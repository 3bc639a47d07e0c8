-- akter_wf_wake_waits where the runner of this process owns the actor: the turn is the resume
-- turn of every execution it wakes (as akter_wf_resume), so the pass runs here once it commits,
-- with no NOTIFY, claim or resume turn between; each one's timer becomes a recovery timer at
-- p_due. One that rests until a person acts (paused, needs attention) is left as it is, as a
-- resume leaves it: its resume (or resolution) arms its timer, and the pass then finds the
-- event. p_activate: the turn takes the runner's generation, only when it wakes something.
-- Returns the generation taken (NULL: none), the ids set running and their trace contexts (in
-- id order; NULL for none) and how many it armed.
CREATE OR REPLACE FUNCTION akter_wf_wake_here(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_tags text[], p_bucket smallint,
    p_due timestamptz, p_activate boolean,
    OUT generation bigint, OUT woken text[], OUT traces text[], OUT armed integer
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_waiting text[];
    v_eid text;
BEGIN
    armed := 0;
    SELECT array_agg(w.eid) INTO v_waiting
      FROM akter_wf_waiting(p_rk, p_tenant, p_actor_type, p_actor_id, p_tags) AS w(eid);
    IF v_waiting IS NULL THEN
        RETURN;
    END IF;
    IF p_activate THEN
        generation := akter_wf_activate(p_rk, p_tenant, p_actor_type, p_actor_id);
    END IF;
    WITH x AS (
        UPDATE actor_workflow_executions e SET status = 'running', updated_at = akter_now()
         WHERE e.routing_key = p_rk AND e.execution_id = ANY (v_waiting)
           AND akter_wf_resumable(e.status, e.interrupt)
        RETURNING e.execution_id, e.trace_context)
    SELECT array_agg(x.execution_id ORDER BY x.execution_id),
           array_agg(x.trace_context ORDER BY x.execution_id)
      INTO woken, traces
      FROM x;
    FOREACH v_eid IN ARRAY coalesce(woken, '{}') LOOP
        PERFORM akter_wf_arm(p_rk, v_eid, p_bucket, p_due);
        armed := armed + 1;
    END LOOP;
END
$$;

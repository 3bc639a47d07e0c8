-- An interrupt turn (akter/workflow/api/commands.py), under the owner's row lock the turn holds:
-- flag the execution, keep who asked first (p_by) and their reason, and make its timer due at
-- p_due (NULL: now), so its next pass runs its compensations and finishes it as interrupted.
-- status is the execution's before the interrupt, NULL when no such execution exists; a
-- finished one is left as it is (armed 0).
CREATE OR REPLACE FUNCTION akter_wf_interrupt(
    p_rk bigint, p_eid text, p_by text, p_reason text, p_bucket smallint, p_due timestamptz,
    OUT status text, OUT armed integer
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT e.status INTO status FROM actor_workflow_executions e
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid;
    armed := 0;
    UPDATE actor_workflow_executions e
       SET interrupt = true, interrupted_by = coalesce(e.interrupted_by, p_by),
           interrupt_reason = CASE WHEN e.interrupted_by IS NULL THEN p_reason ELSE e.interrupt_reason END,
           updated_at = akter_now()
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid AND e.status <> 'finished';
    IF FOUND THEN
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, p_due);
        armed := 1;
    END IF;
END
$$;

-- akter_wf_suspend_settled for an execution that has children (akter/workflow/core/children.py,
-- docs/children.md), unless a child its live branches await (p_awaited, their execution ids)
-- has finished: then only the pass's settles are written and the suspension is refused
-- (unscanned), so the pass goes on and records the child's result (invariant 13).
--
-- A parent that suspends while one of its pending children has finished would miss the resume
-- that finish sent if the resume's turn ran before the suspension (the suspension would delete
-- the timer the resume armed); so the check is a statement that starts after the fence's lock is
-- held, and sees the finish of any child whose resume the lock waited for (invariant 6). A child
-- no branch awaits any more (started and never awaited, or awaited by a race's losing branch)
-- does not refuse it: its step stays open, and a body that awaits it later reads its result on
-- the pass its own wake-up starts.
CREATE OR REPLACE FUNCTION akter_wf_suspend_children(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_due timestamptz, p_abandon text[],
    p_knows_interrupt boolean, p_abandoned bytea, p_notify_within interval, p_awaited text[],
    OUT fenced boolean, OUT settled integer, OUT interrupt boolean, OUT unscanned boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    interrupt := false;
    unscanned := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    -- a statement of its own, after the fence's lock is held: it sees the finish of any child
    -- whose resume that lock waited for
    IF EXISTS (
        SELECT 1 FROM actor_workflow_step s
          JOIN actor_workflow_executions c
            ON c.routing_key = s.child_rk AND c.execution_id = s.child_id
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.kind = 'child'
           AND s.exit IS NULL AND c.status = 'finished'
           AND (p_awaited IS NULL OR s.child_id = ANY (p_awaited))) THEN
        unscanned := true;
        RETURN;
    END IF;
    SELECT s.fenced, s.interrupt, s.unscanned INTO fenced, interrupt, unscanned
      FROM akter_wf_suspend_settled(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                    p_bucket, NULL, NULL, NULL, NULL, NULL, p_due, p_abandon,
                                    p_knows_interrupt, p_abandoned, p_notify_within) s;
END
$$;

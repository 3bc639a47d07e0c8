-- Only the children a parent still awaits refuse its suspension (invariant 13).
--
-- akter_wf_suspend_children (sql/016) refused a parent's suspension while any child step of it
-- was open and its child had finished, so that the pass reads the result instead of losing the
-- finish's resume (invariant 6). A child that no branch awaits any more — started and never
-- awaited ("start this and go on"), or awaited by a race's losing branch — refused it too, and
-- forever: the pass found nothing to read, tried again, and the parent never rested.
--
-- The pass now names the children its live branches await (p_awaited, their execution ids): only
-- a finished one of those refuses. Any other child's finish wakes nothing; its step stays open,
-- so a body that awaits it later (after a sleep, a wait) reads its result then, on the pass that
-- its own wake-up starts. NULL (the 17-argument form, which a runner of an earlier release calls
-- during a rolling deploy) keeps the earlier reading: every open child counts.

CREATE FUNCTION akter_wf_suspend_children(
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

-- the earlier form: one definition of the check, every open child awaited
CREATE OR REPLACE FUNCTION akter_wf_suspend_children(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_due timestamptz, p_abandon text[],
    p_knows_interrupt boolean, p_abandoned bytea, p_notify_within interval,
    OUT fenced boolean, OUT settled integer, OUT interrupt boolean, OUT unscanned boolean
)
LANGUAGE sql AS $$
    SELECT s.fenced, s.settled, s.interrupt, s.unscanned
      FROM akter_wf_suspend_children(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                     p_bucket, p_steps, p_scopes, p_occurrences, p_attempts,
                                     p_exits, p_due, p_abandon, p_knows_interrupt, p_abandoned,
                                     p_notify_within, NULL::text[]) s
$$;

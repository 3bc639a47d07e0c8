-- Settle a wait with a match (advancing the execution's cursor) or with its timeout. A timeout
-- is refused while an event of the wait's tag stamped at or before the deadline lies beyond
-- p_scanned: that event may match and wins the race with the timeout. p_scanned always
-- advances the scanned mark, settled or not.
CREATE OR REPLACE FUNCTION akter_wf_settle_wait(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_step text, p_scope text, p_occurrence integer, p_tag text, p_exit bytea,
    p_scanned bigint, p_timeout boolean,
    OUT fenced boolean, OUT settled boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    deadline timestamptz;
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    settled := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    SELECT s.due_at INTO deadline FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1;
    IF p_timeout AND EXISTS (
        SELECT 1 FROM actor_events ev
         WHERE ev.routing_key = p_rk AND ev.tenant = p_tenant AND ev.actor_type = p_actor_type
           AND ev.actor_id = p_actor_id AND ev.tag = p_tag AND ev.sequence > p_scanned
           AND ev.created_at <= deadline) THEN
        UPDATE actor_workflow_step s SET scanned = greatest(s.scanned, p_scanned)
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
           AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1;
        RETURN;
    END IF;
    UPDATE actor_workflow_step s
       SET exit = p_exit, settled_at = akter_now(), scanned = greatest(s.scanned, p_scanned)
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1 AND s.exit IS NULL;
    settled := FOUND;
    IF settled AND NOT p_timeout THEN
        UPDATE actor_workflow_executions x SET event_cursor = greatest(x.event_cursor, p_scanned)
         WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    END IF;
END
$$;

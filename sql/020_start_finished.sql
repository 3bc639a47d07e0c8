-- A start whose body ended before it asked for any effect (akter/workflow/prefix.py): the start
-- turn, which runs the body's in-memory prefix, inserts the execution as a start does
-- (queries.START: its event cursor at the owner's sequence before this turn's events) and
-- finishes it in the same transaction, as a pass's finish does (akter_wf_finish): the status
-- update fires the finish's triggers (a deadline's intent, sql/015; a child's resume of its
-- parent, sql/016) and waiting clients are notified. The row carries what a started execution
-- would have carried by then: its deadline (p_timeout_ms; its intent is never armed, since the
-- execution is finished) and its parent (what the start's link, children.LINK, writes). No
-- timer is armed and no generation taken: no pass runs. Returns false, writing nothing, when
-- the execution exists already (a repeated keyed start attaches to it).
CREATE FUNCTION akter_wf_start_finished(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_eid text, p_workflow text,
    p_key text, p_manifest_hash text, p_payload bytea, p_principal bytea, p_versions jsonb,
    p_trace text, p_timeout_ms bigint, p_parent text, p_parent_type text, p_parent_actor_id text,
    p_outcome text, p_result bytea
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO actor_workflow_executions AS e
        (routing_key, execution_id, tenant, actor_type, actor_id, workflow, key, manifest_hash,
         payload, principal, versions, event_cursor, status, started_at, updated_at, trace_context)
    SELECT p_rk, p_eid, p_tenant, p_actor_type, p_actor_id, p_workflow, p_key, p_manifest_hash,
           p_payload, p_principal, p_versions, g.event_seq, 'running', akter_now(), akter_now(), p_trace
      FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id
    ON CONFLICT (routing_key, execution_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE actor_workflow_executions e
       SET status = 'finished', outcome = p_outcome, result = p_result, finished_at = akter_now(),
           updated_at = akter_now(),
           deadline_at = akter_now() + p_timeout_ms * interval '1 millisecond',
           parent_id = p_parent, parent_type = p_parent_type, parent_actor_id = p_parent_actor_id
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid;
    PERFORM pg_notify('akter_finished', p_eid);
    RETURN true;
END
$$;

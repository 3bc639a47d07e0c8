-- A start whose body ended before it asked for any effect (akter/workflow/engine/prefix.py): the start
-- turn, which runs the body's in-memory prefix, writes the execution already finished — the row
-- a start inserts (queries.START: its event cursor at the owner's sequence before this turn's
-- events) as a pass's finish leaves it (akter_wf_finish: outcome, result, finished_at, and the
-- finish's notification). It carries what a started execution would carry by then: its
-- deadline (p_timeout_ms; the deadline's intent is never armed, the execution being finished)
-- and its parent (what the start's link, children.LINK, writes). No timer is armed and no
-- generation taken: no pass runs. Returns false, writing nothing, when the execution exists
-- already (a repeated keyed start attaches to it).
--
-- A child is inserted running and then finished, so that the finish's trigger
-- (akter_wf_child_finished) puts the resume of its parent in its outbox exactly as a pass's
-- finish does. Any other execution is inserted finished: one row version and one set of index
-- entries instead of two (the update would change the status every partial index of executions
-- is defined on); the finish triggers it skips have nothing to do for it (the deadline's intent
-- was never armed; no parent to resume, no interrupt to pass on).
CREATE OR REPLACE FUNCTION akter_wf_start_finished(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_eid text, p_workflow text,
    p_key text, p_manifest_hash text, p_payload bytea, p_principal bytea, p_versions jsonb,
    p_trace text, p_timeout_ms bigint, p_parent text, p_parent_type text, p_parent_actor_id text,
    p_outcome text, p_result bytea
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    child boolean := p_parent IS NOT NULL;
BEGIN
    INSERT INTO actor_workflow_executions AS e
        (routing_key, execution_id, tenant, actor_type, actor_id, workflow, key, manifest_hash,
         payload, principal, versions, event_cursor, status, outcome, result, started_at,
         updated_at, finished_at, deadline_at, trace_context)
    SELECT p_rk, p_eid, p_tenant, p_actor_type, p_actor_id, p_workflow, p_key, p_manifest_hash,
           p_payload, p_principal, p_versions, g.event_seq,
           CASE WHEN child THEN 'running' ELSE 'finished' END,
           CASE WHEN child THEN NULL ELSE p_outcome END,
           CASE WHEN child THEN NULL ELSE p_result END,
           akter_now(), akter_now(), CASE WHEN child THEN NULL ELSE akter_now() END,
           akter_now() + p_timeout_ms * interval '1 millisecond', p_trace
      FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id
    ON CONFLICT (routing_key, execution_id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF child THEN
        UPDATE actor_workflow_executions e
           SET status = 'finished', outcome = p_outcome, result = p_result,
               finished_at = akter_now(), updated_at = akter_now(), parent_id = p_parent,
               parent_type = p_parent_type, parent_actor_id = p_parent_actor_id
         WHERE e.routing_key = p_rk AND e.execution_id = p_eid;
    END IF;
    PERFORM pg_notify('akter_finished', p_eid);
    RETURN true;
END
$$;

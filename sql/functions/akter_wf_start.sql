-- A start, in the start turn that holds the owner's row lock (akter/workflow/engine/hook.py): insert the
-- execution running, with its cursor at the owner's event sequence as it stands before this
-- turn's own events are written (the turn's hooks run before the kernel's write), then arm its
-- timer at p_due (NULL: now) in a later statement, which sees the row. A repeated keyed start
-- attaches: nothing is written and started is 0.
--
-- p_activate: the runner of this process owns the actor and holds no generation of it yet, so
-- the turn takes one (akter_wf_activate; generation, else NULL); the runner runs the first pass
-- once the turn commits, and the timer (p_due) is only its recovery should the process die
-- first.
CREATE OR REPLACE FUNCTION akter_wf_start(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_eid text, p_workflow text,
    p_key text, p_manifest_hash text, p_payload bytea, p_principal bytea, p_versions jsonb,
    p_trace text, p_bucket smallint, p_due timestamptz, p_activate boolean,
    OUT generation bigint, OUT started integer, OUT event_cursor bigint
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF p_activate THEN
        generation := akter_wf_activate(p_rk, p_tenant, p_actor_type, p_actor_id);
    END IF;
    SELECT g.event_seq INTO event_cursor FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id;
    started := 0;
    IF event_cursor IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO actor_workflow_executions
        (routing_key, execution_id, tenant, actor_type, actor_id, workflow, key, manifest_hash,
         payload, principal, versions, event_cursor, status, started_at, updated_at, trace_context)
    VALUES (p_rk, p_eid, p_tenant, p_actor_type, p_actor_id, p_workflow, p_key, p_manifest_hash,
            p_payload, p_principal, p_versions, event_cursor, 'running', akter_now(), akter_now(),
            p_trace)
    ON CONFLICT (routing_key, execution_id) DO NOTHING;
    IF FOUND THEN
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, p_due);
        started := 1;
    END IF;
END
$$;

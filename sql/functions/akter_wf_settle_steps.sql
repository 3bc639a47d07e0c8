-- Fence, then settle: the write a pass sends before it waits for anything but its own writes.
CREATE OR REPLACE FUNCTION akter_wf_settle_steps(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[], p_attempts integer[],
    p_exits bytea[],
    OUT fenced boolean, OUT settled integer
)
LANGUAGE plpgsql AS $$
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    settled := 0;
    IF fenced THEN
        settled := akter_wf_settle_many(p_rk, p_eid, p_steps, p_scopes, p_occurrences, p_attempts, p_exits);
    END IF;
END
$$;

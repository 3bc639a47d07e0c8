-- akter_wf_finish after settling what the pass ran (before the finish settles what is still
-- pending as interrupted).
CREATE OR REPLACE FUNCTION akter_wf_finish_settled(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[], p_attempts integer[],
    p_exits bytea[], p_outcome text, p_result bytea, p_pending_exit bytea, p_drop_steps boolean,
    OUT fenced boolean, OUT settled integer, OUT finished boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    SELECT f.fenced, f.finished INTO fenced, finished
      FROM akter_wf_finish(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid, p_outcome,
                           p_result, p_pending_exit, p_drop_steps) f;
END
$$;

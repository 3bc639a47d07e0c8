-- akter_wf_suspend after settling what the pass ran (a stale fence does neither).
CREATE OR REPLACE FUNCTION akter_wf_suspend_settled(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_due timestamptz, p_abandon text[],
    p_knows_interrupt boolean, p_abandoned bytea, p_notify_within interval,
    OUT fenced boolean, OUT settled integer, OUT interrupt boolean, OUT unscanned boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    SELECT s.fenced, s.interrupt, s.unscanned INTO fenced, interrupt, unscanned
      FROM akter_wf_suspend(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid, p_bucket,
                            p_due, p_abandon, p_knows_interrupt, p_abandoned, p_notify_within) s;
END
$$;

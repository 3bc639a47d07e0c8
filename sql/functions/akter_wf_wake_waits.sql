-- A turn emitted events with p_tags: every open execution of this owner with a pending wait on
-- one of them gets its timer due at p_due (NULL: now; inserted if the wait had none), so no
-- event is missed (invariant 6). One row per execution woken, its id. An execution that rests
-- until a person acts is woken too: its resume changes nothing (akter_wf_resume), and the pass
-- its resolution starts finds the event.
CREATE OR REPLACE FUNCTION akter_wf_wake_waits(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_tags text[], p_bucket smallint,
    p_due timestamptz
) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    v_eid text;
BEGIN
    FOR v_eid IN SELECT w.eid FROM akter_wf_waiting(p_rk, p_tenant, p_actor_type, p_actor_id, p_tags) AS w(eid)
    LOOP
        PERFORM akter_wf_arm(p_rk, v_eid, p_bucket, p_due);
        RETURN NEXT v_eid;
    END LOOP;
END
$$;

-- Settle the listed activity attempts (parallel arrays) under a fence the caller holds, one
-- attempt at a time by its primary key (a join with the arrays is planned as a scan of all the
-- execution's steps, which grows with a long history). Returns how many it settled; fewer than
-- listed means another writer settled one first, which the fence rules out, so the pass treats
-- it as losing the fence. The settles of the boundaries other than a step's (a record, a
-- suspension, a finish, a hold, a child's start, a continue).
CREATE OR REPLACE FUNCTION akter_wf_settle_many(
    p_rk bigint, p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[]
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    total integer := 0;
    n integer;
    v_now timestamptz;
BEGIN
    IF coalesce(cardinality(p_steps), 0) = 0 THEN
        RETURN 0;
    END IF;
    v_now := akter_now();
    FOR k IN 1 .. cardinality(p_steps) LOOP
        UPDATE actor_workflow_step s SET exit = p_exits[k], settled_at = v_now
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_steps[k]
           AND s.scope = p_scopes[k] AND s.occurrence = p_occurrences[k]
           AND s.attempt = p_attempts[k] AND s.exit IS NULL;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    RETURN total;
END
$$;

-- A due clock settles at its due time on the database clock, not a few milliseconds after.
--
-- A pass that holds a short sleep in process (passes.py, HOLD_MS) wakes on its estimate of the
-- database clock. Every reading behind that estimate is akter_now() = statement_timestamp(): the
-- moment the server received the statement that read it, so the estimate trails the server by
-- that statement's own server time (0.5–3 ms on a loaded 2-core machine), and the pass would wake
-- that much late. Waking early instead would have the settle refused (due_at > akter_now()).
--
-- So the pass wakes a little early: when the open clock step is due within p_hold_ms of the
-- database clock, the server waits out the remainder (pg_sleep) and then settles it, fenced, on
-- the clock read after the wait (akter_clock_now()). So the sleep never ends before its due
-- time, and ends within a millisecond or so after it. A clock due further away (the offset
-- moved, the estimate is far off) is not waited for and not settled: the answer says when it is
-- due and what the database clock read, and the pass parks until then. The wait happens before
-- the fence's row lock is taken: a sleeping pass never holds the owner's lock.
CREATE OR REPLACE FUNCTION akter_wf_settle_clock(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_step text, p_scope text, p_occurrence integer, p_exit bytea,
    p_hold_ms double precision,
    OUT fenced boolean, OUT settled boolean, OUT due_ms bigint, OUT now_ms bigint
)
LANGUAGE plpgsql AS $$
DECLARE
    v_due timestamptz;
    v_now timestamptz;
BEGIN
    SELECT s.due_at INTO v_due
      FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1
       AND s.exit IS NULL;
    v_now := akter_clock_now();
    IF v_due > v_now AND v_due - v_now <= p_hold_ms * interval '1 millisecond' THEN
        PERFORM pg_sleep(extract(epoch FROM v_due - v_now));
        v_now := akter_clock_now();
    END IF;
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    settled := false;
    IF fenced AND v_due <= v_now THEN
        UPDATE actor_workflow_step s SET exit = p_exit, settled_at = v_now
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
           AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1
           AND s.exit IS NULL AND s.due_at <= v_now;
        settled := FOUND;
    END IF;
    due_ms := (extract(epoch FROM v_due) * 1000)::bigint;
    now_ms := (extract(epoch FROM akter_clock_now()) * 1000)::bigint;
END
$$;

-- Step boundaries of several passes in one round trip (akter/workflow/engine/combine.py).
--
-- A step boundary is one pass's write before an activity attempt runs: fence, settle what the
-- pass ran, write the next attempt pending, keep the recovery timer armed. When several passes
-- of one process have a boundary ready at once (many executions in flight), the process sends
-- them together: one call, one transaction, one commit. Each boundary is fenced on its own
-- generation: a boundary whose generation no longer holds writes nothing and comes back
-- fenced = false, and the others are written all the same. The boundaries are taken in the order
-- of their actor's generation row, so two combined calls lock those rows in one order. Each
-- settle is one update by the step's primary key, and the database clock is read once per call.
-- It writes exactly what akter_wf_begin_one writes for each boundary.
--
-- The boundaries travel as one jsonb array (a text parameter: no per-element adaptation in the
-- client), each an object:
--   i (its index in the call, returned with its row), rk, t (tenant), at (actor type),
--   a (actor id), g (generation), e (execution id), b (bucket), s/sc/o/n (the step, scope,
--   occurrence and attempt to write pending), r (the recovery delay, ms), and x: the attempts
--   to settle first, each [step, scope, occurrence, attempt, exit as hex].
CREATE OR REPLACE FUNCTION akter_wf_begin_many(p_begins jsonb)
RETURNS TABLE (i integer, fenced boolean, settled integer, started_ms bigint, exit bytea)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r record;
    u record;
    n integer;
    timer_due timestamptz;
    -- the database clock, read once (statement_timestamp() is the same for the whole call)
    v_now timestamptz := akter_now();
BEGIN
    FOR r IN
        SELECT * FROM jsonb_to_recordset(p_begins)
            AS b(i integer, rk bigint, t text, at text, a text, g bigint, e text, b smallint,
                 s text, sc text, o integer, n integer, r double precision, x jsonb)
         ORDER BY b.rk, b.t, b.at, b.a, b.i
    LOOP
        i := r.i;
        settled := 0;
        started_ms := NULL;
        exit := NULL;
        fenced := akter_wf_fence(r.rk, r.t, r.at, r.a, r.g);
        IF fenced THEN
            -- one settle at a time, by its primary key: a join with the array would be planned
            -- for a hundred rows, and scan the table
            FOR u IN SELECT value FROM jsonb_array_elements(r.x) LOOP
                UPDATE actor_workflow_step s
                   SET exit = decode(u.value ->> 4, 'hex'), settled_at = v_now
                 WHERE s.routing_key = r.rk AND s.execution_id = r.e AND s.step = u.value ->> 0
                   AND s.scope = u.value ->> 1 AND s.occurrence = (u.value ->> 2)::integer
                   AND s.attempt = (u.value ->> 3)::integer AND s.exit IS NULL;
                GET DIAGNOSTICS n = ROW_COUNT;
                settled := settled + n;
            END LOOP;
            INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence,
                                                  attempt, kind, started_at)
            VALUES (r.rk, r.e, r.s, r.sc, r.o, r.n, 'activity', v_now)
            ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt)
            DO UPDATE SET kind = excluded.kind
            RETURNING (extract(epoch FROM s.started_at) * 1000)::bigint, s.exit INTO started_ms, exit;
            SELECT o.due_at INTO timer_due FROM actor_outbox o
             WHERE o.routing_key = r.rk AND o.tenant = r.t AND o.actor_type = r.at
               AND o.actor_id = r.a AND o.timer_key = 'wf:' || r.e;
            IF timer_due IS NULL OR timer_due > v_now + r.r * interval '1 millisecond' THEN
                PERFORM akter_wf_arm(r.rk, r.e, r.b, v_now + r.r * interval '1 millisecond');
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

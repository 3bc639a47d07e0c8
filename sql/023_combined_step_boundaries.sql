-- Step boundaries: several passes' in one round trip, a lone pass's as scalars.
--
-- akter_wf_begin (sql/010) is one pass's step boundary: fence, settle what the pass ran, write
-- the next attempt pending, keep the recovery timer armed. When several passes of one process
-- have a boundary ready at once (many executions in flight), the process sends them together
-- (akter/workflow/combine.py): one call of akter_wf_begin_many, one transaction, one commit. Each
-- boundary is fenced on its own generation: a boundary whose generation no longer holds writes
-- nothing and comes back fenced = false, and the others are written all the same. The boundaries
-- are taken in the order of their actor's generation row, so two combined calls lock those rows
-- in one order. A lone boundary settling at most one attempt (a sequential workflow's every
-- step) goes to akter_wf_begin_one, with scalar parameters. Both write exactly what
-- akter_wf_begin writes; each settle is one update by the step's primary key, and the database
-- clock is read once per call.
--
-- The boundaries of akter_wf_begin_many travel as one jsonb array (a text parameter: no
-- per-element adaptation in the client), each an object:
--   i (its index in the call, returned with its row), rk, t (tenant), at (actor type),
--   a (actor id), g (generation), e (execution id), b (bucket), s/sc/o/n (the step, scope,
--   occurrence and attempt to write pending), r (the recovery delay, ms), and x: the attempts
--   to settle first, each [step, scope, occurrence, attempt, exit as hex].

CREATE FUNCTION akter_wf_begin_many(p_begins jsonb)
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

-- akter_wf_begin with at most one attempt to settle, as scalars (p_settle_step NULL: none): the
-- step boundary of a lone pass, its usual shape — the attempt it just ran settled, the next one
-- written pending. It writes exactly what akter_wf_begin writes.
CREATE FUNCTION akter_wf_begin_one(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_settle_step text, p_settle_scope text,
    p_settle_occurrence integer, p_settle_attempt integer, p_settle_exit bytea, p_step text,
    p_scope text, p_occurrence integer, p_attempt integer, p_recovery interval,
    OUT fenced boolean, OUT settled integer, OUT started_ms bigint, OUT exit bytea
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    timer_due timestamptz;
    v_now timestamptz := akter_now();
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    settled := 0;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF p_settle_step IS NOT NULL THEN
        UPDATE actor_workflow_step s SET exit = p_settle_exit, settled_at = v_now
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_settle_step
           AND s.scope = p_settle_scope AND s.occurrence = p_settle_occurrence
           AND s.attempt = p_settle_attempt AND s.exit IS NULL;
        GET DIAGNOSTICS settled = ROW_COUNT;
    END IF;
    INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence, attempt,
                                          kind, started_at)
    VALUES (p_rk, p_eid, p_step, p_scope, p_occurrence, p_attempt, 'activity', v_now)
    ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt)
    DO UPDATE SET kind = excluded.kind
    RETURNING (extract(epoch FROM s.started_at) * 1000)::bigint, s.exit INTO started_ms, exit;
    SELECT o.due_at INTO timer_due FROM actor_outbox o
     WHERE o.routing_key = p_rk AND o.tenant = p_tenant AND o.actor_type = p_actor_type
       AND o.actor_id = p_actor_id AND o.timer_key = 'wf:' || p_eid;
    IF timer_due IS NULL OR timer_due > v_now + p_recovery THEN
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, v_now + p_recovery);
    END IF;
END
$$;

-- akter_wf_settle_many (sql/010), the settles of the other boundaries (a record, a suspension, a
-- finish), one attempt at a time by its primary key: the join with the arrays was planned as a
-- scan of all the execution's steps, which grows with a long history.
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

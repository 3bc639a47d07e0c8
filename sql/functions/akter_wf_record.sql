-- Settle what the pass ran, then record a step settled at once (a race's winner) or pending with
-- a due time recorded once (a clock, a wait's deadline: p_after_ms after the database clock);
-- DO NOTHING keeps the first record. A clock already due (a zero sleep) is settled with
-- p_clock_exit in the same statement. Returns the step's row as it stands, so the pass reads
-- nothing back.
CREATE OR REPLACE FUNCTION akter_wf_record(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_steps text[], p_scopes text[], p_occurrences integer[], p_attempts integer[],
    p_exits bytea[], p_kind text, p_step text, p_scope text, p_occurrence integer, p_exit bytea,
    p_after_ms double precision, p_wait_tag text, p_cursor bigint, p_clock_exit bytea,
    OUT fenced boolean, OUT settled integer, OUT step text, OUT scope text, OUT occurrence integer,
    OUT attempt integer, OUT kind text, OUT exit bytea, OUT due_ms bigint, OUT started_ms bigint,
    OUT wait_cursor bigint, OUT scanned bigint
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    IF NOT fenced THEN
        RETURN;
    END IF;
    INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence, attempt,
                                          kind, exit, due_at, wait_tag, wait_cursor, scanned,
                                          started_at, settled_at)
    VALUES (p_rk, p_eid, p_step, p_scope, p_occurrence, 1, p_kind, p_exit,
            akter_now() + p_after_ms * interval '1 millisecond', p_wait_tag, p_cursor, p_cursor,
            akter_now(), CASE WHEN p_exit IS NULL THEN NULL ELSE akter_now() END)
    ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt) DO NOTHING;
    IF p_kind = 'clock' THEN
        UPDATE actor_workflow_step s SET exit = p_clock_exit, settled_at = akter_now()
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
           AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1
           AND s.exit IS NULL AND s.due_at <= akter_now();
    END IF;
    SELECT s.step, s.scope, s.occurrence, s.attempt, s.kind, s.exit,
           (extract(epoch FROM s.due_at) * 1000)::bigint,
           (extract(epoch FROM s.started_at) * 1000)::bigint, s.wait_cursor, s.scanned
      INTO step, scope, occurrence, attempt, kind, exit, due_ms, started_ms, wait_cursor, scanned
      FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1;
END
$$;

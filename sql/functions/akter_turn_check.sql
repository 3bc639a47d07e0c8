-- Optimistic turns: one round trip for a turn whose actor this process already knows.
--
-- A process remembers, per actor it ran a turn on, the version, event sequence and state that
-- turn committed (akter.actor.cache). Its next turn on that actor runs the handler on the
-- remembered state first and sends, in one batch,
--
--   BEGIN; CALL akter_turn_check(...); <the hooks' statements>; CALL akter_turn_write(...); COMMIT
--
-- akter_turn_check takes the actor's row lock first (lock-first, as every turn) and raises
-- SQLSTATE AKT01 unless what the process assumed still holds: the version it remembers (or, for
-- an actor it never saw, that the actor does not exist yet), no receipt for this command id, an
-- id that has not expired, and a clock estimate close behind akter_now(). An error ends the batch
-- before anything is written; the kernel rolls back and runs the turn the two-round-trip way
-- (akter_turn_load_versioned), which reports an expired id or replays a receipt as it always
-- did, and runs the handler again only when the state it loads is not the one the handler ran
-- on. So a wrong assumption costs a round trip, never a wrong turn.
--
-- p_version NULL: the process assumes the actor does not exist yet (its row is created here,
-- under its lock). p_state_md5 and p_shape: the md5 of the state the handler ran on and its
-- shape (NULL: no state), compared with the stored row, so that a state changed by anything
-- but a turn (an operator's UPDATE, a corrupted row: versions only move with turns) is never
-- overwritten from memory. p_now_ms: the process's estimate of akter_now(), which the turn's
-- hooks used (due times); it must be at most p_behind_ms behind the database clock and not
-- ahead of it.
CREATE OR REPLACE PROCEDURE akter_turn_check(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text,
    p_version bigint, p_state_md5 text, p_shape text, p_expires_ms bigint, p_now_ms bigint,
    p_behind_ms integer,
    -- the database clock the check read: the process corrects its estimate from it
    OUT db_now_ms bigint
)
LANGUAGE plpgsql AS $$
DECLARE
    held bigint;
BEGIN
    SELECT g.version INTO held FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant
       AND g.actor_type = p_actor_type AND g.actor_id = p_actor_id
       FOR UPDATE;
    IF NOT FOUND THEN
        IF p_version IS NOT NULL THEN
            RAISE EXCEPTION 'akter: the actor is not as this process remembers it' USING ERRCODE = 'AKT01';
        END IF;
        INSERT INTO actor_generations (routing_key, tenant, actor_type, actor_id)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id)
        ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN  -- created by another transaction meanwhile
            RAISE EXCEPTION 'akter: the actor is not as this process remembers it' USING ERRCODE = 'AKT01';
        END IF;
    ELSIF p_version IS DISTINCT FROM held THEN
        RAISE EXCEPTION 'akter: the actor is not as this process remembers it' USING ERRCODE = 'AKT01';
    ELSIF p_state_md5 IS NULL THEN
        PERFORM FROM actor_state s
         WHERE s.routing_key = p_rk AND s.tenant = p_tenant
           AND s.actor_type = p_actor_type AND s.actor_id = p_actor_id;
        IF FOUND THEN
            RAISE EXCEPTION 'akter: the state is not as this process remembers it' USING ERRCODE = 'AKT01';
        END IF;
    ELSE
        PERFORM FROM actor_state s
         WHERE s.routing_key = p_rk AND s.tenant = p_tenant
           AND s.actor_type = p_actor_type AND s.actor_id = p_actor_id
           AND md5(s.state) = p_state_md5 AND s.shape IS NOT DISTINCT FROM p_shape;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'akter: the state is not as this process remembers it' USING ERRCODE = 'AKT01';
        END IF;
    END IF;
    db_now_ms := (extract(epoch FROM akter_now()) * 1000)::bigint;
    IF p_now_ms > db_now_ms + 1 OR p_now_ms < db_now_ms - p_behind_ms THEN
        RAISE EXCEPTION 'akter: the clock estimate is off' USING ERRCODE = 'AKT01';
    END IF;
    IF p_expires_ms < db_now_ms THEN
        RAISE EXCEPTION 'akter: the command id expired' USING ERRCODE = 'AKT01';
    END IF;
    PERFORM FROM actor_receipts r
     WHERE r.routing_key = p_rk AND r.tenant = p_tenant
       AND r.actor_type = p_actor_type AND r.actor_id = p_actor_id AND r.command_id = p_command_id;
    IF FOUND THEN
        RAISE EXCEPTION 'akter: the command id has a receipt' USING ERRCODE = 'AKT01';
    END IF;
END
$$;

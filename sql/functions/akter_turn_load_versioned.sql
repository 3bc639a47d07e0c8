-- A turn's first statement, under BEGIN: lock the actor row (creating it on first use), then
-- read what the turn needs — the event sequence, the state and its shape, the receipt of this
-- command id (all NULL when there is none), the database clock in ms since the epoch, and the
-- actor's version (bumped by every committed turn), for the process's memory of the actor
-- (akter.actor.cache).
--
-- A turn's statements are procedures so that a turn is two round trips whose statements
-- PostgreSQL plans once per session instead of once per turn: PL/pgSQL caches the plans of the
-- statements inside a routine for the life of the session, and the cache survives ROLLBACK and
-- DEALLOCATE ALL (which psycopg sends after a rollback on a connection where it prepared
-- statements of its own), needs no per-connection bookkeeping, and works through a
-- transaction-mode pooler. Procedures rather than functions: CALL skips the planning of the
-- outer SELECT a function call needs, and OUT parameters return the one row without a
-- tuplestore. docs/performance.md has the measurements.
--
-- The lock comes first, in its own statement: each statement inside takes a fresh snapshot
-- (READ COMMITTED), so a turn that waited for the lock reads the state and receipt with a
-- snapshot taken after the previous holder committed.
CREATE OR REPLACE PROCEDURE akter_turn_load_versioned(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text,
    OUT event_seq bigint,
    OUT state bytea,
    OUT state_shape text,
    OUT command text,
    OUT payload_hash bytea,
    OUT caller_key text,
    OUT outcome bytea,
    OUT now_ms bigint,
    OUT version bigint
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant
       AND g.actor_type = p_actor_type AND g.actor_id = p_actor_id
       FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO actor_generations (routing_key, tenant, actor_type, actor_id)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id)
        ON CONFLICT DO NOTHING;
        PERFORM FROM actor_generations g
         WHERE g.routing_key = p_rk AND g.tenant = p_tenant
           AND g.actor_type = p_actor_type AND g.actor_id = p_actor_id
           FOR UPDATE;
    END IF;
    SELECT g.event_seq, s.state, s.shape,
           r.command, r.payload_hash, r.caller_key, r.outcome,
           (extract(epoch FROM akter_now()) * 1000)::bigint, g.version
      INTO event_seq, state, state_shape, command, payload_hash, caller_key, outcome, now_ms, version
      FROM actor_generations g
      LEFT JOIN actor_state s
        ON s.routing_key = g.routing_key AND s.tenant = g.tenant
       AND s.actor_type = g.actor_type AND s.actor_id = g.actor_id
      LEFT JOIN actor_receipts r
        ON r.routing_key = g.routing_key AND r.tenant = g.tenant
       AND r.actor_type = g.actor_type AND r.actor_id = g.actor_id
       AND r.command_id = p_command_id
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant
       AND g.actor_type = p_actor_type AND g.actor_id = p_actor_id;
END
$$;

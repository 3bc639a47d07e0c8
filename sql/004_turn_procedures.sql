-- A turn's two statements as PL/pgSQL procedures, so that a turn is two round trips whose
-- statements PostgreSQL plans once per session instead of once per turn:
--
--   BEGIN; CALL akter_turn_load(...)        -- lock the actor row, read what the turn needs
--   CALL akter_turn_write(...); COMMIT      -- state, events, receipt, then commit
--
-- PL/pgSQL caches the plans of the statements inside a routine for the life of the session, and
-- the cache survives ROLLBACK and DEALLOCATE ALL (which psycopg sends after a rollback on a
-- connection where it prepared statements of its own), needs no per-connection bookkeeping, and
-- works through a transaction-mode pooler. Procedures rather than functions: CALL skips the
-- planning of the outer SELECT a function call needs, and OUT parameters return the one row
-- without a tuplestore. See docs/performance.md for the measurements.
--
-- Each statement inside takes a fresh snapshot (READ COMMITTED): that is what lets
-- akter_turn_load read, after the row lock was granted, everything committed by the turn that
-- held the lock before it.

CREATE PROCEDURE akter_turn_load(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text,
    OUT event_seq bigint,
    OUT state bytea,
    -- the receipt of this command id, all NULL when there is none
    OUT command text,
    OUT payload_hash bytea,
    OUT caller_key text,
    OUT outcome bytea,
    -- the database clock (akter_now()) in ms since the epoch
    OUT now_ms bigint
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    -- The lock first, in its own statement: a turn that waited for it reads the state and
    -- receipt below with a snapshot taken after the previous holder committed.
    PERFORM FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant
       AND g.actor_type = p_actor_type AND g.actor_id = p_actor_id
       FOR UPDATE;
    IF NOT FOUND THEN
        -- First turn of this actor. A rival creating it at the same moment makes this INSERT
        -- wait for the rival's outcome; either way the row exists (or is ours) afterwards.
        INSERT INTO actor_generations (routing_key, tenant, actor_type, actor_id)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id)
        ON CONFLICT DO NOTHING;
        PERFORM FROM actor_generations g
         WHERE g.routing_key = p_rk AND g.tenant = p_tenant
           AND g.actor_type = p_actor_type AND g.actor_id = p_actor_id
           FOR UPDATE;
    END IF;
    SELECT g.event_seq, s.state,
           r.command, r.payload_hash, r.caller_key, r.outcome,
           (extract(epoch FROM akter_now()) * 1000)::bigint
      INTO event_seq, state, command, payload_hash, caller_key, outcome, now_ms
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

-- The write of a turn, under the row lock akter_turn_load took in the same transaction.
-- p_state NULL: the state did not change. p_event_seq: the actor's last event sequence before
-- this turn; the events (p_tags, p_values, in order; NULL or empty for none) take the next ones.
CREATE PROCEDURE akter_turn_write(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text,
    p_command text, p_payload_hash bytea, p_caller_key text, p_outcome bytea, p_failed boolean,
    p_expires_ms bigint, p_state bytea, p_event_seq bigint, p_tags text[], p_values bytea[]
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    emitted integer := coalesce(cardinality(p_tags), 0);
BEGIN
    UPDATE actor_generations g
       SET version = g.version + 1, event_seq = p_event_seq + emitted
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant
       AND g.actor_type = p_actor_type AND g.actor_id = p_actor_id;
    IF p_state IS NOT NULL THEN
        INSERT INTO actor_state (routing_key, tenant, actor_type, actor_id, state, updated_at)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id, p_state, akter_now())
        ON CONFLICT (routing_key, tenant, actor_type, actor_id)
        DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at;
    END IF;
    IF emitted > 0 THEN
        INSERT INTO actor_events
            (routing_key, tenant, actor_type, actor_id, sequence, tag, value, command_id, created_at)
        SELECT p_rk, p_tenant, p_actor_type, p_actor_id, p_event_seq + e.n, e.tag, e.value,
               p_command_id, akter_now()
          FROM unnest(p_tags, p_values) WITH ORDINALITY AS e(tag, value, n);
    END IF;
    INSERT INTO actor_receipts (routing_key, tenant, actor_type, actor_id, command_id, command,
                                payload_hash, caller_key, outcome, failed, expires_at, created_at)
    VALUES (p_rk, p_tenant, p_actor_type, p_actor_id, p_command_id, p_command,
            p_payload_hash, p_caller_key, p_outcome, p_failed,
            to_timestamp(p_expires_ms / 1000.0), akter_now());
END
$$;

-- Actor manifests, and the shape every stored state was written in.
--
-- An actor manifest is the shape of an actor type as deployed: the fingerprints of its state
-- type, of the older state types it declares upgrades from, of its event types and of its
-- command payloads (akter.actor.manifest). Every manifest an App opens with, or that
-- `akter workflows check` accepts, is stored here; the check and an App opening its runtime
-- compare their code with the latest one, and look stored state shapes up in all of them.
-- Small and global, like actor_workflow_manifests: a row is never changed once written.
CREATE TABLE actor_manifests (
    actor_type    text        NOT NULL,
    manifest_hash text        NOT NULL,
    manifest      jsonb       NOT NULL,
    accepted_at   timestamptz NOT NULL DEFAULT akter_now(),
    PRIMARY KEY (actor_type, manifest_hash)
);

-- The shape (the hash of the state type's fingerprint) a state was written in, so that a
-- state of an older shape is decoded as that shape and upgraded, never guessed at. NULL: the
-- state was written before this migration. The index serves the check's count of stored
-- states per shape; turns that keep the shape leave it untouched (HOT updates stay possible).
ALTER TABLE actor_state ADD COLUMN shape text;
CREATE INDEX actor_state_shape ON actor_state (actor_type, shape);

-- The turn procedures of sql/004, reading and writing the shape beside the state. Otherwise
-- unchanged: see that file for why they are procedures and why the lock comes first.
DROP PROCEDURE akter_turn_load;
DROP PROCEDURE akter_turn_write;

CREATE PROCEDURE akter_turn_load(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text,
    OUT event_seq bigint,
    OUT state bytea,
    OUT state_shape text,
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
           (extract(epoch FROM akter_now()) * 1000)::bigint
      INTO event_seq, state, state_shape, command, payload_hash, caller_key, outcome, now_ms
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

-- p_state NULL: the state did not change. p_state_shape: the shape p_state is written in.
CREATE PROCEDURE akter_turn_write(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text,
    p_command text, p_payload_hash bytea, p_caller_key text, p_outcome bytea, p_failed boolean,
    p_expires_ms bigint, p_state bytea, p_state_shape text, p_event_seq bigint, p_tags text[],
    p_values bytea[]
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
        INSERT INTO actor_state (routing_key, tenant, actor_type, actor_id, state, shape, updated_at)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id, p_state, p_state_shape, akter_now())
        ON CONFLICT (routing_key, tenant, actor_type, actor_id)
        DO UPDATE SET state = excluded.state, shape = excluded.shape, updated_at = excluded.updated_at;
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

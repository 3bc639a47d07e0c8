-- The write of a turn, under the row lock akter_turn_load_versioned (or akter_turn_check) took
-- in the same transaction: the version bumped, the state (p_state NULL: it did not change;
-- p_state_shape: the shape p_state is written in), the events (p_tags, p_values, in order; NULL
-- or empty for none) at the sequences after p_event_seq, and the receipt.
CREATE OR REPLACE PROCEDURE akter_turn_write(
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

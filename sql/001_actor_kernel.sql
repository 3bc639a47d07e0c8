-- The actor kernel: deployment settings, the database clock, actor rows, state, receipts, events.
-- Every actor table's primary key starts with routing_key and carries the full identity
-- (tenant, actor_type, actor_id), so a 64-bit hash collision can never merge two actors.

CREATE TABLE actor_deployment (
    singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    protocol_version integer NOT NULL,
    retry_window     interval NOT NULL
);
INSERT INTO actor_deployment (protocol_version, retry_window) VALUES (1, interval '24 hours');

-- Durable time is read through akter_now() only. Tests move the offset; every connection and
-- every process sees the same clock because the offset lives here.
CREATE TABLE akter_clock (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    clock_offset interval NOT NULL
);
INSERT INTO akter_clock (clock_offset) VALUES (interval '0');

CREATE FUNCTION akter_now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT statement_timestamp() + (SELECT clock_offset FROM akter_clock) $$;

CREATE TABLE actor_generations (
    routing_key bigint      NOT NULL,
    tenant      text        NOT NULL,
    actor_type  text        NOT NULL,
    actor_id    text        NOT NULL,
    generation  bigint      NOT NULL DEFAULT 0,
    -- bumped by every committed turn; lets a turn detect that another committed while it waited
    version     bigint      NOT NULL DEFAULT 0,
    event_seq   bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT akter_now(),
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id)
);

CREATE TABLE actor_state (
    routing_key bigint      NOT NULL,
    tenant      text        NOT NULL,
    actor_type  text        NOT NULL,
    actor_id    text        NOT NULL,
    state       bytea       NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id)
);

CREATE TABLE actor_receipts (
    routing_key  bigint      NOT NULL,
    tenant       text        NOT NULL,
    actor_type   text        NOT NULL,
    actor_id     text        NOT NULL,
    command_id   text        NOT NULL,
    command      text        NOT NULL,
    payload_hash bytea       NOT NULL,
    caller_key   text        NOT NULL,
    -- tagged outcome: {"ok": value} or {"error": {"type": name, "value": fields}}, framed
    outcome      bytea       NOT NULL,
    failed       boolean     NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id, command_id)
);
CREATE INDEX actor_receipts_expiry ON actor_receipts (expires_at);

CREATE TABLE actor_events (
    routing_key bigint      NOT NULL,
    tenant      text        NOT NULL,
    actor_type  text        NOT NULL,
    actor_id    text        NOT NULL,
    sequence    bigint      NOT NULL,
    tag         text        NOT NULL,
    value       bytea       NOT NULL,
    command_id  text        NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id, sequence)
);

-- The outbox: commands a turn staged for later delivery, and the relay's bucket ownership.
-- An intent's primary key starts with the *sender's* routing key: the relay that owns the
-- sender's bucket delivers it, and the row lives with the actor that staged it.

CREATE TABLE actor_outbox (
    routing_key bigint      NOT NULL,
    tenant      text        NOT NULL,
    actor_type  text        NOT NULL,
    actor_id    text        NOT NULL,
    -- a command id (v1.<issued>.<expires>.<nonce>); the receiver's turn runs under it
    intent_id   text        NOT NULL,
    -- routing_key >> 56, stored so that the due scan is one index range per owned bucket
    bucket      smallint    NOT NULL,
    -- on the database clock (akter_now()); a claim pushes it forward by the delivery lease
    due_at      timestamptz NOT NULL,
    -- set for keyed intents (timers): at most one pending intent per actor and key
    timer_key   text,
    -- the target is in the sender's tenant: tenants never address each other
    target_type text        NOT NULL,
    target_id   text        NOT NULL,
    command     text        NOT NULL,
    payload     bytea       NOT NULL,
    -- the System caller the delivery runs as (source, sender ref, on_behalf_of): names only
    caller      bytea       NOT NULL,
    attempts    integer     NOT NULL DEFAULT 0,
    last_error  text,
    -- the token of the claim in progress; a keyed replacement clears it
    claim       uuid,
    claimed_by  text,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id, intent_id)
);

CREATE UNIQUE INDEX actor_outbox_timer_key
    ON actor_outbox (routing_key, tenant, actor_type, actor_id, timer_key)
    WHERE timer_key IS NOT NULL;

CREATE INDEX actor_outbox_due ON actor_outbox (bucket, due_at);

-- Relay processes sharing this database. Ownership leases run on the real clock
-- (clock_timestamp()), never on akter_now(): tests move akter_now() by days, and a lease must
-- not expire because a test jumped the durable clock.
-- These two tables are coordination state, not actor rows: small, global, never distributed.
CREATE TABLE akter_relay_members (
    member_id    text        PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at   timestamptz NOT NULL
);

CREATE TABLE akter_relay_buckets (
    bucket     smallint    PRIMARY KEY CHECK (bucket BETWEEN -128 AND 127),
    owner      text,
    expires_at timestamptz
);
INSERT INTO akter_relay_buckets (bucket) SELECT generate_series(-128, 127);

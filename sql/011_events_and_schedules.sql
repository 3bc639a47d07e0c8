-- Live subscriptions: every committed event wakes the subscribers of its actor.
--
-- A row trigger on actor_events sends NOTIFY akter_events, '<routing key>' for each event a
-- turn inserts; PostgreSQL folds the identical notifications of one transaction into one and
-- delivers it only at commit, so a subscriber (akter.actor.subscribe) is woken once per turn,
-- never by a turn that rolls back. The payload is the routing key alone: no tenant, no actor
-- id, no event data leaves the table this way, and a subscriber re-reads its actor's events
-- after its cursor on every wake (a routing-key collision only costs it one empty read).
CREATE FUNCTION akter_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('akter_events', NEW.routing_key::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER actor_events_notify AFTER INSERT ON actor_events
    FOR EACH ROW EXECUTE FUNCTION akter_events_notify();

-- Schedules (akter.outbox.schedules): one row per schedule, kept by the turns on its target
-- actor that arm, fire, pause and delete it, under that actor's row lock. The timer itself is
-- the actor's keyed outbox intent 'akter.schedule:<name>:<digest>'; this row is what
-- `akter schedules list` shows and what a fire checks that its schedule is still the one it
-- was armed for (status, digest).
CREATE TABLE akter_schedules (
    routing_key  bigint      NOT NULL,
    tenant       text        NOT NULL,
    name         text        NOT NULL,
    actor_type   text        NOT NULL,
    actor_id     text        NOT NULL,
    digest       text        NOT NULL,
    spec         bytea       NOT NULL,
    declared     boolean     NOT NULL,
    status       text        NOT NULL CHECK (status IN ('active', 'paused')),
    next_slot_at timestamptz,
    last_slot_at timestamptz,
    fired        bigint      NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, name)
);
-- names are unique per tenant, so an operator addresses a schedule by tenant and name
CREATE UNIQUE INDEX akter_schedules_name ON akter_schedules (tenant, name);

-- Live subscriptions: every committed event wakes the subscribers of its actor.
--
-- A row trigger on actor_events sends NOTIFY akter_events, '<routing key>' for each event a
-- turn inserts; PostgreSQL folds the identical notifications of one transaction into one and
-- delivers it only at commit, so a subscriber (akter.actor.subscribe) is woken once per turn,
-- never by a turn that rolls back. The payload is the routing key alone: no tenant, no actor
-- id, no event data leaves the table this way, and a subscriber re-reads its actor's events
-- after its cursor on every wake (a routing-key collision only costs it one empty read).
CREATE OR REPLACE FUNCTION akter_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('akter_events', NEW.routing_key::text);
    RETURN NULL;
END
$$;

-- Anything that gives a parked row a due time again un-parks it: a keyed replacement from a
-- turn, a workflow arming its execution's timer (a new event, an interrupt, a pass), an
-- operator's retry. Those writers live in several layers (and in akter_wf_arm); the trigger
-- (actor_outbox_unpark) keeps the rule in one place so none of them has to know about parking.
CREATE OR REPLACE FUNCTION akter_outbox_unpark() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.parked_at := NULL;
    NEW.parked_reason := NULL;
    RETURN NEW;
END
$$;

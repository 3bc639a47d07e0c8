-- Parked intents: rows the relay gave up delivering (their attempts ran out, or their receiver
-- can never accept them), kept for an operator to retry or delete (akter/outbox/admin.py).
--
-- A parked row's due time is a sentinel far in the future, so the due scan — an index range
-- `due_at <= akter_now()` per owned bucket — and the next-due probe never read it: a parked row
-- costs the relay nothing. The sentinel is finite (every driver can read it as a date) and far
-- enough from year 10000 that no time zone pushes it over.

ALTER TABLE actor_outbox
    ADD COLUMN parked_at     timestamptz,
    ADD COLUMN parked_reason text;

CREATE FUNCTION akter_parked_due() RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT timestamptz '9999-01-01 00:00:00+00' $$;

-- NOT VALID: the new columns are NULL in every existing row, so there is nothing to scan for;
-- every write from now on is checked.
ALTER TABLE actor_outbox
    ADD CONSTRAINT actor_outbox_parked_not_due
    CHECK (parked_at IS NULL OR due_at = akter_parked_due()) NOT VALID;

-- Anything that gives a parked row a due time again un-parks it: a keyed replacement from a
-- turn, a workflow arming its execution's timer (a new event, an interrupt, a pass), an
-- operator's retry. Those writers live in several layers (and in sql/005's akter_wf_arm); the
-- trigger keeps the rule in one place so none of them has to know about parking.
CREATE FUNCTION akter_outbox_unpark() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.parked_at := NULL;
    NEW.parked_reason := NULL;
    RETURN NEW;
END
$$;

CREATE TRIGGER actor_outbox_unpark
    BEFORE UPDATE OF due_at ON actor_outbox
    FOR EACH ROW
    WHEN (OLD.parked_at IS NOT NULL AND NEW.due_at IS DISTINCT FROM OLD.due_at)
    EXECUTE FUNCTION akter_outbox_unpark();

-- Operators address a parked intent by its id alone (`akter outbox retry ID`), and list parked
-- rows across every actor: a small partial index holds only the parked rows.
CREATE INDEX actor_outbox_parked ON actor_outbox (intent_id) WHERE parked_at IS NOT NULL;

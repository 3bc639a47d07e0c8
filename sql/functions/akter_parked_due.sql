-- The due time of a parked outbox row (actor_outbox.parked_at): a sentinel far in the future,
-- so the due scan and the next-due probe never read a parked row. Finite (every driver can read
-- it as a date) and far enough from year 10000 that no time zone pushes it over.
CREATE OR REPLACE FUNCTION akter_parked_due() RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT timestamptz '9999-01-01 00:00:00+00' $$;

-- akter_now() read at the moment of the call (clock_timestamp()) rather than at the start of
-- the statement: what akter_wf_settle_clock reads after it waited.
CREATE OR REPLACE FUNCTION akter_clock_now() RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT clock_timestamp() + (SELECT clock_offset FROM akter_clock) $$;

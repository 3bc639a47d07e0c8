-- The database clock: durable time is read through akter_now() only. Tests move the offset
-- (akter_clock); every connection and every process sees the same clock because the offset
-- lives in a table. statement_timestamp(): one reading per statement.
CREATE OR REPLACE FUNCTION akter_now() RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT statement_timestamp() + (SELECT clock_offset FROM akter_clock) $$;

-- The largest payload of a finish's notification that carries its result (akter_wf_finish), in
-- bytes; a larger one carries the execution id alone.
--
-- Why 1,024 and not NOTIFY's own limit (just under 8,000): every notification sits in the
-- server's one notification queue until the slowest listener of the database has read it, and a
-- full queue makes every committing NOTIFY fail — every finish. A note several times the size of
-- a bare execution id fills that queue several times faster when a listener stops reading;
-- 1,024 bytes bounds that at about ten times, and still carries the small results a caller waits
-- on (an id, an amount, a status). A note is also visible to any role that may LISTEN on the
-- database, which is any role that may connect to it: docs/operations.md says so.
CREATE OR REPLACE FUNCTION akter_wf_result_note_max() RETURNS integer
LANGUAGE sql IMMUTABLE AS 'SELECT 1024';

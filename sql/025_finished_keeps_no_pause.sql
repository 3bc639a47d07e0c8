-- A finished execution keeps no pause.
--
-- A pause (sql/014) is about what an execution does next. One that finishes while a pause is
-- asked — interrupted while paused, or its last attempt in flight when the pause came — does
-- nothing next, yet its row kept paused_at, paused_by and pause_reason, and an operator's
-- `executions resume` had a pause to clear on a finished row. The pause is cleared in the same
-- write that finishes the row, whichever statement writes it; the finish itself (outcome, who
-- interrupted and why) is untouched. Rows finished so far with a pause lose it here.

CREATE FUNCTION akter_wf_finished_unpaused() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.paused_at := NULL;
    NEW.paused_by := NULL;
    NEW.pause_reason := NULL;
    RETURN NEW;
END
$$;

CREATE TRIGGER actor_workflow_executions_finished_unpaused
    BEFORE UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW
    WHEN (NEW.status = 'finished' AND NEW.paused_at IS NOT NULL)
    EXECUTE FUNCTION akter_wf_finished_unpaused();

UPDATE actor_workflow_executions
   SET paused_at = NULL, paused_by = NULL, pause_reason = NULL
 WHERE status = 'finished' AND paused_at IS NOT NULL;

-- A finished execution keeps no pause (trigger actor_workflow_executions_finished_unpaused).
-- A pause is about what an execution does next. One that finishes while a pause is asked —
-- interrupted while paused, or its last attempt in flight when the pause came — does nothing
-- next, so the pause is cleared in the same write that finishes the row, whichever statement
-- writes it; the finish itself (outcome, who interrupted and why) is untouched.
CREATE OR REPLACE FUNCTION akter_wf_finished_unpaused() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.paused_at := NULL;
    NEW.paused_by := NULL;
    NEW.pause_reason := NULL;
    RETURN NEW;
END
$$;

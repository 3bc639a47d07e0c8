-- An execution a pause was asked for is never written suspended: it is paused (trigger
-- actor_workflow_executions_paused). Every writer that suspends (akter_wf_suspend, a runner
-- leaving it blocked, the passes of later effects) would otherwise need to know about pauses; a
-- pass that had not learnt of the pause when it suspended leaves it paused all the same. An
-- interrupt goes first: an interrupted execution runs to its end, paused or not.
CREATE OR REPLACE FUNCTION akter_wf_paused_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := 'paused';
    RETURN NEW;
END
$$;

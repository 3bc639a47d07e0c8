-- Retention deletes an execution with its steps; its ended runs go with it.
CREATE OR REPLACE FUNCTION akter_wf_runs_pruned() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM actor_workflow_runs r
     WHERE r.routing_key = OLD.routing_key AND r.execution_id = OLD.execution_id;
    RETURN NULL;
END
$$;

-- Operating executions (akter.operate): finding them across actors, and what an operator's
-- actions record on them.
--
-- Recorded by the actions, names only (invariant 11):
--   interrupt_reason  the reason given with the first interrupt that flagged the execution,
--                     beside interrupted_by (sql/006); shown by the result and the timeline
--   retry_of          on an execution started by a retry: the execution id it retries
--   retried_by        who asked for that retry (a principal's key, as interrupted_by)
ALTER TABLE actor_workflow_executions
    ADD COLUMN interrupt_reason text,
    ADD COLUMN retry_of text,
    ADD COLUMN retried_by text;

-- The list is newest first with a keyset cursor on (started_at, routing_key, execution_id):
-- each index below ends with those columns, so a filtered page is one index range read
-- backwards, stopped by the LIMIT, whatever the table's size.
--   no filter, or filters without an index of their own (actor id, key prefix, times)
CREATE INDEX actor_workflow_executions_newest
    ON actor_workflow_executions (started_at, routing_key, execution_id);
--   one tenant's executions of one actor type (and workflow)
CREATE INDEX actor_workflow_executions_by_workflow
    ON actor_workflow_executions (tenant, actor_type, workflow, started_at, routing_key, execution_id);
--   open executions by status: only open rows, so finished history costs this index nothing
CREATE INDEX actor_workflow_executions_open_by_status
    ON actor_workflow_executions (status, started_at, routing_key, execution_id)
    WHERE status <> 'finished';
--   executions that did not succeed, by outcome: what an operator looks for after an incident
CREATE INDEX actor_workflow_executions_unsuccessful
    ON actor_workflow_executions (outcome, started_at, routing_key, execution_id)
    WHERE outcome IS NOT NULL AND outcome <> 'succeeded';
--   blocked executions (a runner left them suspended, and said why)
CREATE INDEX actor_workflow_executions_blocked
    ON actor_workflow_executions (started_at, routing_key, execution_id)
    WHERE blocked_reason IS NOT NULL;
--   the retries of an execution, within its actor
CREATE INDEX actor_workflow_executions_retries
    ON actor_workflow_executions (routing_key, retry_of) WHERE retry_of IS NOT NULL;

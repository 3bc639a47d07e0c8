-- Workflow members: executions owned by actors, their recorded steps, and accepted manifests.
-- An execution id encodes (tenant, actor type, actor id, workflow, key), so (routing_key,
-- execution_id) identifies it; the owner's columns are kept too, for the owner's queries.

CREATE TABLE actor_workflow_executions (
    routing_key   bigint      NOT NULL,
    execution_id  text        NOT NULL,
    tenant        text        NOT NULL,
    actor_type    text        NOT NULL,
    actor_id      text        NOT NULL,
    workflow      text        NOT NULL,
    key           text        NOT NULL,
    manifest_hash text        NOT NULL,
    payload       bytea       NOT NULL,
    -- the principal the execution acts for (names only): restored on every resume
    principal     bytea       NOT NULL,
    -- version markers recorded at start: {"name": value}
    versions      jsonb       NOT NULL DEFAULT '{}',
    -- the owner's events at or below this sequence are behind the execution
    event_cursor  bigint      NOT NULL,
    status        text        NOT NULL CHECK (status IN ('running', 'suspended', 'finished')),
    interrupt     boolean     NOT NULL DEFAULT false,
    -- 'succeeded', 'failed', 'defect', 'interrupted' once finished
    outcome       text,
    result        bytea,
    -- why the last runner left it suspended without running it (an incompatible deploy)
    blocked_reason text,
    started_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    PRIMARY KEY (routing_key, execution_id)
);
CREATE INDEX actor_workflow_executions_open
    ON actor_workflow_executions (routing_key, tenant, actor_type, actor_id)
    WHERE status <> 'finished';
CREATE INDEX actor_workflow_executions_finished
    ON actor_workflow_executions (finished_at) WHERE status = 'finished';
CREATE INDEX actor_workflow_executions_manifest
    ON actor_workflow_executions (actor_type, workflow, manifest_hash) WHERE status <> 'finished';

CREATE TABLE actor_workflow_step (
    routing_key  bigint      NOT NULL,
    execution_id text        NOT NULL,
    step         text        NOT NULL,
    attempt      integer     NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('activity', 'clock', 'wait', 'race', 'version')),
    -- NULL while pending; set exactly once (UPDATE ... WHERE exit IS NULL)
    exit         bytea,
    -- a clock's due time, a wait's deadline: recorded once, never moved by a replay
    due_at       timestamptz,
    -- a wait: the event tag, the cursor it started from, the highest sequence already scanned
    wait_tag     text,
    wait_cursor  bigint,
    scanned      bigint,
    started_at   timestamptz NOT NULL,
    settled_at   timestamptz,
    PRIMARY KEY (routing_key, execution_id, step, attempt)
);
CREATE INDEX actor_workflow_step_pending_waits
    ON actor_workflow_step (routing_key, wait_tag) WHERE kind = 'wait' AND exit IS NULL;

CREATE TABLE actor_workflow_manifests (
    actor_type    text        NOT NULL,
    workflow      text        NOT NULL,
    manifest_hash text        NOT NULL,
    manifest      jsonb       NOT NULL,
    accepted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (actor_type, workflow, manifest_hash)
);

ALTER TABLE actor_deployment
    ADD COLUMN workflow_retention interval NOT NULL DEFAULT interval '7 days';

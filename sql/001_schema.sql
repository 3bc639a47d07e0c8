-- akter's schema: the tables, their indexes and their triggers, as the first release ships them.
--
-- This file is a versioned migration (akter/store/migrate.py): once released it never changes,
-- and every later change of a table is a forward migration of its own (002_name.sql, ...). The
-- functions and procedures are not here: each lives in sql/functions/<name>.sql, and the
-- migrator (re)creates them before the versioned migrations run, so the defaults, checks and
-- triggers below can name them.
--
-- Every actor table's primary key starts with routing_key and carries the full identity
-- (tenant, actor_type, actor_id), so a 64-bit hash collision can never merge two actors.

-- ---------------------------------------------------------------------------------------------
-- The actor kernel: deployment settings, the database clock, actor rows, state, receipts, events.

CREATE TABLE actor_deployment (
    singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    protocol_version   integer NOT NULL,
    retry_window       interval NOT NULL,
    workflow_retention interval NOT NULL DEFAULT interval '7 days'
);
INSERT INTO actor_deployment (protocol_version, retry_window) VALUES (1, interval '24 hours');

-- Durable time is read through akter_now() only. Tests move the offset; every connection and
-- every process sees the same clock because the offset lives here.
CREATE TABLE akter_clock (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    clock_offset interval NOT NULL
);
INSERT INTO akter_clock (clock_offset) VALUES (interval '0');

CREATE TABLE actor_generations (
    routing_key bigint      NOT NULL,
    tenant      text        NOT NULL,
    actor_type  text        NOT NULL,
    actor_id    text        NOT NULL,
    generation  bigint      NOT NULL DEFAULT 0,
    -- bumped by every committed turn; lets a turn detect that another committed while it waited
    version     bigint      NOT NULL DEFAULT 0,
    event_seq   bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT akter_now(),
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id)
);

CREATE TABLE actor_state (
    routing_key bigint      NOT NULL,
    tenant      text        NOT NULL,
    actor_type  text        NOT NULL,
    actor_id    text        NOT NULL,
    state       bytea       NOT NULL,
    updated_at  timestamptz NOT NULL,
    -- the shape (the hash of the state type's fingerprint) the state was written in, so that a
    -- state of an older shape is decoded as that shape and upgraded, never guessed at
    shape       text        NOT NULL,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id)
);
-- the deploy check's count of stored states per shape; turns that keep the shape leave it
-- untouched (HOT updates stay possible)
CREATE INDEX actor_state_shape ON actor_state (actor_type, shape);

CREATE TABLE actor_receipts (
    routing_key  bigint      NOT NULL,
    tenant       text        NOT NULL,
    actor_type   text        NOT NULL,
    actor_id     text        NOT NULL,
    command_id   text        NOT NULL,
    command      text        NOT NULL,
    payload_hash bytea       NOT NULL,
    caller_key   text        NOT NULL,
    -- tagged outcome: {"ok": value} or {"error": {"type": name, "value": fields}}, framed
    outcome      bytea       NOT NULL,
    failed       boolean     NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id, command_id)
);
-- Retention runs per relay over the buckets it owns (bucket = routing_key >> 56), so the expiry
-- scans are led by the bucket: one index descent per owned bucket, and two relays never scan
-- (or lock) each other's rows.
CREATE INDEX actor_receipts_bucket_expiry ON actor_receipts ((routing_key >> 56), expires_at);

CREATE TABLE actor_events (
    routing_key bigint      NOT NULL,
    tenant      text        NOT NULL,
    actor_type  text        NOT NULL,
    actor_id    text        NOT NULL,
    sequence    bigint      NOT NULL,
    tag         text        NOT NULL,
    value       bytea       NOT NULL,
    command_id  text        NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id, sequence)
);
-- every committed event wakes the subscribers of its actor (functions/akter_events_notify.sql)
CREATE TRIGGER actor_events_notify AFTER INSERT ON actor_events
    FOR EACH ROW EXECUTE FUNCTION akter_events_notify();

-- An actor manifest is the shape of an actor type as deployed: the fingerprints of its state
-- type, of the older state types it declares upgrades from, of its event types and of its
-- command payloads (akter.actor.manifest). Every manifest an App opens with, or that
-- `akter workflows check` accepts, is stored here; the check and an App opening its runtime
-- compare their code with the latest one, and look stored state shapes up in all of them.
-- Small and global, like actor_workflow_manifests: a row is never changed once written.
CREATE TABLE actor_manifests (
    actor_type    text        NOT NULL,
    manifest_hash text        NOT NULL,
    manifest      jsonb       NOT NULL,
    accepted_at   timestamptz NOT NULL DEFAULT akter_now(),
    PRIMARY KEY (actor_type, manifest_hash)
);

-- ---------------------------------------------------------------------------------------------
-- The outbox: commands a turn staged for later delivery, and the relay's bucket ownership.
-- An intent's primary key starts with the *sender's* routing key: the relay that owns the
-- sender's bucket delivers it, and the row lives with the actor that staged it.

CREATE TABLE actor_outbox (
    routing_key   bigint      NOT NULL,
    tenant        text        NOT NULL,
    actor_type    text        NOT NULL,
    actor_id      text        NOT NULL,
    -- a command id (v1.<issued>.<expires>.<nonce>); the receiver's turn runs under it
    intent_id     text        NOT NULL,
    -- routing_key >> 56, stored so that the due scan is one index range per owned bucket
    bucket        smallint    NOT NULL,
    -- on the database clock (akter_now()); a claim pushes it forward by the delivery lease
    due_at        timestamptz NOT NULL,
    -- set for keyed intents (timers): at most one pending intent per actor and key
    timer_key     text,
    -- the target is in the sender's tenant: tenants never address each other
    target_type   text        NOT NULL,
    target_id     text        NOT NULL,
    command       text        NOT NULL,
    payload       bytea       NOT NULL,
    -- the System caller the delivery runs as (source, sender ref, on_behalf_of): names only
    caller        bytea       NOT NULL,
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text,
    -- the token of the claim in progress; a keyed replacement clears it
    claim         uuid,
    claimed_by    text,
    created_at    timestamptz NOT NULL,
    -- parked: the relay gave up delivering it (see below)
    parked_at     timestamptz,
    parked_reason text,
    -- the W3C traceparent (and tracestate) of the span that staged the intent, as a small JSON
    -- object of those header names to their values; the relay delivers it inside that trace.
    -- Ids only, never baggage or attributes (invariant 11). NULL when no tracing was configured.
    trace_context text,
    PRIMARY KEY (routing_key, tenant, actor_type, actor_id, intent_id),
    -- Parked intents: rows the relay gave up delivering (their attempts ran out, or their
    -- receiver can never accept them), kept for an operator to retry or delete
    -- (akter/outbox/admin.py). A parked row's due time is a sentinel far in the future, so the
    -- due scan — an index range `due_at <= akter_now()` per owned bucket — and the next-due
    -- probe never read it: a parked row costs the relay nothing.
    CONSTRAINT actor_outbox_parked_not_due CHECK (parked_at IS NULL OR due_at = akter_parked_due())
);

CREATE UNIQUE INDEX actor_outbox_timer_key
    ON actor_outbox (routing_key, tenant, actor_type, actor_id, timer_key)
    WHERE timer_key IS NOT NULL;

CREATE INDEX actor_outbox_due ON actor_outbox (bucket, due_at);

-- Operators address a parked intent by its id alone (`akter outbox retry ID`), and list parked
-- rows across every actor: a small partial index holds only the parked rows.
CREATE INDEX actor_outbox_parked ON actor_outbox (intent_id) WHERE parked_at IS NOT NULL;

-- Anything that gives a parked row a due time again un-parks it (functions/akter_outbox_unpark.sql).
CREATE TRIGGER actor_outbox_unpark
    BEFORE UPDATE OF due_at ON actor_outbox
    FOR EACH ROW
    WHEN (OLD.parked_at IS NOT NULL AND NEW.due_at IS DISTINCT FROM OLD.due_at)
    EXECUTE FUNCTION akter_outbox_unpark();

-- Relay processes sharing this database. Ownership leases run on the real clock
-- (clock_timestamp()), never on akter_now(): tests move akter_now() by days, and a lease must
-- not expire because a test jumped the durable clock.
-- These two tables are coordination state, not actor rows: small, global, never distributed.
CREATE TABLE akter_relay_members (
    member_id    text        PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at   timestamptz NOT NULL
);

CREATE TABLE akter_relay_buckets (
    bucket     smallint    PRIMARY KEY CHECK (bucket BETWEEN -128 AND 127),
    owner      text,
    expires_at timestamptz
);
INSERT INTO akter_relay_buckets (bucket) SELECT generate_series(-128, 127);

-- Schedules (akter.outbox.schedules): one row per schedule, kept by the turns on its target
-- actor that arm, fire, pause and delete it, under that actor's row lock. The timer itself is
-- the actor's keyed outbox intent 'akter.schedule:<name>:<digest>'; this row is what
-- `akter schedules list` shows and what a fire checks that its schedule is still the one it
-- was armed for (status, digest).
CREATE TABLE akter_schedules (
    routing_key  bigint      NOT NULL,
    tenant       text        NOT NULL,
    name         text        NOT NULL,
    actor_type   text        NOT NULL,
    actor_id     text        NOT NULL,
    digest       text        NOT NULL,
    spec         bytea       NOT NULL,
    declared     boolean     NOT NULL,
    status       text        NOT NULL CHECK (status IN ('active', 'paused')),
    next_slot_at timestamptz,
    last_slot_at timestamptz,
    fired        bigint      NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (routing_key, tenant, name)
);
-- names are unique per tenant, so an operator addresses a schedule by tenant and name
CREATE UNIQUE INDEX akter_schedules_name ON akter_schedules (tenant, name);

-- ---------------------------------------------------------------------------------------------
-- Workflow members: executions owned by actors, their recorded steps, their ended runs, and
-- accepted manifests. An execution id encodes (tenant, actor type, actor id, workflow, key), so
-- (routing_key, execution_id) identifies it; the owner's columns are kept too, for the owner's
-- queries.

CREATE TABLE actor_workflow_executions (
    routing_key          bigint      NOT NULL,
    execution_id         text        NOT NULL,
    tenant               text        NOT NULL,
    actor_type           text        NOT NULL,
    actor_id             text        NOT NULL,
    workflow             text        NOT NULL,
    key                  text        NOT NULL,
    manifest_hash        text        NOT NULL,
    payload              bytea       NOT NULL,
    -- the principal the execution acts for (names only): restored on every resume
    principal            bytea       NOT NULL,
    -- version markers recorded at start: {"name": value}
    versions             jsonb       NOT NULL DEFAULT '{}',
    -- the owner's events at or below this sequence are behind the execution
    event_cursor         bigint      NOT NULL,
    -- paused and needs_attention: an execution rests there until a person acts (below)
    status               text        NOT NULL CONSTRAINT actor_workflow_executions_status_check
        CHECK (status IN ('running', 'suspended', 'finished', 'paused', 'needs_attention')),
    interrupt            boolean     NOT NULL DEFAULT false,
    -- 'succeeded', 'failed', 'defect', 'interrupted' once finished
    outcome              text,
    result               bytea,
    -- why the last runner left it suspended without running it (an incompatible deploy)
    blocked_reason       text,
    started_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    finished_at          timestamptz,
    -- Recorded by the operator's actions (akter.operate), names only (invariant 11):
    --   interrupted_by    who asked for the interrupt, recorded by the first interrupt turn that
    --                     flagged it: the principal's key ('user:<subject>', 'anonymous'), or
    --                     'system:<source>' for akter's own callers acting for nobody
    --   interrupt_reason  the reason given with that first interrupt
    --   retry_of          on an execution started by a retry: the execution id it retries
    --   retried_by        who asked for that retry (a principal's key, as interrupted_by)
    interrupted_by       text,
    interrupt_reason     text,
    retry_of             text,
    retried_by           text,
    -- the trace context (as actor_outbox.trace_context) of the span that started the execution,
    -- copied to the execution's timer each time it is armed, so every resume and pass joins the
    -- trace the execution started in, in whichever process
    trace_context        text,
    -- Needs attention and pause: two statuses an execution rests in until a person acts.
    --   needs_attention  an activity attempt whose outcome cannot be known (invariant 8;
    --                    declared on_unknown="attention") is left pending, or the execution's
    --                    passes failed failed_pass_limit times in a row; an operator resolves it
    --   paused           an operator paused it; it finished its in-flight attempts and holds
    -- Both keep the execution's position: its steps, their due times and the events after its
    -- cursor are in the rows, not in the timer. A timer that fires while it rests (a sleep
    -- coming due, an event waking a wait) is delivered as a resume that changes nothing (the
    -- resume turn leaves these statuses alone), and resuming or resolving arms the timer due
    -- now, so the next pass replays and applies whatever came due meanwhile.
    --   paused_at, paused_by, pause_reason   a pause asked for (paused_at set) and by whom, kept
    --                                        until it is resumed; the first asker is kept
    --   attention_*                          why it needs attention, since when, and the attempt
    --                                        that waits for a decision (NULL step: the passes
    --                                        failed)
    --   failed_passes, pass_errors           passes that failed in a row (reset by a pass that
    --                                        ends well), and their errors: [{"at", "error"}]
    --   resolved_by, resolution              the last resolution: who, and what they decided;
    --                                        the step's exit carries "resolved_by" too
    paused_at            timestamptz,
    paused_by            text,
    pause_reason         text,
    attention_reason     text,
    attention_at         timestamptz,
    attention_step       text,
    attention_scope      text,
    attention_occurrence integer,
    attention_attempt    integer,
    failed_passes        integer     NOT NULL DEFAULT 0,
    pass_errors          jsonb,
    resolved_by          text,
    resolution           text,
    -- Runs. An execution keeps its id for life, but its history may be cut into runs: a body
    -- that calls wf.continue_as_new(input) ends its run and starts the next (akter_wf_continue),
    -- and a keyed start of a finished execution under the NEW_RUN key policy starts one too
    -- (akter_wf_new_run). Either way the run's steps are deleted, so every pass loads only the
    -- run it replays, and one row per ended run is kept in actor_workflow_runs.
    --   run_number      1 for the first run, one more per run started after it
    --   run_started_at  when the current run started (NULL: with the execution, started_at)
    run_number           integer     NOT NULL DEFAULT 1,
    run_started_at       timestamptz,
    -- when the execution is interrupted if it has not finished by then (start(..., timeout=),
    -- or the workflow's declared timeout). The deadline itself is a keyed outbox intent of the
    -- owner, timer key 'wfdl:<execution id>', whose command is the member's internal
    -- akter.wf.deadline:<workflow>: durable, so it fires while the execution is suspended and
    -- after any relay dies, and delivered as an interrupt turn like any other. It is deleted
    -- when the execution finishes (trigger below), so a finished execution leaves none behind.
    deadline_at          timestamptz,
    -- a child execution (docs/children.md): its parent's execution id and actor
    parent_id            text,
    parent_type          text,
    parent_actor_id      text,
    PRIMARY KEY (routing_key, execution_id)
);
CREATE INDEX actor_workflow_executions_open
    ON actor_workflow_executions (routing_key, tenant, actor_type, actor_id)
    WHERE status <> 'finished';
CREATE INDEX actor_workflow_executions_manifest
    ON actor_workflow_executions (actor_type, workflow, manifest_hash) WHERE status <> 'finished';
-- retention, per owned bucket (as actor_receipts_bucket_expiry)
CREATE INDEX actor_workflow_executions_bucket_finished
    ON actor_workflow_executions ((routing_key >> 56), finished_at) WHERE status = 'finished';
-- The operator's list is newest first with a keyset cursor on (started_at, routing_key,
-- execution_id): each index below ends with those columns, so a filtered page is one index
-- range read backwards, stopped by the LIMIT, whatever the table's size.
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

-- The triggers on an execution's status (each function's file says what it does). PostgreSQL
-- fires the triggers of one event in the order of their names.
--   BEFORE: a suspension asked to pause is written paused; a finish clears the pause
CREATE TRIGGER actor_workflow_executions_paused
    BEFORE UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW
    WHEN (NEW.status = 'suspended' AND NEW.paused_at IS NOT NULL AND NOT NEW.interrupt)
    EXECUTE FUNCTION akter_wf_paused_status();
CREATE TRIGGER actor_workflow_executions_finished_unpaused
    BEFORE UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW
    WHEN (NEW.status = 'finished' AND NEW.paused_at IS NOT NULL)
    EXECUTE FUNCTION akter_wf_finished_unpaused();
--   AFTER: a finish deletes the deadline's intent, resumes the parent, interrupts the children
CREATE TRIGGER actor_workflow_executions_deadline_finished
    AFTER UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW WHEN (NEW.status = 'finished' AND OLD.status <> 'finished' AND NEW.deadline_at IS NOT NULL)
    EXECUTE FUNCTION akter_wf_deadline_finished();
CREATE TRIGGER actor_workflow_child_finished
    AFTER UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW
    WHEN (NEW.status = 'finished' AND OLD.status <> 'finished'
          AND (NEW.parent_id IS NOT NULL OR NEW.interrupt))
    EXECUTE FUNCTION akter_wf_child_finished();
--   retention deletes an execution with its steps; its ended runs go with it
CREATE TRIGGER actor_workflow_executions_runs_pruned
    AFTER DELETE ON actor_workflow_executions
    FOR EACH ROW WHEN (OLD.run_number > 1)
    EXECUTE FUNCTION akter_wf_runs_pruned();

-- An execution's recorded steps. Each await of a declared step is a new occurrence of it: a
-- loop over one activity runs it once per iteration. An occurrence is identified by
--   scope      the branch the await ran in: '' for the body, '<k>.<i>/' for branch i of the
--              k-th race or all opened by the enclosing branch (nested: '2.0/1.1/');
--   occurrence the 1-based count of awaits of this step in that scope, in the body's own order.
-- Numbering per scope keeps replay exact when parallel branches finish in another order than
-- they did the first time, and when a race's losers are not run again on replay.
CREATE TABLE actor_workflow_step (
    routing_key    bigint      NOT NULL,
    execution_id   text        NOT NULL,
    step           text        NOT NULL,
    attempt        integer     NOT NULL,
    kind           text        NOT NULL CONSTRAINT actor_workflow_step_kind_check
        CHECK (kind IN ('activity', 'clock', 'wait', 'race', 'version', 'child')),
    -- NULL while pending; set exactly once (UPDATE ... WHERE exit IS NULL)
    exit           bytea,
    -- a clock's due time, a wait's deadline: recorded once, never moved by a replay
    due_at         timestamptz,
    -- a wait: the event tag, the cursor it started from, the highest sequence already scanned
    wait_tag       text,
    wait_cursor    bigint,
    scanned        bigint,
    started_at     timestamptz NOT NULL,
    settled_at     timestamptz,
    scope          text        NOT NULL DEFAULT '',
    occurrence     integer     NOT NULL DEFAULT 1,
    -- a child step row (kind 'child'): the child's execution id, its actor (routing key, type,
    -- id) and workflow, and what the child does when its parent is interrupted ('interrupt' or
    -- 'run_on')
    child_id       text,
    child_rk       bigint,
    child_type     text,
    child_actor_id text,
    child_workflow text,
    child_policy   text,
    PRIMARY KEY (routing_key, execution_id, step, scope, occurrence, attempt)
);
CREATE INDEX actor_workflow_step_pending_waits
    ON actor_workflow_step (routing_key, wait_tag) WHERE kind = 'wait' AND exit IS NULL;
-- the suspension's re-check and `akter inspect`'s progress read only the open children
CREATE INDEX actor_workflow_step_open_children
    ON actor_workflow_step (routing_key, execution_id)
    WHERE kind = 'child' AND exit IS NULL;

-- One row per ended run of an execution: the link from one run to the next that the timeline
-- shows.
CREATE TABLE actor_workflow_runs (
    routing_key   bigint      NOT NULL,
    execution_id  text        NOT NULL,
    run_number    integer     NOT NULL,
    payload       bytea       NOT NULL,
    manifest_hash text        NOT NULL,
    -- 'continued' (continue-as-new), or the outcome the run finished with before a new run
    outcome       text        NOT NULL,
    result        bytea,
    -- how many step rows the run had recorded when it ended (they are deleted with it)
    steps         integer     NOT NULL,
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz NOT NULL,
    PRIMARY KEY (routing_key, execution_id, run_number)
);

CREATE TABLE actor_workflow_manifests (
    actor_type    text        NOT NULL,
    workflow      text        NOT NULL,
    manifest_hash text        NOT NULL,
    manifest      jsonb       NOT NULL,
    accepted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (actor_type, workflow, manifest_hash)
);

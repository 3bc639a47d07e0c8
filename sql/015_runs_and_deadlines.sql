-- Runs of an execution, and execution deadlines.
--
-- Runs. An execution keeps its id for life, but its history may be cut into runs: a body that
-- calls wf.continue_as_new(input) ends its run and starts the next (akter_wf_continue), and a
-- keyed start of a finished execution under the NEW_RUN key policy starts one too
-- (akter_wf_new_run). Either way the run's steps are deleted, so every pass loads only the run
-- it replays, and one row per ended run is kept in actor_workflow_runs: the link from one run
-- to the next that the timeline shows.
--   run_number      1 for the first run, one more per run started after it
--   run_started_at  when the current run started (NULL: with the execution, started_at)
--
-- Deadlines. deadline_at is when the execution is interrupted if it has not finished by then
-- (start(..., timeout=), or the workflow's declared timeout). The deadline itself is a keyed
-- outbox intent of the owner, timer key 'wfdl:<execution id>', whose command is the member's
-- internal akter.wf.deadline:<workflow>: durable, so it fires while the execution is suspended
-- and after any relay dies, and delivered as an interrupt turn like any other. It is deleted
-- when the execution finishes (the trigger below), so a finished execution leaves none behind.
ALTER TABLE actor_workflow_executions
    ADD COLUMN run_number integer NOT NULL DEFAULT 1,
    ADD COLUMN run_started_at timestamptz,
    ADD COLUMN deadline_at timestamptz;

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

-- The ended run's row, then its steps deleted (rows of a run are never read again).
CREATE FUNCTION akter_wf_end_run(p_rk bigint, p_eid text, p_outcome text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO actor_workflow_runs (routing_key, execution_id, run_number, payload, manifest_hash,
                                     outcome, result, steps, started_at, ended_at)
    SELECT x.routing_key, x.execution_id, x.run_number, x.payload, x.manifest_hash,
           coalesce(p_outcome, x.outcome), CASE WHEN p_outcome IS NULL THEN x.result END,
           (SELECT count(*) FROM actor_workflow_step s
             WHERE s.routing_key = p_rk AND s.execution_id = p_eid),
           coalesce(x.run_started_at, x.started_at), akter_now()
      FROM actor_workflow_executions x
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM actor_workflow_step s WHERE s.routing_key = p_rk AND s.execution_id = p_eid;
    RETURN true;
END
$$;

-- Continue as new, under the fence, after settling what the pass ran (sql/010): the run ends
-- and the execution row becomes the next run, keeping its id, principal, interrupt flag and
-- event cursor. Its timer becomes a recovery timer p_recovery ahead: the pass that continued
-- runs the next run's first pass itself. Nothing is written for a finished execution.
CREATE FUNCTION akter_wf_continue(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_payload bytea, p_manifest_hash text, p_versions jsonb,
    p_recovery interval,
    OUT fenced boolean, OUT settled integer, OUT continued boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    continued := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM actor_workflow_executions x
                    WHERE x.routing_key = p_rk AND x.execution_id = p_eid AND x.status <> 'finished') THEN
        RETURN;
    END IF;
    PERFORM akter_wf_end_run(p_rk, p_eid, 'continued');
    UPDATE actor_workflow_executions x
       SET payload = p_payload, manifest_hash = p_manifest_hash, versions = p_versions,
           run_number = x.run_number + 1, run_started_at = akter_now(), history_format = 2,
           status = 'running', blocked_reason = NULL, updated_at = akter_now()
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, akter_now() + p_recovery);
    continued := true;
END
$$;

-- A new run of a finished execution, in a start turn that holds the owner's row lock (the
-- NEW_RUN key policy): the finished run is kept in actor_workflow_runs with its outcome and
-- result, and the execution starts again as a fresh start would — the new input, principal,
-- manifest and markers, the cursor at the owner's event sequence, no interrupt, no result —
-- with its timer due now. Returns false (nothing written) unless the execution is finished.
CREATE FUNCTION akter_wf_new_run(
    p_rk bigint, p_eid text, p_bucket smallint, p_payload bytea, p_principal bytea,
    p_manifest_hash text, p_versions jsonb, p_trace text
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM actor_workflow_executions x
                    WHERE x.routing_key = p_rk AND x.execution_id = p_eid AND x.status = 'finished') THEN
        RETURN false;
    END IF;
    PERFORM akter_wf_end_run(p_rk, p_eid, NULL);
    UPDATE actor_workflow_executions x
       SET payload = p_payload, principal = p_principal, manifest_hash = p_manifest_hash,
           versions = p_versions, run_number = x.run_number + 1, run_started_at = akter_now(),
           history_format = 2, status = 'running', interrupt = false, interrupted_by = NULL,
           interrupt_reason = NULL, outcome = NULL, result = NULL, finished_at = NULL,
           blocked_reason = NULL, deadline_at = NULL, trace_context = p_trace, updated_at = akter_now(),
           event_cursor = (SELECT g.event_seq FROM actor_generations g
                            WHERE g.routing_key = x.routing_key AND g.tenant = x.tenant
                              AND g.actor_type = x.actor_type AND g.actor_id = x.actor_id)
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, NULL);
    RETURN true;
END
$$;

-- A finished execution's deadline intent is deleted with the finish, in its transaction.
CREATE FUNCTION akter_wf_deadline_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM actor_outbox o
     WHERE o.routing_key = NEW.routing_key AND o.tenant = NEW.tenant AND o.actor_type = NEW.actor_type
       AND o.actor_id = NEW.actor_id AND o.timer_key = 'wfdl:' || NEW.execution_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER actor_workflow_executions_deadline_finished
    AFTER UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW WHEN (NEW.status = 'finished' AND OLD.status <> 'finished' AND NEW.deadline_at IS NOT NULL)
    EXECUTE FUNCTION akter_wf_deadline_finished();

-- Retention deletes an execution with its steps; its ended runs go with it.
CREATE FUNCTION akter_wf_runs_pruned() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM actor_workflow_runs r
     WHERE r.routing_key = OLD.routing_key AND r.execution_id = OLD.execution_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER actor_workflow_executions_runs_pruned
    AFTER DELETE ON actor_workflow_executions
    FOR EACH ROW WHEN (OLD.run_number > 1)
    EXECUTE FUNCTION akter_wf_runs_pruned();

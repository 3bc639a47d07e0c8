-- Child executions: a workflow body starts a workflow member of another actor and awaits it
-- (akter/workflow/children.py, docs/children.md).
--
-- Nothing here writes one actor's rows on another's behalf (invariant 1): every crossing goes
-- through the outbox and arrives as a turn (invariant 4).
--
--   parent pass  --(fenced, parent's lock)-->  child step row + start intent in the parent's outbox
--   relay        --(turn on the child actor)-> the child's execution row, linked to its parent
--   child finish --(trigger, child's lock)-->  a resume intent for the parent in the child's outbox
--   parent pass  --(fenced, parent's lock)-->  the child's result copied into the child step row
--   parent finish, interrupted --(trigger)-->  an interrupt intent for each child still running
--
-- A parent that suspends while one of its pending children has finished would miss the resume
-- that finish sent if the resume's turn ran before the suspension (the suspension would delete
-- the timer the resume armed): akter_wf_suspend_children re-checks after the row lock is held,
-- in a statement of its own (invariant 6), and refuses the suspension so the pass reads it.

ALTER TABLE actor_workflow_executions
    ADD COLUMN parent_id text,
    ADD COLUMN parent_type text,
    ADD COLUMN parent_actor_id text;

-- a child step row (kind 'child'): the child's execution id, its actor (routing key, type, id)
-- and workflow, and what the child does when its parent is interrupted ('interrupt' or 'run_on')
ALTER TABLE actor_workflow_step
    ADD COLUMN child_id text,
    ADD COLUMN child_rk bigint,
    ADD COLUMN child_type text,
    ADD COLUMN child_actor_id text,
    ADD COLUMN child_workflow text,
    ADD COLUMN child_policy text;

ALTER TABLE actor_workflow_step DROP CONSTRAINT actor_workflow_step_kind_check;
ALTER TABLE actor_workflow_step ADD CONSTRAINT actor_workflow_step_kind_check
    CHECK (kind IN ('activity', 'clock', 'wait', 'race', 'version', 'child'));

-- the suspension's re-check and `akter inspect`'s progress read only the open children
CREATE INDEX actor_workflow_step_open_children
    ON actor_workflow_step (routing_key, execution_id)
    WHERE kind = 'child' AND exit IS NULL;

-- Settle what the pass ran, then record a child's start: its step row, pending until the
-- child's result is copied into it, and the start intent (an internal command of the child's
-- actor) in the parent's outbox, due now. A replayed start finds its row and writes nothing.
CREATE FUNCTION akter_wf_start_child(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_step text, p_scope text, p_occurrence integer,
    p_child_id text, p_child_rk bigint, p_child_type text, p_child_actor_id text,
    p_child_workflow text, p_child_policy text, p_command text, p_payload bytea, p_caller bytea,
    p_trace text,
    OUT fenced boolean, OUT settled integer, OUT started boolean, OUT started_ms bigint
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    started := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    INSERT INTO actor_workflow_step AS s (routing_key, execution_id, step, scope, occurrence, attempt,
                                          kind, started_at, child_id, child_rk, child_type,
                                          child_actor_id, child_workflow, child_policy)
    VALUES (p_rk, p_eid, p_step, p_scope, p_occurrence, 1, 'child', akter_now(), p_child_id,
            p_child_rk, p_child_type, p_child_actor_id, p_child_workflow, p_child_policy)
    ON CONFLICT (routing_key, execution_id, step, scope, occurrence, attempt) DO NOTHING;
    started := FOUND;
    SELECT (extract(epoch FROM s.started_at) * 1000)::bigint INTO started_ms
      FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step AND s.scope = p_scope
       AND s.occurrence = p_occurrence AND s.attempt = 1;
    IF started THEN
        INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket,
                                  due_at, timer_key, target_type, target_id, command, payload,
                                  caller, created_at, trace_context)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id, akter_mint_intent_id(NULL), p_bucket,
                akter_now(), NULL, p_child_type, p_child_actor_id, p_command, p_payload, p_caller,
                akter_now(), p_trace);
        PERFORM pg_notify('akter_outbox', p_bucket::text);
    END IF;
END
$$;

-- akter_wf_suspend_settled (sql/010), unless a pending child of the execution has finished:
-- then only the pass's settles are written and the suspension is refused (unscanned), so the
-- pass goes on and records the child's result. The check is a statement that starts after the
-- fence's lock is held, so it sees the finish of any child whose resume the lock waited for.
CREATE FUNCTION akter_wf_suspend_children(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_due timestamptz, p_abandon text[],
    p_knows_interrupt boolean, p_abandoned bytea, p_notify_within interval,
    OUT fenced boolean, OUT settled integer, OUT interrupt boolean, OUT unscanned boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    interrupt := false;
    unscanned := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF EXISTS (
        SELECT 1 FROM actor_workflow_step s
          JOIN actor_workflow_executions c
            ON c.routing_key = s.child_rk AND c.execution_id = s.child_id
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.kind = 'child'
           AND s.exit IS NULL AND c.status = 'finished') THEN
        unscanned := true;
        RETURN;
    END IF;
    SELECT s.fenced, s.interrupt, s.unscanned INTO fenced, interrupt, unscanned
      FROM akter_wf_suspend_settled(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                    p_bucket, NULL, NULL, NULL, NULL, NULL, p_due, p_abandon,
                                    p_knows_interrupt, p_abandoned, p_notify_within) s;
END
$$;

-- An execution finishing (in its own finish, under its own actor's lock):
-- * a child resumes its parent: a resume intent in the child's outbox, due now. The parent's
--   pass reads the child's result; a parent that finished first ignores it (the resume finds
--   nothing open);
-- * an interrupted parent interrupts every child it started that is still pending in its
--   history and whose policy is 'interrupt': an interrupt intent in the parent's outbox per
--   child. This runs before akter_wf_finish settles the pending steps (it updates the execution
--   row first). A child that finished meanwhile ignores the interrupt.
CREATE FUNCTION akter_wf_child_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bucket smallint := (NEW.routing_key >> 56)::smallint;
    sent integer := 0;
BEGIN
    IF NEW.parent_id IS NOT NULL THEN
        INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket,
                                  due_at, timer_key, target_type, target_id, command, payload,
                                  caller, created_at, trace_context)
        VALUES (NEW.routing_key, NEW.tenant, NEW.actor_type, NEW.actor_id,
                akter_mint_intent_id(NULL), bucket, akter_now(), NULL, NEW.parent_type,
                NEW.parent_actor_id, 'akter.wf.resume',
                '\x00'::bytea || convert_to(json_build_object('execution_id', NEW.parent_id)::text, 'UTF8'),
                NEW.principal, akter_now(), NEW.trace_context);
        sent := 1;
    END IF;
    IF NEW.interrupt THEN
        INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket,
                                  due_at, timer_key, target_type, target_id, command, payload,
                                  caller, created_at, trace_context)
        SELECT NEW.routing_key, NEW.tenant, NEW.actor_type, NEW.actor_id,
               akter_mint_intent_id(NULL), bucket, akter_now(), NULL,
               s.child_type, s.child_actor_id, 'akter.wf.interrupt:' || s.child_workflow,
               '\x00'::bytea || convert_to(json_build_object(
                   'execution_id', s.child_id,
                   'reason', 'its parent ' || NEW.execution_id || ' was interrupted')::text, 'UTF8'),
               NEW.principal, akter_now(), NEW.trace_context
          FROM actor_workflow_step s
         WHERE s.routing_key = NEW.routing_key AND s.execution_id = NEW.execution_id
           AND s.kind = 'child' AND s.exit IS NULL AND s.child_policy = 'interrupt';
        IF FOUND THEN
            sent := 1;
        END IF;
    END IF;
    IF sent > 0 THEN
        PERFORM pg_notify('akter_outbox', bucket::text);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER actor_workflow_child_finished
    AFTER UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW
    WHEN (NEW.status = 'finished' AND OLD.status <> 'finished'
          AND (NEW.parent_id IS NOT NULL OR NEW.interrupt))
    EXECUTE FUNCTION akter_wf_child_finished();

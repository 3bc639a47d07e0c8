-- Step occurrences, and the pass transitions as lock-first PL/pgSQL functions.
--
-- Occurrences. Each await of a declared step is a new occurrence of it: a loop over one
-- activity runs it once per iteration. An occurrence is identified by
--   scope      the branch the await ran in: '' for the body, '<k>.<i>/' for branch i of the
--              k-th race or all opened by the enclosing branch (nested: '2.0/1.1/');
--   occurrence the 1-based count of awaits of this step in that scope, in the body's own order.
-- Numbering per scope keeps replay exact when parallel branches finish in another order than
-- they did the first time, and when a race's losers are not run again on replay.
-- Rows recorded before this migration are occurrence 1 of the body: exactly what they were.
--
-- Transitions. A decision taken under the fence (suspend, a wait's timeout, a settle's
-- fallback, finish) must see the commit of the turn whose row lock it waited for. In READ
-- COMMITTED a statement that waited for a row lock re-checks only that row; its other
-- subqueries keep their old snapshot. So each transition is a function that takes the fence in
-- its own statement and decides in later statements (each takes a fresh snapshot), still one
-- round trip. See invariant 6 in DESIGN.md.

ALTER TABLE actor_workflow_step
    ADD COLUMN scope text NOT NULL DEFAULT '',
    ADD COLUMN occurrence integer NOT NULL DEFAULT 1;

-- How an execution's steps are keyed. 1: before occurrences — every await of a step name is the
-- one row (step, '', 1), as the engine that recorded it replayed it; executions open when this
-- migration runs keep that until they finish (invariant 7: replay what was recorded, as it was
-- recorded). 2: by scope and occurrence. New executions start at 2.
ALTER TABLE actor_workflow_executions ADD COLUMN history_format smallint NOT NULL DEFAULT 1;
ALTER TABLE actor_workflow_executions ALTER COLUMN history_format SET DEFAULT 2;
ALTER TABLE actor_workflow_step DROP CONSTRAINT actor_workflow_step_pkey;
ALTER TABLE actor_workflow_step
    ADD PRIMARY KEY (routing_key, execution_id, step, scope, occurrence, attempt);

-- A command id minted on the database clock: v1.<issued ms>.<expires ms>.<nonce>, expiring one
-- retry window after p_due (NULL: now).
CREATE FUNCTION akter_mint_intent_id(p_due timestamptz) RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT 'v1.' || (extract(epoch FROM akter_now()) * 1000)::bigint || '.'
           || ((extract(epoch FROM coalesce(p_due, akter_now())) * 1000)::bigint
               + (SELECT (extract(epoch FROM retry_window) * 1000)::bigint FROM actor_deployment))
           || '.' || md5(random()::text || clock_timestamp()::text)
$$;

-- The fence: lock the owner row, only while p_generation still holds it. True when held.
CREATE FUNCTION akter_wf_fence(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint
) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id AND g.generation = p_generation
       FOR UPDATE;
    RETURN FOUND;
END
$$;

-- Arm (insert or replace) an execution's keyed timer at p_due (NULL: now), as its resume.
CREATE FUNCTION akter_wf_arm(p_rk bigint, p_eid text, p_bucket smallint, p_due timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at,
                              timer_key, target_type, target_id, command, payload, caller, created_at)
    SELECT x.routing_key, x.tenant, x.actor_type, x.actor_id, akter_mint_intent_id(p_due), p_bucket,
           coalesce(p_due, akter_now()), 'wf:' || x.execution_id, x.actor_type, x.actor_id,
           'akter.wf.resume',
           '\x00'::bytea || convert_to(json_build_object('execution_id', x.execution_id)::text, 'UTF8'),
           x.principal, akter_now()
      FROM actor_workflow_executions x
     WHERE x.routing_key = p_rk AND x.execution_id = p_eid
    ON CONFLICT (routing_key, tenant, actor_type, actor_id, timer_key) WHERE timer_key IS NOT NULL
    DO UPDATE SET intent_id = excluded.intent_id, due_at = excluded.due_at, payload = excluded.payload,
                  caller = excluded.caller, attempts = 0, last_error = NULL, claim = NULL,
                  claimed_by = NULL, created_at = excluded.created_at;
END
$$;

-- Suspend, or refuse to. Pending waits and clocks of abandoned branches (p_abandon: scope
-- prefixes of the branches a race or an all gave up) are settled as abandoned first, so they
-- wake nothing. Refused (nothing else written) when an interrupt the pass does not know of is
-- pending, or a live wait has an event it has not scanned. Otherwise the execution is
-- suspended and its timer armed at p_due, or deleted when nothing is due (p_due NULL).
CREATE FUNCTION akter_wf_suspend(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_due timestamptz, p_abandon text[], p_knows_interrupt boolean,
    p_abandoned bytea, p_notify_within interval,
    OUT fenced boolean, OUT interrupt boolean, OUT unscanned boolean
)
LANGUAGE plpgsql AS $$
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    interrupt := false;
    unscanned := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF cardinality(p_abandon) > 0 THEN
        UPDATE actor_workflow_step s SET exit = p_abandoned, settled_at = akter_now()
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.exit IS NULL
           AND s.kind IN ('wait', 'clock')
           AND EXISTS (SELECT 1 FROM unnest(p_abandon) a(prefix) WHERE starts_with(s.scope, a.prefix));
    END IF;
    SELECT e.interrupt AND NOT p_knows_interrupt INTO interrupt
      FROM actor_workflow_executions e
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid;
    unscanned := EXISTS (
        SELECT 1 FROM actor_workflow_step s
          JOIN actor_events ev
            ON ev.routing_key = s.routing_key AND ev.tenant = p_tenant
           AND ev.actor_type = p_actor_type AND ev.actor_id = p_actor_id
           AND ev.tag = s.wait_tag AND ev.sequence > s.scanned
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.kind = 'wait'
           AND s.exit IS NULL);
    IF interrupt OR unscanned THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET status = 'suspended', updated_at = akter_now(), blocked_reason = NULL
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid AND e.status <> 'finished';
    IF p_due IS NULL THEN
        DELETE FROM actor_outbox o
         WHERE o.routing_key = p_rk AND o.tenant = p_tenant AND o.actor_type = p_actor_type
           AND o.actor_id = p_actor_id AND o.timer_key = 'wf:' || p_eid;
    ELSE
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, p_due);
        IF p_due <= akter_now() + p_notify_within THEN
            -- a timer due soon must not wait for the relay's next poll
            PERFORM pg_notify('akter_outbox', p_bucket::text);
        END IF;
    END IF;
END
$$;

-- Settle an activity attempt exactly once; the loser of a settle race reads the winner's exit.
CREATE FUNCTION akter_wf_settle(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_step text, p_scope text, p_occurrence integer, p_attempt integer, p_exit bytea,
    OUT fenced boolean, OUT exit bytea
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    IF NOT fenced THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_step s SET exit = p_exit, settled_at = akter_now()
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = p_attempt
       AND s.exit IS NULL;
    SELECT s.exit INTO exit FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = p_attempt;
END
$$;

-- Settle a wait with a match (advancing the execution's cursor) or with its timeout. A timeout
-- is refused while an event of the wait's tag stamped at or before the deadline lies beyond
-- p_scanned: that event may match and wins the race with the timeout. p_scanned always
-- advances the scanned mark, settled or not.
CREATE FUNCTION akter_wf_settle_wait(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_step text, p_scope text, p_occurrence integer, p_tag text, p_exit bytea,
    p_scanned bigint, p_timeout boolean,
    OUT fenced boolean, OUT settled boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    deadline timestamptz;
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    settled := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    SELECT s.due_at INTO deadline FROM actor_workflow_step s
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1;
    IF p_timeout AND EXISTS (
        SELECT 1 FROM actor_events ev
         WHERE ev.routing_key = p_rk AND ev.tenant = p_tenant AND ev.actor_type = p_actor_type
           AND ev.actor_id = p_actor_id AND ev.tag = p_tag AND ev.sequence > p_scanned
           AND ev.created_at <= deadline) THEN
        UPDATE actor_workflow_step s SET scanned = greatest(s.scanned, p_scanned)
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
           AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1;
        RETURN;
    END IF;
    UPDATE actor_workflow_step s
       SET exit = p_exit, settled_at = akter_now(), scanned = greatest(s.scanned, p_scanned)
     WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.step = p_step
       AND s.scope = p_scope AND s.occurrence = p_occurrence AND s.attempt = 1 AND s.exit IS NULL;
    settled := FOUND;
    IF settled AND NOT p_timeout THEN
        UPDATE actor_workflow_executions x SET event_cursor = greatest(x.event_cursor, p_scanned)
         WHERE x.routing_key = p_rk AND x.execution_id = p_eid;
    END IF;
END
$$;

-- Finish: the first terminal write wins; steps still pending (an abandoned branch's, an attempt
-- whose outcome is unknown) are settled with p_pending_exit; the timer is deleted; waiting
-- clients are notified.
CREATE FUNCTION akter_wf_finish(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_outcome text, p_result bytea, p_pending_exit bytea, p_drop_steps boolean,
    OUT fenced boolean, OUT finished boolean
)
LANGUAGE plpgsql AS $$
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    finished := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET status = 'finished', outcome = p_outcome, result = p_result,
           finished_at = akter_now(), updated_at = akter_now(), blocked_reason = NULL
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid AND e.status <> 'finished';
    finished := FOUND;
    IF NOT finished THEN
        RETURN;
    END IF;
    IF p_drop_steps THEN
        DELETE FROM actor_workflow_step s WHERE s.routing_key = p_rk AND s.execution_id = p_eid;
    ELSE
        UPDATE actor_workflow_step s SET exit = p_pending_exit, settled_at = akter_now()
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.exit IS NULL;
    END IF;
    DELETE FROM actor_outbox o
     WHERE o.routing_key = p_rk AND o.tenant = p_tenant AND o.actor_type = p_actor_type
       AND o.actor_id = p_actor_id AND o.timer_key = 'wf:' || p_eid;
    PERFORM pg_notify('akter_finished', p_eid);
END
$$;

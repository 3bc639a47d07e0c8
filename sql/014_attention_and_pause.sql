-- Needs attention and pause (akter.operate): two statuses an execution rests in until a person
-- acts, and what they record.
--
--   needs_attention  an activity attempt whose outcome cannot be known (invariant 8; declared
--                    on_unknown="attention") is left pending, or the execution's passes failed
--                    failed_pass_limit times in a row; an operator resolves it
--   paused           an operator paused it; it finished its in-flight attempts and holds
--
-- Both keep the execution's position: its steps, their due times and the events after its
-- cursor are in the rows, not in the timer. A timer that fires while it rests (a sleep coming
-- due, an event waking a wait) is delivered as a resume that changes nothing (the resume turn
-- leaves these statuses alone), and resuming or resolving arms the timer due now, so the next
-- pass replays and applies whatever came due meanwhile. Nothing is lost, nothing spins.
--
-- Recorded, names only (invariant 11):
--   paused_at, paused_by, pause_reason   a pause asked for (paused_at set) and by whom, kept
--                                        until it is resumed; the first asker is kept
--   attention_*                          why it needs attention, since when, and the attempt
--                                        that waits for a decision (NULL step: the passes failed)
--   failed_passes, pass_errors           passes that failed in a row (reset by a pass that ends
--                                        well), and their errors: [{"at": time, "error": text}]
--   resolved_by, resolution              the last resolution: who, and what they decided; the
--                                        step's exit carries "resolved_by" too

ALTER TABLE actor_workflow_executions DROP CONSTRAINT actor_workflow_executions_status_check;
ALTER TABLE actor_workflow_executions ADD CONSTRAINT actor_workflow_executions_status_check
    CHECK (status IN ('running', 'suspended', 'finished', 'paused', 'needs_attention'));

ALTER TABLE actor_workflow_executions
    ADD COLUMN paused_at            timestamptz,
    ADD COLUMN paused_by            text,
    ADD COLUMN pause_reason         text,
    ADD COLUMN attention_reason     text,
    ADD COLUMN attention_at         timestamptz,
    ADD COLUMN attention_step       text,
    ADD COLUMN attention_scope      text,
    ADD COLUMN attention_occurrence integer,
    ADD COLUMN attention_attempt    integer,
    ADD COLUMN failed_passes        integer NOT NULL DEFAULT 0,
    ADD COLUMN pass_errors          jsonb,
    ADD COLUMN resolved_by          text,
    ADD COLUMN resolution           text;

-- An execution a pause was asked for is never written suspended: it is paused. Every writer
-- that suspends (akter_wf_suspend of sql/005, a runner leaving it blocked, the passes of later
-- effects) would otherwise need to know about pauses; a pass that had not learnt of the pause
-- when it suspended leaves it paused all the same. An interrupt goes first: an interrupted
-- execution runs to its end, paused or not.
CREATE FUNCTION akter_wf_paused_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.status := 'paused';
    RETURN NEW;
END
$$;

CREATE TRIGGER actor_workflow_executions_paused
    BEFORE UPDATE OF status ON actor_workflow_executions
    FOR EACH ROW
    WHEN (NEW.status = 'suspended' AND NEW.paused_at IS NOT NULL AND NOT NEW.interrupt)
    EXECUTE FUNCTION akter_wf_paused_status();

-- A pass holds: it knows of a pause (p_status 'paused') or holds an attempt whose outcome is
-- unknown (p_status 'needs_attention', with the attempt and the reason). Like akter_wf_suspend:
-- the fence in its own statement, the settles of what the pass ran (sql/010), abandoned
-- branches' waits and clocks settled, then the decision in later statements. Refused (held
-- false, nothing else written) when an interrupt the pass does not know of is pending, or —
-- for a pause — the execution was resumed meanwhile. Unscanned events do not refuse it: they
-- are read when the execution goes on. The timer is armed at p_due (the earliest time the pass
-- knows of) or deleted, as a suspension would.
CREATE FUNCTION akter_wf_hold(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_bucket smallint, p_steps text[], p_scopes text[], p_occurrences integer[],
    p_attempts integer[], p_exits bytea[], p_due timestamptz, p_abandon text[],
    p_knows_interrupt boolean, p_abandoned bytea, p_status text, p_reason text,
    p_step text, p_scope text, p_occurrence integer, p_attempt integer,
    OUT fenced boolean, OUT settled integer, OUT interrupt boolean, OUT held boolean
)
LANGUAGE plpgsql AS $$
DECLARE
    pause_asked boolean;
BEGIN
    SELECT f.fenced, f.settled INTO fenced, settled
      FROM akter_wf_settle_steps(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation, p_eid,
                                 p_steps, p_scopes, p_occurrences, p_attempts, p_exits) f;
    interrupt := false;
    held := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    IF cardinality(p_abandon) > 0 THEN
        UPDATE actor_workflow_step s SET exit = p_abandoned, settled_at = akter_now()
         WHERE s.routing_key = p_rk AND s.execution_id = p_eid AND s.exit IS NULL
           AND s.kind IN ('wait', 'clock')
           AND EXISTS (SELECT 1 FROM unnest(p_abandon) a(prefix) WHERE starts_with(s.scope, a.prefix));
    END IF;
    SELECT e.interrupt AND NOT p_knows_interrupt, e.paused_at IS NOT NULL INTO interrupt, pause_asked
      FROM actor_workflow_executions e
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid;
    IF interrupt OR (p_status = 'paused' AND NOT pause_asked) THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET status = p_status, updated_at = akter_now(), blocked_reason = NULL,
           failed_passes = 0, pass_errors = NULL,
           attention_reason = CASE WHEN p_status = 'needs_attention' THEN p_reason END,
           attention_at = CASE WHEN p_status = 'needs_attention' THEN akter_now() END,
           attention_step = p_step, attention_scope = p_scope,
           attention_occurrence = p_occurrence, attention_attempt = p_attempt
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid AND e.status <> 'finished';
    held := FOUND;
    IF p_due IS NULL THEN
        DELETE FROM actor_outbox o
         WHERE o.routing_key = p_rk AND o.tenant = p_tenant AND o.actor_type = p_actor_type
           AND o.actor_id = p_actor_id AND o.timer_key = 'wf:' || p_eid;
    ELSE
        PERFORM akter_wf_arm(p_rk, p_eid, p_bucket, p_due);
    END IF;
END
$$;

-- A pass failed (an exception escaped it: a defect of the pass, not a declared error, not a
-- lost connection). Count it with its error, under the fence of the pass's generation; at
-- p_limit failures in a row the execution needs attention instead of being resumed by its
-- recovery timer again and again (that timer still fires, and changes nothing).
CREATE FUNCTION akter_wf_pass_failed(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_error text, p_limit integer,
    OUT fenced boolean, OUT failures integer, OUT attention boolean
)
LANGUAGE plpgsql AS $$
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    failures := 0;
    attention := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET failed_passes = e.failed_passes + 1,
           -- bounded: once the count reaches p_limit, nothing counts until it is resolved
           pass_errors = coalesce(e.pass_errors, '[]'::jsonb)
               || jsonb_build_array(jsonb_build_object('at', akter_now(), 'error', p_error)),
           status = CASE WHEN e.failed_passes + 1 >= p_limit THEN 'needs_attention' ELSE e.status END,
           attention_reason = CASE WHEN e.failed_passes + 1 >= p_limit
               THEN (e.failed_passes + 1) || ' passes failed in a row; the last: ' || p_error END,
           attention_at = CASE WHEN e.failed_passes + 1 >= p_limit THEN akter_now() END,
           updated_at = akter_now()
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid
       AND e.status NOT IN ('finished', 'paused', 'needs_attention')
    RETURNING e.failed_passes, e.status = 'needs_attention' INTO failures, attention;
END
$$;

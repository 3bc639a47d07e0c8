-- Suspend, or refuse to. Pending waits and clocks of abandoned branches (p_abandon: scope
-- prefixes of the branches a race or an all gave up) are settled as abandoned first, so they
-- wake nothing. Refused (nothing else written) when an interrupt the pass does not know of is
-- pending, or a live wait has an event it has not scanned. Otherwise the execution is
-- suspended and its timer armed at p_due, or deleted when nothing is due (p_due NULL).
CREATE OR REPLACE FUNCTION akter_wf_suspend(
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

-- Finish: the first terminal write wins; steps still pending (an abandoned branch's, an attempt
-- whose outcome is unknown) are settled with p_pending_exit, or all steps deleted (p_drop_steps);
-- the timer is deleted; waiting clients are notified, in the finishing transaction (delivered at
-- its commit). The triggers on the execution's status do the rest (the deadline's intent, the
-- parent's resume, the children's interrupts, the pause cleared).
--
-- One notification on akter_finished (akter.store.listener, akter.workflow.client.run). It carries the
-- result, so a client waiting in another process (run.result()) needs no read after the wake:
--
--     <run number>.<base64 of the stored result> <execution id>
--
-- when the outcome is not 'interrupted' (that result names who asked, which the row holds) and
-- the whole payload fits in akter_wf_result_note_max() bytes; otherwise the execution id alone,
-- and the waiter reads the row. The run number lets a waiter ignore a note of a run older than
-- the one it read (a keyed start may begin a new run under the same id, akter_wf_new_run).
CREATE OR REPLACE FUNCTION akter_wf_finish(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_generation bigint,
    p_eid text, p_outcome text, p_result bytea, p_pending_exit bytea, p_drop_steps boolean,
    OUT fenced boolean, OUT finished boolean
)
LANGUAGE plpgsql AS $$
DECLARE
    v_run integer;
    v_note text;
BEGIN
    fenced := akter_wf_fence(p_rk, p_tenant, p_actor_type, p_actor_id, p_generation);
    finished := false;
    IF NOT fenced THEN
        RETURN;
    END IF;
    UPDATE actor_workflow_executions e
       SET status = 'finished', outcome = p_outcome, result = p_result,
           finished_at = akter_now(), updated_at = akter_now(), blocked_reason = NULL
     WHERE e.routing_key = p_rk AND e.execution_id = p_eid AND e.status <> 'finished'
    RETURNING e.run_number INTO v_run;
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
    -- 4/3 of the result as base64: test the size before encoding a result that cannot fit
    IF p_outcome <> 'interrupted' AND octet_length(p_result) * 4 / 3 < akter_wf_result_note_max() THEN
        v_note := v_run || '.' || translate(encode(p_result, 'base64'), E'\n', '') || ' ' || p_eid;
    END IF;
    IF octet_length(v_note) > akter_wf_result_note_max() THEN
        v_note := NULL;
    END IF;
    PERFORM pg_notify('akter_finished', coalesce(v_note, p_eid));
END
$$;

-- An execution finishing (in its own finish, under its own actor's lock):
-- * a child resumes its parent: a resume intent in the child's outbox, due now. The parent's
--   pass reads the child's result; a parent that finished first ignores it (the resume finds
--   nothing open);
-- * an interrupted parent interrupts every child it started that is still pending in its
--   history and whose policy is 'interrupt': an interrupt intent in the parent's outbox per
--   child. This runs before akter_wf_finish settles the pending steps (it updates the execution
--   row first). A child that finished meanwhile ignores the interrupt.
CREATE OR REPLACE FUNCTION akter_wf_child_finished() RETURNS trigger
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

-- A finished execution's deadline intent is deleted with the finish, in its transaction.
CREATE OR REPLACE FUNCTION akter_wf_deadline_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM actor_outbox o
     WHERE o.routing_key = NEW.routing_key AND o.tenant = NEW.tenant AND o.actor_type = NEW.actor_type
       AND o.actor_id = NEW.actor_id AND o.timer_key = 'wfdl:' || NEW.execution_id;
    RETURN NULL;
END
$$;

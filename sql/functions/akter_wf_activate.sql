-- A turn takes a new generation of its actor for the runner of this process (akter_wf_start,
-- akter_wf_resume, akter_wf_wake_here with p_activate): the turn holds the owner's row lock
-- already, so the generation commits with the turn instead of in a commit of its own before the
-- pass. Returns the generation taken.
CREATE OR REPLACE FUNCTION akter_wf_activate(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    taken bigint;
BEGIN
    UPDATE actor_generations g SET generation = g.generation + 1
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id
    RETURNING g.generation INTO taken;
    RETURN taken;
END
$$;

-- The fence: lock the owner row, only while p_generation still holds it. True when held.
--
-- A decision taken under the fence (suspend, a wait's timeout, a settle's fallback, finish)
-- must see the commit of the turn whose row lock it waited for. In READ COMMITTED a statement
-- that waited for a row lock re-checks only that row; its other subqueries keep their old
-- snapshot. So each pass transition is a function that takes the fence in its own statement and
-- decides in later statements (each takes a fresh snapshot), still one round trip. See
-- invariant 6 in DESIGN.md.
CREATE OR REPLACE FUNCTION akter_wf_fence(
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

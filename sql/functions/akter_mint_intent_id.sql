-- A command id minted on the database clock: v1.<issued ms>.<expires ms>.<nonce>, expiring one
-- retry window after p_due (NULL: now).
CREATE OR REPLACE FUNCTION akter_mint_intent_id(p_due timestamptz) RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT 'v1.' || (extract(epoch FROM akter_now()) * 1000)::bigint || '.'
           || ((extract(epoch FROM coalesce(p_due, akter_now())) * 1000)::bigint
               + (SELECT (extract(epoch FROM retry_window) * 1000)::bigint FROM actor_deployment))
           || '.' || md5(random()::text || clock_timestamp()::text)
$$;

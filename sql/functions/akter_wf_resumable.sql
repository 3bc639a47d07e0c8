-- What a resume may set running (akter_wf_resume, akter_wf_wake_here): an open execution, except
-- one that rests until a person acts (paused, needs attention: akter/workflow/engine/holds.py), unless
-- it is being interrupted.
CREATE OR REPLACE FUNCTION akter_wf_resumable(p_status text, p_interrupt boolean) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_status NOT IN ('finished', 'needs_attention') AND (p_status <> 'paused' OR p_interrupt)
$$;

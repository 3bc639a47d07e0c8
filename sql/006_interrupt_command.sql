-- Who asked for an execution's interrupt, recorded by the first interrupt turn that flagged it:
-- the principal's key ('user:<subject>', 'anonymous'), or 'system:<source>' for akter's own
-- callers acting for nobody. Names only, as the receipts' caller_key (invariant 11).
ALTER TABLE actor_workflow_executions ADD COLUMN interrupted_by text;

-- Retention runs per relay over the buckets it owns (bucket = routing_key >> 56), so the expiry
-- scans are led by the bucket: one index descent per owned bucket, and two relays never scan
-- (or lock) each other's rows. These replace the expiry indexes of 001 and 003.

CREATE INDEX actor_receipts_bucket_expiry ON actor_receipts ((routing_key >> 56), expires_at);
DROP INDEX actor_receipts_expiry;

CREATE INDEX actor_workflow_executions_bucket_finished
    ON actor_workflow_executions ((routing_key >> 56), finished_at) WHERE status = 'finished';
DROP INDEX actor_workflow_executions_finished;

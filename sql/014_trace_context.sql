-- OpenTelemetry trace context travels with the work (akter.telemetry): the W3C traceparent (and
-- tracestate) of the span that staged an intent or started an execution, as a small JSON object
-- of those header names to their values. Ids only, never baggage or attributes (invariant 11).
-- NULL when no tracing was configured where the work began.
--   actor_outbox.trace_context                the relay delivers the intent inside that trace
--   actor_workflow_executions.trace_context   copied to the execution's timer each time it is
--                                             armed, so every resume and pass joins the trace
--                                             the execution started in, in whichever process
ALTER TABLE actor_outbox ADD COLUMN trace_context text;
ALTER TABLE actor_workflow_executions ADD COLUMN trace_context text;

"""OpenTelemetry traces and metrics for akter's units of work, through ``opentelemetry-api`` only.

With no SDK configured the API hands out non-recording spans and no-op instruments, so these
wrappers cost a few attribute look-ups per turn. With an SDK (``pip install 'akter[otel]'`` and
the usual ``TracerProvider``/``MeterProvider`` set-up), every turn, relay delivery, workflow pass,
activity attempt and suspension is a span, and the instruments listed in
``docs/observability.md`` record counts and latencies.

Trace context travels with the work: ``carrier()`` is the current W3C ``traceparent`` (and
``tracestate``) as a small JSON text, stored with each outbox intent and each execution (ids
only, never baggage: invariant 11), and ``joined(stored)`` makes it current again where the work
resumes, in whichever process. A shared utility: it imports no layer; the layers wrap their own
functions with the decorators below, each reading only plain attributes of its arguments.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.metrics import _internal as _metrics_internal
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

P = ParamSpec("P")
R = TypeVar("R")

NAME = "akter"
#: the only carrier keys kept: a stored context is ids, never baggage
_KEYS = ("traceparent", "tracestate")
_UNKNOWN = object()

tracer = trace.get_tracer(NAME)
meter = metrics.get_meter(NAME)


def active() -> bool:
    """Whether an SDK (any provider) is set for traces or metrics. When neither is, the wrappers
    below call straight through: no span, no context switch, no instrument call. The API's own
    ``get_tracer_provider()`` reads the environment on every call (microseconds), so this reads
    the globals it sets instead, and falls back to it if a later API version renames them."""
    traces = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    meters = getattr(_metrics_internal, "_METER_PROVIDER", _UNKNOWN)
    if traces is None and meters is None:
        return False
    if traces is _UNKNOWN or meters is _UNKNOWN:  # pragma: no cover - a renamed API internal
        return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) or (
            type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider"
        )
    return True


# ---- instruments (each one documented in docs/observability.md) -------------------------------

#: name: (unit, description)
COUNTERS: dict[str, tuple[str, str]] = {
    "akter.turns": ("{turn}", "Turns handled, by outcome"),
    "akter.deliveries": ("{delivery}", "Relay deliveries of outbox intents, by result"),
    "akter.delivery.retries": ("{delivery}", "Deliveries that were a second or later attempt"),
    "akter.workflow.passes": ("{pass}", "Workflow passes, by result"),
    "akter.activity.attempts": ("{attempt}", "Activity attempts, by outcome"),
    "akter.workflow.suspensions": ("{suspension}", "Workflow suspensions, by what they wait on"),
}
HISTOGRAMS: dict[str, tuple[str, str]] = {
    "akter.turn.duration": ("s", "Time to handle one turn, lock to commit"),
    "akter.delivery.duration": ("s", "Time to deliver one intent as the receiver's turn"),
    "akter.workflow.pass.duration": ("s", "Time a workflow pass spends driving an execution"),
    "akter.activity.attempt.duration": ("s", "Time one activity attempt runs"),
}
counters = {n: meter.create_counter(n, unit=u, description=d) for n, (u, d) in COUNTERS.items()}
histograms = {n: meter.create_histogram(n, unit=u, description=d) for n, (u, d) in HISTOGRAMS.items()}


# ---- trace context that travels with the work ----------------------------------------------------


def carrier() -> str | None:
    """The current trace context as stored text, or ``None`` when nothing is being traced."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    kept = {k: headers[k] for k in _KEYS if k in headers}
    return json.dumps(kept, separators=(",", ":"), sort_keys=True) if kept else None


def context_of(stored: str | None) -> otel_context.Context | None:
    """The context ``carrier()`` stored, or ``None`` (nothing stored, or text that does not parse:
    a bad trace context never stops the work it travels with)."""
    if not stored:
        return None
    try:
        headers = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(headers, dict):
        return None
    return propagate.extract({k: str(v) for k, v in headers.items() if k in _KEYS})


@contextmanager
def joined(stored: str | None) -> Iterator[None]:
    """Make the stored context current for the block (nothing changes when there is none)."""
    ctx = context_of(stored)
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


# ---- spans --------------------------------------------------------------------------------------

Labels = dict[str, AttributeValue]


@contextmanager
def _work(
    name: str,
    attributes: Labels,
    *,
    result: str,
    failed: AttributeValue,
    labels: Labels,
    metric: str | None = None,
    errors: tuple[AttributeValue, ...] = (),
    kind: SpanKind = SpanKind.INTERNAL,
) -> Iterator[Labels]:
    """A span named ``name`` around one unit of work, and its ``metric`` count and duration. The
    block sets ``labels[result]``; the span gets it as an attribute, and an ERROR status when it
    is one of ``errors`` or when the block raises (then the result is ``failed``)."""
    started = time.perf_counter()
    labels = {**labels, result: failed}
    with tracer.start_as_current_span(name, kind=kind, attributes=attributes, record_exception=False) as span:
        try:
            yield labels
        except BaseException as exc:
            labels[result] = failed
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        else:
            span.set_attribute(result, labels[result])
            if labels[result] in errors:
                span.set_status(Status(StatusCode.ERROR, str(labels[result])))
        finally:
            if metric is not None:
                counters[metric].add(1, labels)
                histograms[HISTOGRAM_OF[metric]].record(time.perf_counter() - started, labels)


HISTOGRAM_OF = {
    "akter.turns": "akter.turn.duration",
    "akter.deliveries": "akter.delivery.duration",
    "akter.workflow.passes": "akter.workflow.pass.duration",
    "akter.activity.attempts": "akter.activity.attempt.duration",
}


def _outcome_of(exit_: Any) -> str:
    """``ok``, ``error`` or ``defect``: the tag of a step's exit."""
    if isinstance(exit_, dict) and exit_:
        return str(next(iter(exit_)))
    return "none"


def traced_turn(fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """For the kernel's ``run_turn(conn, command, ref, payload, command_id, caller, options)``."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if not active():
            return await fn(*args, **kwargs)
        command, ref, command_id = args[1], args[2], args[4]
        actor_type = str(getattr(ref, "actor_type", ""))
        attributes: Labels = {
            "akter.actor.type": actor_type,
            "akter.actor.id": str(getattr(ref, "actor_id", "")),
            "akter.tenant": str(getattr(ref, "tenant", "")),
            "akter.command": str(getattr(command, "name", "")),
            "akter.command_id": str(command_id),
        }
        with _work(
            f"akter.turn {actor_type}.{getattr(command, 'name', '')}",
            attributes,
            result="akter.turn.outcome",
            failed="refused",
            labels={"akter.actor.type": actor_type},
            metric="akter.turns",
        ) as labels:
            record = await fn(*args, **kwargs)
            success = type(getattr(record, "outcome", None)).__name__ == "Success"
            labels["akter.turn.outcome"] = "ok" if success else "error"
            trace.get_current_span().set_attribute(
                "akter.turn.replayed", bool(getattr(record, "replayed", 0))
            )
            return record

    return run


def traced_delivery(fn: Callable[P, Awaitable[bool]]) -> Callable[P, Coroutine[Any, Any, bool]]:
    """For the relay's ``deliver(sender, settings, row, acks)``: the delivery joins the trace
    stored with the intent, and the receiver's turn is its child."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> bool:
        if not active():
            return await fn(*args, **kwargs)
        row = args[2]
        attempt = int(getattr(row, "attempts", 0))
        command, target = str(getattr(row, "command", "")), str(getattr(row, "target_type", ""))
        attributes: Labels = {
            "akter.intent.id": str(getattr(row, "intent_id", "")),
            "akter.intent.timer": getattr(row, "timer_key", None) is not None,
            "akter.delivery.attempt": attempt,
            "akter.command": command,
            "akter.target.type": target,
        }
        with (
            joined(getattr(row, "trace_context", None)),
            _work(
                f"akter.deliver {target}.{command}",
                attributes,
                result="akter.delivery.result",
                failed="failed",
                labels={},
                metric="akter.deliveries",
                errors=("retried",),
                kind=SpanKind.CONSUMER,
            ) as labels,
        ):
            done = await fn(*args, **kwargs)
            labels["akter.delivery.result"] = "delivered" if done else "retried"
            if attempt > 1:
                counters["akter.delivery.retries"].add(
                    1, {"akter.delivery.result": labels["akter.delivery.result"]}
                )
            return done

    return run


def traced_pass(fn: Callable[..., Awaitable[R]]) -> Callable[..., Coroutine[Any, Any, R]]:
    """For a workflow ``Pass`` method ``_drive(self, workflow)``: one pass over one execution."""

    @functools.wraps(fn)
    async def run(self: Any, workflow: Any, *args: Any, **kwargs: Any) -> R:
        if not active():
            return await fn(self, workflow, *args, **kwargs)
        name = str(getattr(workflow, "name", "?"))
        attributes: Labels = {
            "akter.execution.id": str(getattr(self, "eid", "")),
            "akter.workflow": name,
            "akter.actor.type": str(getattr(getattr(self, "ref", None), "actor_type", "")),
        }
        with _work(
            f"akter.pass {name}",
            attributes,
            result="akter.pass.result",
            failed="failed",
            labels={"akter.workflow": name},
            metric="akter.workflow.passes",
        ) as labels:
            value = await fn(self, workflow, *args, **kwargs)
            labels["akter.pass.result"] = "returned"
            return value

    return run


def traced_attempt(fn: Callable[..., Awaitable[R]]) -> Callable[..., Coroutine[Any, Any, R]]:
    """For ``Pass._attempt(self, need)``: one activity attempt; what the activity calls (an
    instrumented HTTP client, say) becomes a child of this span."""

    @functools.wraps(fn)
    async def run(self: Any, need: Any, *args: Any, **kwargs: Any) -> R:
        if not active():
            return await fn(self, need, *args, **kwargs)
        key = getattr(need, "key", None)
        step = str(getattr(key, "step", "?"))
        attributes: Labels = {
            "akter.execution.id": str(getattr(self, "eid", "")),
            "akter.step": step,
            "akter.step.scope": str(getattr(key, "scope", "")),
            "akter.step.occurrence": int(getattr(key, "occurrence", 0)),
            "akter.activity.attempt": int(getattr(need, "attempt", 0)),
        }
        with _work(
            f"akter.activity {step}",
            attributes,
            result="akter.activity.outcome",
            failed="cancelled",
            labels={"akter.step": step},
            metric="akter.activity.attempts",
            errors=("defect",),
        ) as labels:
            row = await fn(self, need, *args, **kwargs)
            labels["akter.activity.outcome"] = _outcome_of(getattr(row, "exit", None))
            return row

    return run


def traced_suspend(fn: Callable[..., Awaitable[bool]]) -> Callable[..., Coroutine[Any, Any, bool]]:
    """For ``Pass._suspend(self, due_ms)``: until when, and on what the execution waits."""

    @functools.wraps(fn)
    async def run(self: Any, due_ms: int | None, *args: Any, **kwargs: Any) -> bool:
        if not active():
            return await fn(self, due_ms, *args, **kwargs)
        on = "timer" if due_ms is not None else "event"
        attributes: Labels = {"akter.execution.id": str(getattr(self, "eid", "")), "akter.suspend.on": on}
        if due_ms is not None:
            attributes["akter.suspend.until"] = datetime.fromtimestamp(due_ms / 1000, tz=UTC).isoformat()
        with _work(
            "akter.suspend", attributes, result="akter.suspend.suspended", failed=False, labels={}
        ) as labels:
            done = await fn(self, due_ms, *args, **kwargs)
            labels["akter.suspend.suspended"] = done
            if done:
                counters["akter.workflow.suspensions"].add(1, {"akter.suspend.on": on})
            return done

    return run

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
What the database holds is reported by the gauges of ``akter.operate.gauges``, which know the
tables.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
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
log = logging.getLogger("akter.telemetry")


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
    "akter.delivery.lag": ("s", "Time from an intent's due time to the end of its delivery"),
}
#: seconds, from a millisecond to a day: the advisory boundaries of every duration histogram (the
#: SDK's default ones are meant for milliseconds and would put every turn in the first bucket)
DURATION_BUCKETS = (
    *(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    *(30.0, 60.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0),
)
counters = {n: meter.create_counter(n, unit=u, description=d) for n, (u, d) in COUNTERS.items()}
histograms = {
    n: meter.create_histogram(n, unit=u, description=d, explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
    for n, (u, d) in HISTOGRAMS.items()
}


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
    """For ``akter.actor.drive.run_turn(conn, command, ref, payload, command_id, caller, options)``."""

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
    stored with the intent, and the receiver's turn is its child. The row's ``late_ms`` (how long
    it had been due when the relay claimed it, on the database clock) plus the delivery's own
    time is its lag."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> bool:
        if not active():
            return await fn(*args, **kwargs)
        row = args[2]
        started = time.perf_counter()
        attempt = int(getattr(row, "attempts", 0))
        command, target = str(getattr(row, "command", "")), str(getattr(row, "target_type", ""))
        attributes: Labels = {
            "akter.intent.id": str(getattr(row, "intent_id", "")),
            "akter.intent.timer": getattr(row, "timer_key", None) is not None,
            "akter.delivery.attempt": attempt,
            "akter.command": command,
            "akter.target.type": target,
        }
        late_ms = getattr(row, "late_ms", None)
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
            try:
                done = await fn(*args, **kwargs)
                labels["akter.delivery.result"] = "delivered" if done else "retried"
                if attempt > 1:
                    counters["akter.delivery.retries"].add(
                        1, {"akter.delivery.result": labels["akter.delivery.result"]}
                    )
                return done
            finally:
                if isinstance(late_ms, int):
                    lag = max(0.0, late_ms / 1000) + (time.perf_counter() - started)
                    trace.get_current_span().set_attribute("akter.delivery.lag", lag)
                    histograms["akter.delivery.lag"].record(lag, dict(labels))

    return run


# ---- workflow passes: what each one ended in ------------------------------------------------------

#: the end of the pass running in this task, filled in by the wrappers of what ends it
_PASS_END: ContextVar[Labels | None] = ContextVar("akter_pass_end", default=None)
#: the longest blocked reason a span carries (the full text is on the execution's row)
MAX_REASON_CHARS = 500


def pass_ended(result: str, attributes: Labels | None = None) -> None:
    """Record what the current pass ended in (``akter.pass.result``) and the attributes that say
    more, for its span. For the engine's own ends of a pass; a no-op outside a traced pass."""
    end = _PASS_END.get()
    if end is not None:
        end.clear()
        end["akter.pass.result"] = result
        end.update(attributes or {})


def traced_pass(fn: Callable[..., Awaitable[R]]) -> Callable[..., Coroutine[Any, Any, R]]:
    """For ``Pass.run(self)``: one pass over one execution, from its load to how it ended —
    ``suspended`` (on what, until when), ``finished`` (with the outcome), ``blocked`` (with the
    reason), ``fenced`` (another activation took the actor), ``failed`` (raised), or ``returned``
    (nothing to run: the execution was finished or gone)."""

    @functools.wraps(fn)
    async def run(self: Any, *args: Any, **kwargs: Any) -> R:
        if not active():
            return await fn(self, *args, **kwargs)
        eid = getattr(self, "eid", None)
        name = str(getattr(eid, "workflow", "?"))
        attributes: Labels = {
            "akter.execution.id": str(eid or ""),
            "akter.workflow": name,
            "akter.actor.type": str(getattr(getattr(self, "ref", None), "actor_type", "")),
        }
        end: Labels = {}
        token = _PASS_END.set(end)
        try:
            with _work(
                f"akter.pass {name}",
                attributes,
                result="akter.pass.result",
                failed="failed",
                labels={"akter.workflow": name},
                metric="akter.workflow.passes",
            ) as labels:
                value = await fn(self, *args, **kwargs)
                if getattr(self, "stale", False):
                    end.clear()
                    end["akter.pass.result"] = "fenced"
                labels["akter.pass.result"] = end.pop("akter.pass.result", "returned")
                trace.get_current_span().set_attributes(end)
                return value
        finally:
            _PASS_END.reset(token)

    return run


def pass_in_turn(eid: Any, outcome: str, began_ns: int, seconds: float) -> None:
    """A start turn finished its execution itself (``akter.workflow.engine.prefix``): the first pass
    it stands for, as the span and count a pass that finished would leave (``akter.pass.result`` =
    ``finished``, with the outcome), begun when the body ran. Called once the turn committed."""
    if not active():
        return
    name = str(getattr(eid, "workflow", "?"))
    attributes: Labels = {
        "akter.execution.id": str(eid),
        "akter.workflow": name,
        "akter.actor.type": str(getattr(getattr(eid, "owner", None), "actor_type", "")),
        "akter.pass.result": "finished",
        "akter.execution.outcome": outcome,
        "akter.pass.in_start_turn": True,
    }
    tracer.start_span(f"akter.pass {name}", attributes=attributes, start_time=began_ns).end()
    labels: Labels = {"akter.workflow": name, "akter.pass.result": "finished"}
    counters["akter.workflow.passes"].add(1, labels)
    histograms["akter.workflow.pass.duration"].record(seconds, labels)


def traced_outcome(fn: Callable[P, tuple[str, R]]) -> Callable[P, tuple[str, R]]:
    """For ``Pass._result(self, workflow, final)`` → ``(outcome, exit)``: the pass finishes the
    execution with that outcome."""

    @functools.wraps(fn)
    def result(*args: P.args, **kwargs: P.kwargs) -> tuple[str, R]:
        value = fn(*args, **kwargs)
        pass_ended("finished", {"akter.execution.outcome": value[0]})
        return value

    return result


def traced_blocked(fn: Callable[..., Awaitable[R]]) -> Callable[..., Coroutine[Any, Any, R]]:
    """For ``Pass._leave_blocked(self, reasons)``: the pass leaves the execution suspended for a
    compatible runner, and says why."""

    @functools.wraps(fn)
    async def run(self: Any, reasons: list[str], *args: Any, **kwargs: Any) -> R:
        if active():
            reason = "; ".join(reasons)[:MAX_REASON_CHARS]
            pass_ended("blocked", {"akter.pass.blocked_reason": reason})
        return await fn(self, reasons, *args, **kwargs)

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


def parked_on(pass_: Any) -> Labels:
    """What a pass's branches are parked on when it suspends: the step occurrences
    (``akter.suspend.steps``, as ``cool-off#1``), their kinds (``clock``: a sleep, ``wait``: an
    event, ``activity``: a retry's backoff) and the event types waited for. Read from the
    driver's fibers by attribute name (this module imports no layer)."""
    steps: list[str] = []
    kinds: set[str] = set()
    events: set[str] = set()
    for fiber in getattr(getattr(pass_, "driver", None), "fibers", ()):
        effect, key = getattr(fiber, "blocked", None), getattr(fiber, "blocked_key", None)
        if getattr(fiber, "done", True) or effect is None or key is None:
            continue
        if getattr(fiber, "owned_join", None) is not None:
            continue  # a race or an all: its branches are the fibers that park
        step = getattr(effect, "step", None)
        kinds.add(str(getattr(step, "kind", type(effect).__name__.lower())))
        steps.append(str(key))
        event = getattr(step, "event", None)
        if getattr(step, "kind", None) == "wait" and isinstance(event, type):
            events.add(event.__name__)
    detail: Labels = {"akter.suspend.steps": steps, "akter.suspend.kinds": sorted(kinds)}
    if events:
        detail["akter.suspend.events"] = sorted(events)
    return detail


def traced_suspend(fn: Callable[..., Awaitable[bool]]) -> Callable[..., Coroutine[Any, Any, bool]]:
    """For ``Pass._suspend(self, due_ms)``: until when, and on what the execution waits."""

    @functools.wraps(fn)
    async def run(self: Any, due_ms: int | None, *args: Any, **kwargs: Any) -> bool:
        if not active():
            return await fn(self, due_ms, *args, **kwargs)
        on = "timer" if due_ms is not None else "event"
        detail: Labels = {"akter.suspend.on": on}
        if due_ms is not None:
            detail["akter.suspend.until"] = datetime.fromtimestamp(due_ms / 1000, tz=UTC).isoformat()
        try:
            detail |= parked_on(self)
        except Exception:  # pragma: no cover - a renamed driver internal: the span goes without
            log.debug("cannot tell what the pass of %s is parked on", getattr(self, "eid", ""), exc_info=True)
        attributes: Labels = {"akter.execution.id": str(getattr(self, "eid", "")), **detail}
        with _work(
            "akter.suspend", attributes, result="akter.suspend.suspended", failed=False, labels={}
        ) as labels:
            done = await fn(self, due_ms, *args, **kwargs)
            labels["akter.suspend.suspended"] = done
            if done:
                counters["akter.workflow.suspensions"].add(1, {"akter.suspend.on": on})
                pass_ended("suspended", detail)
            return done

    return run

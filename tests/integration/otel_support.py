"""One OpenTelemetry SDK for the test process, read through the SDK's in-memory exporter and
metric reader. OpenTelemetry allows one global provider per process, so every test module that
reads spans or metrics installs this one (``install()``), and clears what it reads."""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()

Points = dict[tuple[str, tuple[tuple[str, object], ...]], Any]


def install() -> None:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))


def parent_chain(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        up = by_id[parent.span_id]
        names.append(up.name)
        parent = up.parent
    return names


def collect() -> dict[str, list[Any]]:
    """Every data point the reader collects now, by instrument name."""
    data = READER.get_metrics_data()
    found: dict[str, list[Any]] = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def metric_points() -> Points:
    """Counter sums and gauge values (histogram counts) by instrument and attributes."""
    points: Points = {}
    for name, found in collect().items():
        for point in found:
            value = getattr(point, "value", None)
            count = value if value is not None else getattr(point, "count", 0)
            points[(name, tuple(sorted((point.attributes or {}).items())))] = count
    return points

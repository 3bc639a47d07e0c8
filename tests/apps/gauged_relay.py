"""The drain tests' App with an OpenTelemetry metrics SDK configured at import, as a user's app
module would: ``akter relay tests.apps.gauged_relay:app`` then reports what it measures, and
every export writes each gauge's points as one JSON line to the file named by
``AKTER_TEST_METRICS`` (read back by the test)."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)

from tests.apps import drain_app


class JsonLines(MetricExporter):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.lock = threading.Lock()

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            for resource in metrics_data.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        points = [
                            {"attributes": dict(p.attributes or {}), "value": getattr(p, "value", None)}
                            for p in metric.data.data_points
                        ]
                        out.write(json.dumps({"name": metric.name, "points": points}) + "\n")
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


reader = PeriodicExportingMetricReader(
    JsonLines(os.environ["AKTER_TEST_METRICS"]), export_interval_millis=200
)
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

app = drain_app.make_app()

"""The demo's App with an OpenTelemetry SDK configured at import, as a user's app module would:
``akter relay tests.apps.otel_relay:app`` then traces what it runs, and writes each finished span
as one JSON line to the file named by ``AKTER_TEST_SPANS`` (read back by the test)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from akter import demo


class JsonLines(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            for s in spans:
                parent = s.parent
                line = {
                    "name": s.name,
                    "trace_id": f"{s.context.trace_id:032x}",
                    "span_id": f"{s.context.span_id:016x}",
                    "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
                    "attributes": dict(s.attributes or {}),
                }
                out.write(json.dumps(line) + "\n")
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(JsonLines(os.environ["AKTER_TEST_SPANS"])))
trace.set_tracer_provider(provider)

app = demo.make_app()

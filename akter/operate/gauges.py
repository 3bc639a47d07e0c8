"""What the database holds, as OpenTelemetry observable gauges: executions by status, the
outbox's backlog per bucket range, parked intents.

A process reports them once it asks with ``observe_database(url)`` (``App.relay()`` does): a few
index-backed reads, at most once per ``every`` seconds however often the metrics are collected
(``DatabaseGauges``). It reads the workflow and outbox tables, so it lives above both layers;
the span and metric wrappers the layers use are in ``akter.telemetry``, which knows no table.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, LiteralString

import attrs
import psycopg
from opentelemetry.metrics import CallbackOptions, Observation

from akter.telemetry import Labels, meter

log = logging.getLogger("akter.telemetry")


#: name: (unit, description); each one documented in docs/observability.md
GAUGES: dict[str, tuple[str, str]] = {
    "akter.workflow.execution.count": ("{execution}", "Open executions, by their stored status"),
    "akter.workflow.execution.blocked": ("{execution}", "Open executions a runner left blocked"),
    "akter.workflow.execution.needs_attention": (
        "{execution}",
        "Executions waiting for an operator (status needs_attention)",
    ),
    "akter.outbox.depth": ("{intent}", "Outbox intents due and not yet claimed, by bucket range"),
    "akter.outbox.oldest_due.age": ("s", "How long the oldest due intent has waited, by bucket range"),
    "akter.outbox.parked": ("{intent}", "Intents the relay parked as undeliverable"),
}

# Each read is served by an index, whatever the size of the history (EXPLAIN in
# tests/integration/test_telemetry_gauges.py): open executions by the partial indexes of
# sql/001_schema.sql on open rows (finished rows are not in them), blocked ones by
# actor_workflow_executions_blocked, parked intents by actor_outbox_parked; the backlog by one bounded
# range of actor_outbox_due (bucket, due_at) per bucket, stopped at ``cap`` rows, so a pile-up costs at
# most 256 * cap index entries.
EXECUTIONS_BY_STATUS: LiteralString = (
    "SELECT status, count(*) FROM actor_workflow_executions WHERE status <> 'finished' GROUP BY status"
)
BLOCKED: LiteralString = (
    "SELECT count(*) FROM actor_workflow_executions WHERE blocked_reason IS NOT NULL AND status <> 'finished'"
)
PARKED: LiteralString = "SELECT count(*) FROM actor_outbox WHERE parked_at IS NOT NULL"
BACKLOG: LiteralString = """
SELECT (b.bucket + 128) / %(width)s AS range, sum(d.n)::bigint AS depth,
       extract(epoch FROM akter_now() - min(d.oldest))::float8 AS oldest_age
  FROM generate_series(-128, 127) AS b(bucket)
 CROSS JOIN LATERAL (
       SELECT count(*) AS n, min(x.due_at) AS oldest
         FROM (SELECT o.due_at FROM actor_outbox o
                WHERE o.bucket = b.bucket::smallint AND o.due_at <= akter_now()
                ORDER BY o.due_at LIMIT %(cap)s) x) d
 GROUP BY 1 ORDER BY 1"""


@attrs.frozen
class Snapshot:
    """One reading of the database, as the gauges report it."""

    #: open executions by stored status (``running``, ``suspended``, and whatever statuses later
    #: migrations add); finished history is counted by the pass and turn counters instead
    executions: dict[str, int]
    blocked: int
    #: bucket range (``"-128..-113"``) → (due intents, counted up to ``cap`` per bucket; seconds
    #: the oldest of them has waited, ``None`` when none is due)
    backlog: dict[str, tuple[int, float | None]]
    parked: int

    @property
    def needs_attention(self) -> int:
        return self.executions.get("needs_attention", 0)


class DatabaseGauges:
    """The database readings behind the gauges, refreshed at most once every ``every`` seconds:
    a collection that comes sooner (every exporter, every scrape, every gauge of one collection)
    reports the cached reading. A read that fails (the database is away, a statement ran past
    ``timeout`` seconds) reports nothing until the next interval, and is logged; it never raises
    into the exporter. ``ranges`` groups the 256 buckets into that many equal ranges; ``clock``
    (seconds, monotonic) measures the interval."""

    def __init__(
        self,
        url: str,
        *,
        every: float = 15.0,
        ranges: int = 16,
        cap: int = 1000,
        timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ranges not in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            raise ValueError(f"ranges must be a power of two up to 256, not {ranges}")
        self.url = url
        self.every = every
        self.width = 256 // ranges
        self.cap = cap
        self.timeout = timeout
        self.clock = clock
        #: how many times the database was read (what the caching saves shows here)
        self.reads = 0
        self._lock = threading.Lock()
        self._at: float | None = None
        self._snapshot: Snapshot | None = None

    def range_name(self, index: int) -> str:
        low = index * self.width - 128
        return f"{low}..{low + self.width - 1}"

    def read(self) -> Snapshot:
        """Read the database now, in one read-only transaction."""
        self.reads += 1
        ms = int(self.timeout * 1000)
        wait = max(1, int(self.timeout))
        with psycopg.connect(self.url, connect_timeout=wait, application_name="akter gauges") as conn:
            conn.read_only = True
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(ms),))
            executions = {str(s): int(n) for s, n in conn.execute(EXECUTIONS_BY_STATUS).fetchall()}
            blocked = conn.execute(BLOCKED).fetchone()
            parked = conn.execute(PARKED).fetchone()
            rows = conn.execute(BACKLOG, {"width": self.width, "cap": self.cap}).fetchall()
        return Snapshot(
            executions=executions,
            blocked=int(blocked[0]) if blocked else 0,
            backlog={
                self.range_name(int(r)): (int(n), None if age is None else max(0.0, float(age)))
                for r, n, age in rows
            },
            parked=int(parked[0]) if parked else 0,
        )

    def snapshot(self) -> Snapshot | None:
        """The cached reading, read again once it is older than ``every``."""
        with self._lock:
            now = self.clock()
            if self._at is None or now - self._at >= self.every:
                self._at = now
                try:
                    self._snapshot = self.read()
                except (psycopg.Error, OSError) as exc:
                    self._snapshot = None
                    log.warning("akter gauges: cannot read the database: %s", exc)
            return self._snapshot

    def close(self) -> None:
        """Stop reporting (the gauges go silent for this database)."""
        with _SOURCES_LOCK:
            if self in _SOURCES:
                _SOURCES.remove(self)


_SOURCES: list[DatabaseGauges] = []
_SOURCES_LOCK = threading.Lock()


def observe_database(url: str, **settings: Any) -> DatabaseGauges:
    """Report the gauges of ``GAUGES`` for the database at ``url`` from this process (settings:
    those of ``DatabaseGauges``). Every process that calls it reports the same database-wide
    values: call it in one (a relay, say), or aggregate the series with max, never sum."""
    source = DatabaseGauges(url, **settings)
    with _SOURCES_LOCK:
        _SOURCES.append(source)
    return source


def _observations(pick: Callable[[Snapshot, DatabaseGauges], Iterable[tuple[float, Labels]]]) -> Any:
    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        with _SOURCES_LOCK:
            sources = list(_SOURCES)
        found = []
        for source in sources:
            snapshot = source.snapshot()
            if snapshot is not None:
                found += [Observation(value, labels) for value, labels in pick(snapshot, source)]
        return found

    return callback


_PICK: dict[str, Callable[[Snapshot, DatabaseGauges], Iterable[tuple[float, Labels]]]] = {
    "akter.workflow.execution.count": lambda s, _: [
        (n, {"akter.execution.status": status}) for status, n in sorted(s.executions.items())
    ],
    "akter.workflow.execution.blocked": lambda s, _: [(s.blocked, {})],
    "akter.workflow.execution.needs_attention": lambda s, _: [(s.needs_attention, {})],
    "akter.outbox.depth": lambda s, _: [(n, {"akter.outbox.buckets": r}) for r, (n, _) in s.backlog.items()],
    "akter.outbox.oldest_due.age": lambda s, _: [
        (age, {"akter.outbox.buckets": r}) for r, (_, age) in s.backlog.items() if age is not None
    ],
    "akter.outbox.parked": lambda s, _: [(s.parked, {})],
}
gauges = {
    n: meter.create_observable_gauge(n, callbacks=[_observations(_PICK[n])], unit=u, description=d)
    for n, (u, d) in GAUGES.items()
}

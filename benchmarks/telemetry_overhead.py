"""What akter's OpenTelemetry instrumentation costs a turn: no SDK, the API's no-op providers, and
an SDK recording every span and metric into memory.

    python benchmarks/telemetry_overhead.py [--database-url URL] [--n 2000] [--rounds 5]
                                            [--micro-n 100000] [--out benchmarks/results/telemetry.json]

Three configurations, each in a process of its own (OpenTelemetry allows one global provider per
process):

* ``none``: no provider is set (akter depends on ``opentelemetry-api`` only; this is every user
  who has not configured OpenTelemetry). The wrappers see that and call straight through.
* ``api``: the API's own no-op providers are set (``NoOpTracerProvider``, ``NoOpMeterProvider``):
  the wrappers do all their work, the spans are non-recording and the instruments no-ops.
* ``sdk``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter`` and a ``MeterProvider`` with an ``InMemoryMetricReader``: every span
  is recorded and exported (to memory, so no network cost), every instrument updated.

Each process measures two things:

* **turns**: sequential turns on one actor of the turn benchmark (``benchmarks/turns.py``: lock,
  load, handler, state + event + receipt, commit) against a fresh database of the chosen server
  (default: ``AKTER_DATABASE_URL``, else the embedded PostgreSQL), after a warm-up: ``n`` with
  the instrumentation on and ``n`` with it off (``telemetry.active`` made to say no, as with no
  provider), alternating one by one, so the difference is measured at the same moments; in
  ``none`` both halves are the same code, and their difference is the noise floor;
* **wrapper**: ``telemetry.traced_turn`` around a coroutine that returns at once against the
  bare coroutine, ``micro-n`` calls in alternating slices: what the wrapper itself adds.

The machines are shared and their load swings, so the configurations also run round-robin, one
short run each per round (the order rotating), and the reported figures are medians over the
rounds. Prints a table and writes it all as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import akter
from akter import telemetry
from akter.ids import ActorRef
from akter.store.database import resolve_database_url
from akter.store.migrate import migrate
from benchmarks.turns import Bench, Bump, bump, pct

MODES = ("none", "api", "sdk")
TENANT = "bench"
WARM_UP = 200


def install(mode: str) -> Any:
    """Set this process's providers for ``mode``; the SDK's span exporter for ``sdk``."""
    from opentelemetry import metrics, trace

    if mode == "api":
        trace.set_tracer_provider(trace.NoOpTracerProvider())
        metrics.set_meter_provider(metrics.NoOpMeterProvider())
    elif mode == "sdk":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
        return exporter
    return None


# ---- the wrapper alone --------------------------------------------------------------------------


@attrs.frozen
class _Command:
    name: str = "add"


@attrs.frozen
class _Record:
    outcome: Any = None
    replayed: bool = False


async def _bare(*_args: Any) -> _Record:
    return _Record()


async def _slice(fn: Any, args: tuple[Any, ...], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await fn(*args)
    return (time.perf_counter() - started) / n


async def wrapper_cost(n: int, slices: int = 5) -> dict[str, float]:
    traced = telemetry.traced_turn(_bare)
    args = (None, _Command(), ActorRef("bench", "Counter", "c-1"), None, "c-1", None, None)
    plain, wrapped = [], []
    for _ in range(slices):
        plain.append(await _slice(_bare, args, n // slices))
        wrapped.append(await _slice(traced, args, n // slices))
    p, w = statistics.median(plain), statistics.median(wrapped)
    return {"bare_us": p * 1e6, "traced_us": w * 1e6, "wrapper_us": (w - p) * 1e6}


# ---- real turns -----------------------------------------------------------------------------------


def _off() -> bool:
    return False


async def turn_latencies(url: str, n: int) -> tuple[list[float], list[float]]:
    """``n`` turns with the instrumentation on and ``n`` with it off, alternating one by one
    (which goes first alternates too) in this process, so both meet the same load. Off is what a
    process with no provider does: ``telemetry.active()`` says no and every wrapper calls
    straight through."""
    real = telemetry.active
    app = akter.App([Bench], database_url=url)
    on: list[float] = []
    off: list[float] = []
    async with app.client() as client:
        actor = client.actor(Bench, "sequential", tenant=TENANT)
        for _ in range(WARM_UP):
            await actor.send(bump, Bump(1))
        try:
            for i in range(n):
                for check, into in ((real, on), (_off, off))[:: 1 if i % 2 else -1]:
                    telemetry.active = check
                    started = time.perf_counter()
                    await actor.send(bump, Bump(1))
                    into.append(time.perf_counter() - started)
        finally:
            telemetry.active = real
    return on, off


def child(mode: str, url: str, n: int, micro_n: int) -> None:
    exporter = install(mode)
    assert telemetry.active() is (mode != "none")
    on, off = asyncio.run(turn_latencies(url, n))
    # the turns' own spans (the wrapper timing below records its own)
    spans = len(exporter.get_finished_spans()) if exporter is not None else 0
    wrapper = asyncio.run(wrapper_cost(micro_n))
    print(
        json.dumps(
            {
                "mode": mode,
                "p50_ms": pct(on, 50) * 1000,
                "p90_ms": pct(on, 90) * 1000,
                "mean_ms": statistics.fmean(on) * 1000,
                "off_p50_ms": pct(off, 50) * 1000,
                "off_mean_ms": statistics.fmean(off) * 1000,
                "added_p50_ms": (pct(on, 50) - pct(off, 50)) * 1000,
                "added_mean_ms": (statistics.fmean(on) - statistics.fmean(off)) * 1000,
                "spans_recorded": spans,
                **wrapper,
            }
        )
    )


def run_child(mode: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--url", url, "--n", str(args.n)]
    done = subprocess.run(
        [*command, "--micro-n", str(args.micro_n)], capture_output=True, text=True, check=True, timeout=600
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(args: argparse.Namespace) -> tuple[dict[str, str], dict[str, list[dict[str, Any]]]]:
    server_url = resolve_database_url(args.database_url)
    dbname = f"akter_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")
        version = admin.execute("SHOW server_version").fetchone()
    url = psycopg.conninfo.make_conninfo(server_url, dbname=dbname)
    rounds: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    try:
        migrate(url)
        for r in range(args.rounds):
            order = MODES[r % 3 :] + MODES[: r % 3]
            for mode in order:
                rounds[mode].append(run_child(mode, url, args))
            print(
                f"round {r + 1}/{args.rounds}: "
                + ", ".join(f"{m} p50 {rounds[m][-1]['p50_ms']:.3f} ms" for m in MODES)
            )
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")
    return {"server_version": str(version[0]) if version else "?"}, rounds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--n", type=int, default=2000, help="sequential turns per round and configuration")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--micro-n", type=int, default=100_000, help="wrapper calls per round")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "telemetry.json"))
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.url, args.n, args.micro_n)
        return

    server, rounds = measure(args)
    keys = ("p50_ms", "p90_ms", "mean_ms", "off_p50_ms", "added_p50_ms", "added_mean_ms", "wrapper_us")
    results: dict[str, dict[str, float]] = {
        m: {k: statistics.median(r[k] for r in rounds[m]) for k in keys} for m in MODES
    }
    for m in MODES:
        # spans recorded per instrumented turn (warm-up included): the sdk records each turn's one
        results[m]["spans_per_turn"] = rounds[m][-1]["spans_recorded"] / (args.n + WARM_UP)
        results[m]["added_over_off_p50"] = results[m]["added_p50_ms"] / results[m]["off_p50_ms"]
    print(
        f"PostgreSQL {server['server_version']}, Python {platform.python_version()}, {os.cpu_count()} cores,"
        f" n={args.n} sequential turns, {args.rounds} rounds"
    )
    header = ("p50 ms", "off p50", "+p50 ms", "+mean ms", "+%")
    print(f"{'configuration':14} " + " ".join(f"{h:>8}" for h in header) + f" {'wrapper us':>11}")
    for m in MODES:
        r = results[m]
        print(
            f"{m:14} {r['p50_ms']:8.3f} {r['off_p50_ms']:8.3f} {r['added_p50_ms']:8.3f}"
            f" {r['added_mean_ms']:8.3f} {r['added_over_off_p50'] * 100:8.1f} {r['wrapper_us']:11.2f}"
        )
    document = {
        "server": server,
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "n": args.n,
        "rounds": args.rounds,
        "micro_n": args.micro_n,
        "results": results,
        "per_round": rounds,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

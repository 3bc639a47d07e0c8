"""What akter's OpenTelemetry wrappers cost a turn when no SDK is configured (and with one).

    python benchmarks/telemetry_overhead.py [--n 200000] [--sdk] [--out benchmarks/results/telemetry.json]

Times ``akter.telemetry.traced_turn`` around a coroutine that returns at once, against the bare
coroutine, in alternating slices so that the machine's load swings hit both alike; the difference
per call is what every turn pays for its span and metrics. With ``--sdk`` an SDK tracer and meter
provider (no exporter, so export cost is left out) is installed first. Compare the figure with a
turn's latency in ``benchmarks/results/turns*.json`` (about a millisecond: one commit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akter import telemetry
from akter.ids import ActorRef


@attrs.frozen
class _Command:
    name: str = "add"


@attrs.frozen
class _Record:
    outcome: Any = None
    replayed: bool = False


async def bare(*_args: Any) -> _Record:
    return _Record()


async def slice_of(fn: Any, args: tuple[Any, ...], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        await fn(*args)
    return (time.perf_counter() - started) / n


async def measure(n: int, rounds: int) -> dict[str, Any]:
    traced = telemetry.traced_turn(bare)
    ref = ActorRef("bench", "Counter", "c-1")
    args = (None, _Command(), ref, None, "c-1", None, None)
    plain, wrapped = [], []
    for _ in range(rounds):
        plain.append(await slice_of(bare, args, n))
        wrapped.append(await slice_of(traced, args, n))
    p, w = statistics.median(plain), statistics.median(wrapped)
    return {"bare_us": p * 1e6, "traced_us": w * 1e6, "overhead_us": (w - p) * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sdk", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.sdk:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())
        metrics.set_meter_provider(MeterProvider())
    result = {
        "sdk": args.sdk,
        "n": args.n,
        "rounds": args.rounds,
        **asyncio.run(measure(args.n, args.rounds)),
    }
    print(
        f"{'SDK' if args.sdk else 'no SDK'}: bare {result['bare_us']:.2f} us,"
        f" traced {result['traced_us']:.2f} us, overhead {result['overhead_us']:.2f} us per turn"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

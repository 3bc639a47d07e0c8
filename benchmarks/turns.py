"""Turns against the commit floor, in one run on one server.

    python benchmarks/turns.py [--database-url URL] [--n 2000] [--out benchmarks/results/turns.json]

Measures, on a fresh database of the chosen server (default: AKTER_DATABASE_URL, else the
embedded PostgreSQL):

* the commit floor: single-row INSERT + COMMIT from this Python process (async psycopg, the same
  driver the kernel uses), on 1 connection and on 8 connections;
* sequential turns on one actor (each: lock, load, handler, state + event + receipt, commit);
* turns over 10,000 actors with 16 and with 64 concurrent callers.

Prints latency percentiles and throughput, the ratios to the floor, and writes JSON. Figures on
shared machines are noisy: read the ratios, which compare runs made minutes apart on one server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import akter  # noqa: E402
from akter.store.database import resolve_database_url  # noqa: E402


@attrs.frozen
class Tally:
    count: int = 0


@attrs.frozen
class Bump:
    by: int


@attrs.frozen
class Bumped:
    total: int


Bench = akter.Actor("Bench", state=Tally, events=[Bumped])


@Bench.command
def bump(turn: akter.Turn[Tally], cmd: Bump) -> int:
    total = turn.state.count + cmd.by
    turn.state = Tally(count=total)
    turn.emit(Bumped(total=total))
    return total


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def summary(name: str, latencies: list[float], elapsed: float, ops: int) -> dict[str, Any]:
    return {
        "name": name,
        "ops": ops,
        "per_second": ops / elapsed,
        "p50_ms": pct(latencies, 50) * 1000,
        "p90_ms": pct(latencies, 90) * 1000,
        "p99_ms": pct(latencies, 99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
    }


async def floor(url: str, connections: int, n: int) -> dict[str, Any]:
    # autocommit: the INSERT and its COMMIT are one round trip, the cheapest durable write there is
    conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(connections)]
    latencies: list[float] = []
    per_conn = n // connections

    async def worker(conn: psycopg.AsyncConnection[Any]) -> None:
        for i in range(per_conn):
            t = time.perf_counter()
            await conn.execute("INSERT INTO bench_floor (k, v) VALUES (%s, %s)", (uuid.uuid4().hex, i))
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - start
    for c in conns:
        await c.close()
    return summary(f"floor, {connections} connection(s)", latencies, elapsed, per_conn * connections)


async def sequential_turns(client: akter.Client, n: int) -> dict[str, Any]:
    handle = client.actor(Bench, "sequential", tenant="bench")
    for _ in range(50):  # warm the pool and the prepared statements
        await handle.send(bump, Bump(1))
    latencies: list[float] = []
    start = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        await handle.send(bump, Bump(1))
        latencies.append(time.perf_counter() - t)
    return summary("sequential turns, one actor", latencies, time.perf_counter() - start, n)


async def concurrent_turns(client: akter.Client, callers: int, n: int, actors: int) -> dict[str, Any]:
    handles = [client.actor(Bench, f"a{i}", tenant="bench") for i in range(actors)]
    rng = random.Random(callers)
    latencies: list[float] = []
    per_caller = n // callers

    async def caller() -> None:
        for _ in range(per_caller):
            h = handles[rng.randrange(actors)]
            t = time.perf_counter()
            await h.send(bump, Bump(1))
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return summary(
        f"{actors:,} actors, {callers} callers", latencies, time.perf_counter() - start, per_caller * callers
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "turns.json"))
    args = parser.parse_args()

    server_url = resolve_database_url(args.database_url)
    dbname = f"akter_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")
        version = admin.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    url = psycopg.conninfo.make_conninfo(server_url, dbname=dbname)
    try:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CREATE TABLE bench_floor (k text PRIMARY KEY, v int)")
        results = [await floor(url, 1, args.n), await floor(url, 8, args.n * 2)]
        for callers in (16, 64):
            app = akter.App([Bench], database_url=url, pool_size=min(callers, 16))
            async with app.client() as client:
                if callers == 16:
                    results.append(await sequential_turns(client, args.n))
                results.append(await concurrent_turns(client, callers, args.n * 2, 10_000))
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")

    by_name = {r["name"]: r for r in results}
    floor1 = by_name["floor, 1 connection(s)"]
    floor8 = by_name["floor, 8 connection(s)"]
    seq = by_name["sequential turns, one actor"]
    c64 = by_name["10,000 actors, 64 callers"]
    ratios = {
        "sequential_turn_p50_over_floor_p50": seq["p50_ms"] / floor1["p50_ms"],
        "callers64_throughput_over_floor8": c64["per_second"] / floor8["per_second"],
    }
    targets = {
        "sequential_turn_p50_over_floor_p50": ("<=", 2.0),
        "callers64_throughput_over_floor8": (">=", 0.6),
    }
    print(f"PostgreSQL {version}, Python {platform.python_version()}, {args.n} ops per phase")
    print(f"{'phase':34} {'ops/s':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}")
    for r in results:
        print(f"{r['name']:34} {r['per_second']:9.0f} {r['p50_ms']:8.3f} {r['p90_ms']:8.3f} {r['p99_ms']:8.3f}")
    for key, value in ratios.items():
        op, bound = targets[key]
        ok = value <= bound if op == "<=" else value >= bound
        print(f"{key:40} {value:6.2f}  target {op} {bound}  {'met' if ok else 'MISSED'}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "server_version": version,
                "python": platform.python_version(),
                "n": args.n,
                "results": results,
                "ratios": ratios,
                "targets": {k: f"{op} {b}" for k, (op, b) in targets.items()},
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main())

"""Turns against the commit floor, in one run on one server.

    python benchmarks/turns.py [--database-url URL] [--n 1000] [--rounds 5] [--pool-size 10]
                               [--out benchmarks/results/turns.json]

Measures, on a fresh database of the chosen server (default: AKTER_DATABASE_URL, else the
embedded PostgreSQL):

* the commit floor: an autocommit single-row INSERT from this Python process (async psycopg, the
  driver the kernel uses; one round trip, its COMMIT included), on 1 and on 8 connections;
* sequential turns on one actor (each: lock, load, handler, state + event + receipt, commit);
* turns over 10,000 actors with 16 and with 64 concurrent callers sharing one App's pool.

The 10,000 actors are created before anything is timed, so the phases measure steady-state turns
(an actor's first turn also inserts its row).

The machines this runs on are shared, and their load swings within seconds, so each comparison
with the floor is made at the same moments: a round runs ``n`` sequential turns and ``n``
1-connection floor INSERTs alternately, one by one, then throughput slices of ``2n`` operations
in the order floor-8, 16 callers, floor-8, 64 callers, floor-8, each turn slice compared with the
mean of the floor slices on either side. A round's ratios are taken from its own samples; the
reported ratio is the median over the rounds, and the targets are checked against it.

Prints latency percentiles and throughput per phase (all rounds pooled; the throughput of the
sequential phases is 1 / mean latency) and the ratios, and writes it all, each round's ratios and
each slice's rate included, as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import akter
from akter.ids import routing_key
from akter.store.database import resolve_database_url
from akter.store.migrate import migrate

ACTORS = 10_000
TENANT = "bench"


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


def summary(name: str, latencies: list[float], elapsed: float) -> dict[str, Any]:
    return {
        "name": name,
        "ops": len(latencies),
        "per_second": len(latencies) / elapsed,
        "p50_ms": pct(latencies, 50) * 1000,
        "p90_ms": pct(latencies, 90) * 1000,
        "p99_ms": pct(latencies, 99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
    }


@attrs.define
class Samples:
    """Latencies of one phase, and the wall time its operations took (for throughput)."""

    latencies: list[float] = attrs.Factory(list)
    elapsed: float = 0.0
    #: throughput of each slice, for the phases measured in slices
    rates: list[float] = attrs.Factory(list)


class Bencher:
    def __init__(self, client: akter.Client, floor_conns: list[psycopg.AsyncConnection[Any]]) -> None:
        self.floor_conns = floor_conns
        self.handles = [client.actor(Bench, f"a{i}", tenant=TENANT) for i in range(ACTORS)]
        self.sequential = client.actor(Bench, "sequential", tenant=TENANT)
        self.rng = random.Random(7)

    async def insert(self, conn: int) -> None:
        # autocommit: the INSERT and its COMMIT are one round trip, the cheapest durable write
        await self.floor_conns[conn].execute(
            "INSERT INTO bench_floor (k, v) VALUES (%s, %s)", (uuid.uuid4().hex, conn)
        )

    async def sequential_turn(self, _: int) -> None:
        await self.sequential.send(bump, Bump(1))

    async def random_turn(self, _: int) -> None:
        await self.handles[self.rng.randrange(ACTORS)].send(bump, Bump(1))

    async def paired(self, n: int, floor: Samples, turns: Samples) -> None:
        """``n`` floor INSERTs and ``n`` sequential turns, alternating one by one (which goes
        first alternates too), so that both meet the same machine at the same moments."""
        for i in range(n):
            for op, into in ((self.insert, floor), (self.sequential_turn, turns))[:: 1 if i % 2 else -1]:
                t = time.perf_counter()
                await op(0)
                took = time.perf_counter() - t
                into.latencies.append(took)
                into.elapsed += took

    async def slice(self, op: Callable[[int], Awaitable[None]], workers: int, n: int, into: Samples) -> float:
        """``n`` calls of ``op`` spread over ``workers`` concurrent tasks; returns the rate."""
        per_worker = n // workers

        async def worker(w: int) -> None:
            for _ in range(per_worker):
                t = time.perf_counter()
                await op(w)
                into.latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(workers)))
        elapsed = time.perf_counter() - start
        into.elapsed += elapsed
        into.rates.append(per_worker * workers / elapsed)
        return into.rates[-1]


async def create_actors(url: str) -> None:
    """The 10,000 actor rows, as their first turns would have created them (not timed)."""
    rows = [(routing_key(TENANT, Bench.name, f"a{i}"), TENANT, Bench.name, f"a{i}") for i in range(ACTORS)]
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = conn.cursor()
        async with cur.copy(
            "COPY actor_generations (routing_key, tenant, actor_type, actor_id) FROM STDIN"
        ) as copy:
            for row in rows:
                await copy.write_row(row)


FLOOR1 = "floor, 1 connection"
FLOOR8 = "floor, 8 connections"
SEQUENTIAL = "sequential turns, one actor"
CALLERS16 = f"{ACTORS:,} actors, 16 callers"
CALLERS64 = f"{ACTORS:,} actors, 64 callers"


PHASE_NAMES = (FLOOR1, FLOOR8, SEQUENTIAL, CALLERS16, CALLERS64)


async def run_round(b: Bencher, n: int, phases: dict[str, Samples]) -> dict[str, float]:
    """One round: the paired latency run, then throughput slices, each turn slice between two
    floor slices. Returns this round's ratios to the floor."""
    before = len(phases[FLOOR1].latencies)
    await b.paired(n, phases[FLOOR1], phases[SEQUENTIAL])
    ratios = {
        "sequential_turn_p50_over_floor_p50": pct(phases[SEQUENTIAL].latencies[before:], 50)
        / pct(phases[FLOOR1].latencies[before:], 50)
    }
    floor8 = await b.slice(b.insert, 8, n * 2, phases[FLOOR8])
    for callers, name in ((16, CALLERS16), (64, CALLERS64)):
        rate = await b.slice(b.random_turn, callers, n * 2, phases[name])
        after = await b.slice(b.insert, 8, n * 2, phases[FLOOR8])
        ratios[f"callers{callers}_throughput_over_floor8"] = rate / ((floor8 + after) / 2)
        floor8 = after
    return ratios


#: issue 11's targets: a sequential turn p50 at most 2x the floor's; 64 callers at least half
#: the eight-connection floor's rate
TARGETS = {
    "sequential_turn_p50_over_floor_p50": ("<=", 2.0),
    "callers64_throughput_over_floor8": (">=", 0.5),
}


async def measure(
    args: argparse.Namespace,
) -> tuple[dict[str, str], dict[str, Samples], list[dict[str, float]]]:
    """The samples of every phase and each round's ratios, on a fresh database of the server
    (dropped afterwards)."""
    server_url = resolve_database_url(args.database_url)
    dbname = f"akter_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")
        settings: dict[str, str] = dict(
            admin.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN"
                " ('server_version', 'synchronous_commit', 'fsync', 'wal_sync_method', 'shared_buffers')"
            ).fetchall()
        )
    url = psycopg.conninfo.make_conninfo(server_url, dbname=dbname)
    rounds: list[dict[str, float]] = []
    phases = {name: Samples() for name in PHASE_NAMES}
    try:
        migrate(url)
        with psycopg.connect(url, autocommit=True) as setup:
            setup.execute("CREATE TABLE bench_floor (k text PRIMARY KEY, v int)")
        await create_actors(url)
        floor_conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(8)]
        app = (
            akter.App([Bench], database_url=url)
            if args.pool_size is None
            else akter.App([Bench], database_url=url, pool_size=args.pool_size)
        )
        args.pool_size = app.pool_size
        async with app.client() as client:
            b = Bencher(client, floor_conns)
            # warm up: connections, the functions' plan caches, the sequential actor's row
            warm = {name: Samples() for name in PHASE_NAMES}
            await b.paired(100, warm[FLOOR1], warm[SEQUENTIAL])
            await b.slice(b.random_turn, 64, 640, warm[CALLERS64])
            for r in range(args.rounds):
                rounds.append(await run_round(b, args.n, phases))
                print(
                    f"round {r + 1}/{args.rounds}: "
                    + ", ".join(f"{k} {v:.2f}" for k, v in rounds[-1].items())
                )
        for conn in floor_conns:
            await conn.close()
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")
    return settings, phases, rounds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--n", type=int, default=1000, help="sequential pairs per round; slices are 2n")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--pool-size", type=int, default=None, help="the App's pool; default: App's own (docs/performance.md)"
    )
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "turns.json"))
    args = parser.parse_args()

    settings, phases, rounds = asyncio.run(measure(args))
    results = [summary(name, phases[name].latencies, phases[name].elapsed) for name in PHASE_NAMES]
    ratios = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}

    print(
        f"PostgreSQL {settings['server_version']}, Python {platform.python_version()},"
        f" {os.cpu_count()} cores, pool {args.pool_size}, n={args.n}, {args.rounds} rounds"
    )
    print(f"{'phase':34} {'ops/s':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}")
    for r in results:
        print(
            f"{r['name']:34} {r['per_second']:9.0f} {r['p50_ms']:8.3f} {r['p90_ms']:8.3f} {r['p99_ms']:8.3f}"
        )
    for key, value in ratios.items():
        line = f"{key:40} {value:6.2f}"
        if key in TARGETS:
            op, bound = TARGETS[key]
            ok = value <= bound if op == "<=" else value >= bound
            line += f"  target {op} {bound}  {'met' if ok else 'MISSED'}"
        print(line)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "server": settings,
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "pool_size": args.pool_size,
        "n": args.n,
        "rounds": args.rounds,
        "results": results,
        "ratios": ratios,
        "targets": {k: f"{op} {b}" for k, (op, b) in TARGETS.items()},
        "ratios_per_round": rounds,
        "slice_rates": {name: phases[name].rates for name in (FLOOR8, CALLERS16, CALLERS64)},
    }
    out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

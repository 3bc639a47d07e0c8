"""The relay's figures, in one run on one server.

    python benchmarks/relay.py [--database-url URL] [--out benchmarks/results/relay.json]

On a fresh database of the chosen server (default: AKTER_DATABASE_URL, else the embedded
PostgreSQL) it measures:

* delivery latency — from the commit of a sender's turn that stages an intent due now to the
  commit of the receiver's turn — with notifications and with polling only (samples spaced by a
  random gap, so polling is seen at every phase of its interval). The relay runs in this process
  and the receiver's commit is observed by a ``TurnHook.after_commit``;
* intents delivered per second by one and by three ``akter relay`` processes: N intents are
  staged due in an hour, the durable clock is jumped an hour, and the clock runs until the outbox
  is empty;
* the cost of an idle relay pass (the claim statement, which also reports the next due time
  within the poll interval, over all 256 buckets) with an empty outbox and with 100,000 future
  timers, and the plan of the due scan.

Prints a table and writes JSON. Figures on shared machines are noisy; each run states its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import akter  # noqa: E402 -- the checkout's akter, after the path above
from akter.actor.kernel import Committed  # noqa: E402 -- the checkout's akter, after the path above
from akter.outbox import queries  # noqa: E402 -- the checkout's akter, after the path above
from akter.outbox.ownership import ALL_BUCKETS  # noqa: E402 -- the checkout's akter, after the path above
from akter.store.database import resolve_database_url  # noqa: E402 -- the checkout's akter, after the path above
from akter.testing import Clock  # noqa: E402 -- the checkout's akter, after the path above


@attrs.frozen
class Empty:
    pass


@attrs.frozen
class Fan:
    first: int
    count: int
    after_ms: int | None = None


@attrs.frozen
class Ping:
    n: int


Origin = akter.Actor("Origin", state=Empty)
Target = akter.Actor("Target", state=Empty)

#: command id -> n of receiver turns in flight in this process (read by the latency hook)
SEEN: dict[str, int] = {}


@Target.command
def ping(turn: akter.Turn[Empty], p: Ping) -> None:
    SEEN[turn.command_id] = p.n


@Origin.command
def fan(turn: akter.Turn[Empty], f: Fan) -> None:
    after = None if f.after_ms is None else timedelta(milliseconds=f.after_ms)
    for n in range(f.first, f.first + f.count):
        turn.send(f"t{n}", ping, Ping(n), after=after)


#: what ``akter relay relay:app`` runs in the processes this script starts
app = akter.App([Origin, Target])


class Arrivals:
    """A TurnHook that notes when each receiver turn committed."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[float]] = {}

    async def before_commit(self, conn: Any, turn: Any, record: Committed) -> None:
        return None

    def after_commit(self, record: Committed) -> None:
        n = SEEN.pop(record.command_id, None)
        future = self.waiting.get(n) if n is not None else None
        if future is not None and not future.done():
            future.set_result(time.perf_counter())


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def latency(url: str, *, notifications: bool, samples: int, poll: float) -> dict[str, Any]:
    bench = akter.App([Origin, Target], database_url=url)
    arrivals = Arrivals()
    bench.hooks.append(arrivals)
    settings = akter.RelaySettings(notifications=notifications, poll_interval=timedelta(seconds=poll))
    rng = random.Random(1)
    loop = asyncio.get_running_loop()
    results: list[float] = []
    # the sender's own turn, timed alongside: a yardstick for what one turn costs right now
    turns: list[float] = []
    async with bench.client() as client, bench.relay(settings) as relay:
        await relay.idle()
        origin = client.actor(Origin, "latency", tenant="bench")
        for i in range(samples + 20):
            arrivals.waiting[i] = loop.create_future()
            started = time.perf_counter()
            await origin.send(fan, Fan(first=i, count=1))
            committed = time.perf_counter()
            if i >= 20:
                turns.append(committed - started)
            arrived = await asyncio.wait_for(arrivals.waiting[i], 30)
            del arrivals.waiting[i]
            if i >= 20:  # the first deliveries warm the pool and the prepared statements
                results.append(arrived - committed)
            await asyncio.sleep(rng.uniform(0, poll if not notifications else 0.005))
    return {
        "name": f"latency, {'notifications' if notifications else f'polling every {poll:g} s'}",
        "samples": samples,
        "p50_ms": pct(results, 50) * 1000,
        "p90_ms": pct(results, 90) * 1000,
        "p99_ms": pct(results, 99) * 1000,
        "mean_ms": statistics.fmean(results) * 1000,
        "sender_turn_p50_ms": pct(turns, 50) * 1000,
        "sender_turn_p99_ms": pct(turns, 99) * 1000,
    }


def start_relays(url: str, count: int) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "AKTER_DATABASE_URL": url,
        "PYTHONPATH": f"{ROOT / 'benchmarks'}{os.pathsep}{ROOT}",
        "AKTER_LOG_LEVEL": "warning",
        "AKTER_RELAY_HEARTBEAT": "0.2",
        "AKTER_RELAY_OWNERSHIP_LEASE": "1",
    }
    return [
        subprocess.Popen([sys.executable, "-m", "akter.cli", "relay", "relay:app"], env=env, cwd=ROOT)
        for _ in range(count)
    ]


async def wait_for(conn: psycopg.AsyncConnection[Any], sql: str, want: int, within: float = 120) -> None:
    end = time.monotonic() + within
    while True:
        row = await (await conn.execute(sql)).fetchone()
        if row is not None and row[0] == want:
            return
        if time.monotonic() > end:
            raise TimeoutError(f"{sql} did not reach {want} (last {row})")
        await asyncio.sleep(0.02)


async def throughput(url: str, processes: int, intents: int) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as peek:
        await peek.execute(
            "TRUNCATE actor_outbox, actor_receipts, actor_state, actor_generations, actor_events"
        )
        procs = start_relays(url, processes)
        try:
            owners = (
                "SELECT count(DISTINCT owner) FROM akter_relay_buckets"
                " WHERE owner IS NOT NULL AND expires_at > clock_timestamp()"
            )
            await wait_for(peek, owners, processes)
            owned = "SELECT count(*) FROM akter_relay_buckets WHERE expires_at > clock_timestamp()"
            await wait_for(peek, owned, 256)
            bench = akter.App([Origin, Target], database_url=url)
            async with bench.client() as client:
                per_turn = 200
                await asyncio.gather(
                    *(
                        client.actor(Origin, f"o{first}", tenant="bench").send(
                            fan, Fan(first=first, count=per_turn, after_ms=3_600_000)
                        )
                        for first in range(0, intents, per_turn)
                    )
                )
            start = time.perf_counter()
            await Clock(url).advance(timedelta(hours=1))
            await wait_for(peek, "SELECT count(*) FROM actor_outbox", 0, within=300)
            elapsed = time.perf_counter() - start
            receipts = "SELECT count(*) FROM actor_receipts WHERE actor_type = 'Target'"
            row = await (await peek.execute(receipts)).fetchone()
            delivered = row[0] if row else 0
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=60)
        await Clock(url).reset()
    return {
        "name": f"throughput, {processes} relay process(es), best round",
        "processes": processes,
        "intents": intents,
        "delivered": delivered,
        "seconds": elapsed,
        "per_second": delivered / elapsed,
    }


_TIMERS = """
INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket,
       due_at, timer_key, target_type, target_id, command, payload, caller, created_at)
SELECT rk, 'bench', 'Origin', 'o' || g, 'v1.0.0.' || md5(g::text), (rk >> 56)::smallint,
       akter_now() + interval '1 hour' + random() * interval '30 days', 'k',
       'Target', 't' || g, 'ping', '\\x007b226e223a307d', '\\x007b7d', akter_now()
  FROM generate_series(1, %s) AS g,
       LATERAL (SELECT ('x' || substr(md5(g::text), 1, 16))::bit(64)::bigint AS rk) AS k
"""


async def idle_passes(url: str, sizes: list[int], passes: int) -> list[dict[str, Any]]:
    """Idle passes over outboxes of each size, interleaved pass by pass, so that the load of a
    shared machine falls on every size alike. Each size is a copy of ``actor_outbox`` in its own
    schema, reached through ``search_path``, with the same indexes."""
    conns: list[psycopg.AsyncConnection[Any]] = []
    for size in sizes:
        schema = f"timers_{size}"
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as setup:
            await setup.execute(f"CREATE SCHEMA {schema}")
            await setup.execute(
                f"CREATE TABLE {schema}.actor_outbox (LIKE public.actor_outbox INCLUDING ALL)"
            )
            await setup.execute(f"SET search_path = {schema}, public")
            if size:
                # future timers spread over every bucket and the next 30 days
                await setup.execute(_TIMERS, (size,))
            await setup.execute(f"VACUUM ANALYZE {schema}.actor_outbox")
        conns.append(
            await psycopg.AsyncConnection.connect(
                url, autocommit=True, options=f"-c search_path={schema},public"
            )
        )
    params = {
        "head": list(ALL_BUCKETS),
        "tail": [],
        "probe": True,
        "limit": 64,
        "horizon_ms": 1_000,
        "lease_ms": 30_000,
        "token": uuid.uuid4(),
        "member": "bench",
    }
    times: list[list[float]] = [[] for _ in sizes]
    try:
        for i in range(passes + 50):
            for conn, samples in zip(conns, times, strict=True):
                t = time.perf_counter()
                await conn.execute(queries.CLAIM, params, prepare=True)
                if i >= 50:
                    samples.append(time.perf_counter() - t)
        explain = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) " + queries.CLAIM
        plans = []
        for conn in conns:
            async with conn.transaction(force_rollback=True):
                rows = await (await conn.execute(explain, params)).fetchall()
            plans.append("\n".join(r[0] for r in rows))
    finally:
        for conn in conns:
            await conn.close()
    return [
        {
            "name": f"idle pass, {size:,} future timers",
            "timers": size,
            "passes": passes,
            "p50_ms": pct(samples, 50) * 1000,
            "p99_ms": pct(samples, 99) * 1000,
            "mean_ms": statistics.fmean(samples) * 1000,
            "plan": plan,
        }
        for size, samples, plan in zip(sizes, times, plans, strict=True)
    ]


def write(out: Path, text: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--intents", type=int, default=6000)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "relay.json"))
    args = parser.parse_args()

    load_at_start = os.getloadavg()
    server_url = resolve_database_url(args.database_url)
    dbname = f"akter_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")
        version = admin.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    url = psycopg.conninfo.make_conninfo(server_url, dbname=dbname)
    try:
        results = [
            await latency(url, notifications=True, samples=args.samples, poll=1.0),
            await latency(url, notifications=False, samples=max(args.samples // 5, 40), poll=0.25),
        ]
        # alternating rounds, best of each: the machine is shared, and a round that a neighbour's
        # load slowed says nothing about the relay
        rounds = [await throughput(url, n, args.intents) for n in (1, 3, 1, 3)]
        for n in (1, 3):
            mine = [r for r in rounds if r["processes"] == n]
            best = max(mine, key=lambda r: r["per_second"])
            results.append({**best, "rounds_per_second": [r["per_second"] for r in mine]})
        # past 100,000 the index is as deep as it gets for a long while: the cost stays flat
        results += await idle_passes(url, [0, 100_000, 1_000_000], 1000)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")

    notified, _polled, one, three, empty, full, _million = results
    checks = {
        "latency_p50_ms_notifications": (notified["p50_ms"], "<=", 10.0),
        "latency_p99_ms_notifications": (notified["p99_ms"], "<=", 50.0),
        "three_over_one_process_throughput": (three["per_second"] / one["per_second"], ">", 1.0),
        "idle_pass_100k_minus_empty_p50_ms": (full["p50_ms"] - empty["p50_ms"], "<=", 0.1),
    }
    print(
        f"PostgreSQL {version}, Python {platform.python_version()}, {os.cpu_count()} cores,"
        f" load average at start {load_at_start[0]:.1f}"
    )
    print(f"{'phase':40} {'p50 ms':>8} {'p99 ms':>8} {'per s':>9}")
    for r in results:
        p50 = f"{r['p50_ms']:8.2f}" if "p50_ms" in r else " " * 8
        p99 = f"{r['p99_ms']:8.2f}" if "p99_ms" in r else " " * 8
        rate = f"{r['per_second']:9.0f}" if "per_second" in r else ""
        print(f"{r['name']:40} {p50} {p99} {rate}")
    verdicts = {}
    for key, (value, op, bound) in checks.items():
        ok = value <= bound if op == "<=" else value > bound
        verdicts[key] = {"value": value, "target": f"{op} {bound}", "met": ok}
        print(f"{key:40} {value:8.2f}  target {op} {bound}  {'met' if ok else 'MISSED'}")
    print(
        f"yardstick: the sender's own turn, p50 {notified['sender_turn_p50_ms']:.2f} ms,"
        f" p99 {notified['sender_turn_p99_ms']:.2f} ms (delivery is a claim plus such a turn)"
    )
    print("due scan plan (the claim, idle), 100,000 future timers:\n" + full["plan"])
    print("(the figures of a shared machine under load are noisy; see load_average_at_start)")
    write(
        Path(args.out),
        json.dumps(
            {
                "server_version": version,
                "python": platform.python_version(),
                "cpu_count": os.cpu_count(),
                # the machine is shared: the load before the run says how noisy the figures are
                "load_average_at_start": load_at_start,
                "results": results,
                "targets": verdicts,
            },
            indent=2,
        )
        + "\n",
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    asyncio.run(main())

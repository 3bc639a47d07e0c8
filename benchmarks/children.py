"""Fan-out: one parent execution that runs N child executions on other actors, and waits for all.

Run (a few minutes on 2 cores)::

    python benchmarks/children.py --database-url postgresql://postgres@127.0.0.1:5432/postgres \\
        [--n 1000] [--warehouses 50] [--limit 0 --limit 100]

``--database-url`` names a server and a role that may create databases: the script creates its
own database there and drops it at the end. The relay runs in this process (``app.relay()``),
so the process measured is the parent's and the children's runner at once.

For each ``--limit`` (0: no limit) it starts one ``Order`` whose body is
``akter.all(*(wf.run(Warehouse, w, Fulfil, line) for line in lines), limit=...)`` over N lines
spread over ``--warehouses`` actors; each child runs one trivial activity. It reports:

* ``seconds``: from the start command to the parent's result (every child finished and recorded);
* ``children_per_s``: N / seconds;
* ``parent_passes``: resume turns the parent took (each may replay its whole history);
* ``max_in_flight``: the most children running at once, from the executions' own start and finish
  times in the database;
* ``rss_mb_before`` / ``rss_mb_after`` / ``rss_mb_peak``: the process's resident memory before the
  start, after the result, and its peak (``ru_maxrss``) over the run so far;
* ``parent_step_rows``: the parent's history (one row per child).

Prints a table and writes ``benchmarks/results/children.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import akter  # noqa: E402 -- the akter of this tree, put first on sys.path above


@attrs.frozen
class Nothing:
    pass


@attrs.frozen
class Line:
    sku: str
    warehouse: str


@attrs.frozen
class OrderIn:
    lines: tuple[Line, ...]
    limit: int | None = None


Orders = akter.Actor("Orders", state=Nothing)
Warehouse = akter.Actor("Warehouse", state=Nothing)
Fulfil = Warehouse.workflow("Fulfil", input=Line, output=str)
pick = Fulfil.activity("pick", success=str)
Order = Orders.workflow("Order", input=OrderIn, output=int)
ship = Order.child("ship", Fulfil)


async def _pick(sku: str) -> str:
    return sku


@Fulfil.body
async def fulfil(wf: akter.WorkflowContext, line: Line) -> str:
    return await pick(_pick, line.sku)


@Order.body
async def order(wf: akter.WorkflowContext, o: OrderIn) -> int:
    results = await akter.all(
        *(wf.run(Warehouse, line.warehouse, Fulfil, line) for line in o.lines), limit=o.limit
    )
    return sum(1 for r in results if hasattr(r, "unwrap"))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def max_overlap(spans: list[tuple[Any, Any]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, delta in edges:
        now += delta
        most = max(most, now)
    return most


async def one(url: str, n: int, warehouses: int, limit: int | None, tag: str) -> dict[str, Any]:
    app = akter.App([Orders, Warehouse], database_url=url, migrate_on_start=True)
    lines = tuple(Line(f"sku-{i}", f"w-{i % warehouses}") for i in range(n))
    async with app, app.relay(), app.client() as client:
        gc.collect()
        before = rss_mb()
        parent = client.actor(Orders, f"o-{tag}", tenant="bench")
        began = time.perf_counter()
        run = await parent.start(Order, OrderIn(lines, limit))
        result = await run.result(timeout=3600)
        seconds = time.perf_counter() - began
        after = rss_mb()
    assert result.unwrap() == n, result
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT started_at, finished_at FROM actor_workflow_executions WHERE parent_id = %s",
            (run.execution_id,),
        )
        spans = await cur.fetchall()
        cur = await conn.execute(
            "SELECT count(*) FROM actor_receipts WHERE actor_id = %s AND command = 'akter.wf.resume'",
            (f"o-{tag}",),
        )
        passes = (await cur.fetchone() or (0,))[0]
        cur = await conn.execute(
            "SELECT count(*) FROM actor_workflow_step WHERE execution_id = %s", (run.execution_id,)
        )
        rows = (await cur.fetchone() or (0,))[0]
    assert len(spans) == n
    return {
        "n": n,
        "limit": limit,
        "warehouses": warehouses,
        "seconds": round(seconds, 2),
        "children_per_s": round(n / seconds, 1),
        "parent_passes": passes,
        "max_in_flight": max_overlap(spans),
        "rss_mb_before": round(before, 1),
        "rss_mb_after": round(after, 1),
        "rss_mb_peak": round(peak_mb(), 1),
        "parent_step_rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--warehouses", type=int, default=50)
    parser.add_argument("--limit", type=int, action="append", help="0: no limit; repeatable")
    parser.add_argument("--out", default=str(HERE / "results" / "children.json"))
    args = parser.parse_args()
    limits = args.limit or [0, 100]
    name = f"akter_bench_children_{os.getpid()}"
    with psycopg.connect(args.database_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    url = psycopg.conninfo.make_conninfo(args.database_url, dbname=name)
    try:
        runs = [
            asyncio.run(one(url, args.n, args.warehouses, limit or None, str(i)))
            for i, limit in enumerate(limits)
        ]
    finally:
        with psycopg.connect(args.database_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]
    head = [
        "limit",
        "seconds",
        "children_per_s",
        "parent_passes",
        "max_in_flight",
        "rss_mb_before",
        "rss_mb_after",
        "rss_mb_peak",
    ]
    print(" | ".join(f"{h:>14}" for h in head))
    for r in runs:
        print(" | ".join(f"{(r[h] if r[h] is not None else '-')!s:>14}" for h in head))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    out = {
        "benchmark": "children",
        "commit": commit.stdout.strip(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Acting on every execution a filter matches holds one page, not the list.

    python benchmarks/operate_by_filter.py [--database-url URL] [--sizes 1000,10000]
                                           [--out benchmarks/results/operate-by-filter.json]

For each size N, on a fresh database of the chosen server (default: AKTER_DATABASE_URL), one
``Desk.Job`` execution of ``tests.apps.desk`` is started for real and left sleeping; N copies of
its execution row and step are made with SQL under real execution ids (minted in Python, as
``akter.ids`` does). Then ``client.each_matching("pause", filter)`` pauses every one — a status
read and a receipted pause turn each, a keyset page (100) at a time — while ``tracemalloc``
records the Python heap's peak above where it started. If the action collected the matching ids
(or its outcomes) first, the peak would grow with N; reading a page at a time, it does not.
Writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import akter  # noqa: E402 -- after the path above, so that tests.apps imports
from akter.ids import ActorRef, ExecutionId  # noqa: E402
from akter.store.migrate import migrate  # noqa: E402
from tests.apps import desk  # noqa: E402

_COPY_EXECUTIONS = """
INSERT INTO actor_workflow_executions
SELECT (x).* FROM (
    SELECT jsonb_populate_record(t, jsonb_build_object('execution_id', c.eid, 'key', c.key)) AS x
      FROM actor_workflow_executions t, copies c
     WHERE t.execution_id = %(template)s) s"""

_COPY_STEPS = """
INSERT INTO actor_workflow_step
SELECT (x).* FROM (
    SELECT jsonb_populate_record(t, jsonb_build_object('execution_id', c.eid)) AS x
      FROM actor_workflow_step t, copies c
     WHERE t.execution_id = %(template)s) s"""


async def one_size(server: str, n: int) -> dict[str, Any]:
    name = f"akter_bench_by_filter_{n}"
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as admin:
        await admin.execute(f"DROP DATABASE IF EXISTS {name}")
        await admin.execute(f"CREATE DATABASE {name}")
    url = server.rsplit("/", 1)[0] + "/" + name
    try:
        await asyncio.to_thread(migrate, url)
        app = desk.make_app(url)
        async with app.relay() as relay, app.client(akter.User("ops")) as client:
            front = client.actor(desk.Desk, "front", tenant="acme")
            template = (await front.start(desk.Job, desk.Task("template", "sleep"))).execution_id
            async with asyncio.timeout(60):
                await relay.idle()
            owner = ActorRef("acme", "Desk", "front")
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute("CREATE TEMPORARY TABLE copies (eid text, key text)")
                async with conn.cursor().copy("COPY copies FROM STDIN") as copy:
                    for i in range(n):
                        await copy.write_row((str(ExecutionId(owner, "Job", f"copy-{i}")), f"copy-{i}"))
                await conn.execute(_COPY_EXECUTIONS, {"template": template})
                await conn.execute(_COPY_STEPS, {"template": template})
                await conn.execute("ANALYZE actor_workflow_executions")
            where = akter.ExecutionFilter(tenant="acme", actor_type="Desk", key_prefix="copy-")
            tracemalloc.start()
            base, _ = tracemalloc.get_traced_memory()
            started = time.perf_counter()
            done = refused = 0
            async for acted in client.each_matching("pause", where, reason="bench"):
                done += acted.done
                refused += not acted.done
            seconds = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                cur = await conn.execute(
                    "SELECT count(*) FROM actor_workflow_executions WHERE status = 'paused'"
                    " AND starts_with(key, 'copy-')"
                )
                row = await cur.fetchone()
                paused = int(row[0]) if row is not None else 0
    finally:
        async with await psycopg.AsyncConnection.connect(server, autocommit=True) as admin:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return {
        "executions": n,
        "paused": paused,
        "done": done,
        "refused": refused,
        "seconds": round(seconds, 2),
        "per_second": round(n / seconds, 1),
        "heap_peak_kib": round((peak - base) / 1024, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("AKTER_DATABASE_URL"))
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/operate-by-filter.json"))
    args = parser.parse_args()
    if not args.database_url:
        parser.error("give --database-url (a server where this may create and drop databases)")
    rows = [await one_size(args.database_url, int(n)) for n in args.sizes.split(",")]
    print(f"{'executions':>10} {'paused':>7} {'seconds':>8} {'per s':>7} {'heap peak KiB':>14}")
    for r in rows:
        print(
            f"{r['executions']:>10} {r['paused']:>7} {r['seconds']:>8} {r['per_second']:>7}"
            f" {r['heap_peak_kib']:>14}"
        )
    result = {
        "benchmark": "pause every execution a filter matches (client.each_matching)",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")  # noqa: ASYNC240 -- once, at the end


if __name__ == "__main__":
    asyncio.run(main())

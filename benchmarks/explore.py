"""The crash-point explorer over a ten-step workflow.

    python benchmarks/explore.py [--database-url URL] [--runs 3] [--explorer PATH]
                                 [--out benchmarks/results/explore.json]

On a fresh database of the chosen server (default: AKTER_DATABASE_URL, else the embedded
PostgreSQL) it explores ``tests.apps.explored.Fulfil`` — eight activities that each book a
ledger entry under a derived id, a ten-minute sleep after the fourth and a wait for an event
nobody sends, ended by its one-day deadline after the sixth: ten steps, three passes — with
``akter.testing.explore``, ``--runs`` times (each on its own actors), and prints per
exploration the boundaries found, the crash points run, the wall time and the time per crash
(the uncrashed run counted as one), then the medians. Every crash really drops a runner and
finishes the execution in another; sleeps and the deadline are skipped on the database clock.

``--explorer PATH`` also measures another explorer module with the same ``explore`` function
(``git show REV:akter/testing/_explore.py > /tmp/explore_rev.py``; ``REV:akter/explore.py`` for a
revision before the ``akter.testing`` package), to compare with an earlier version
on the same machine at the same time. The process's CPU seconds and the load average are
recorded beside the wall times: on a shared machine the wall time says as much about the
neighbours as about the explorer. Writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from akter import explore as current  # noqa: E402 -- after the path is set, so the checkout's akter is measured
from akter.store.database import resolve_database_url  # noqa: E402
from akter.store.migrate import migrate  # noqa: E402
from benchmarks.scratch import scratch_database  # noqa: E402
from tests.apps import explored  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _explore_once(module: ModuleType, url: str, actor_id: str) -> dict[str, Any]:
    app = explored.make_app(url)
    began, cpu = time.perf_counter(), _cpu()
    report = await module.explore(app, explored.Warehouse, actor_id, explored.Fulfil, explored.Order("o1"))
    seconds, cpu = time.perf_counter() - began, _cpu() - cpu
    runs = len(report.crashes) + 1
    return {
        "boundaries": dict(sorted(report.baseline.hits.items())),
        "crash_points": len(report.crashes),
        "problems": len(report.problems),
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "seconds_per_crash": round(seconds / runs, 4),
    }


def _measure(name: str, module: ModuleType, url: str, n: int) -> dict[str, Any]:
    one = asyncio.run(_explore_once(module, url, f"{name}-{n}"))
    print(
        f"{name:8} {sum(one['boundaries'].values()):>10} {one['crash_points']:>12} {one['problems']:>8} "
        f"{one['seconds']:>9.2f} {one['cpu_seconds']:>7.2f} {one['seconds_per_crash'] * 1000:>12.0f}"
    )
    return one


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("explore_compared", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load an explorer from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--explorer", default=None, help="another explorer module to compare with")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "explore.json"))
    args = parser.parse_args()

    load = [round(x, 2) for x in os.getloadavg()]
    revision = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    explorers = [("current", current)]
    if args.explorer:
        explorers.append(("compared", _load(args.explorer)))
    results: dict[str, Any] = {}
    with scratch_database(resolve_database_url(args.database_url)) as (url, version):
        migrate(url)
        print(f"PostgreSQL {version}, Python {platform.python_version()}, load {load}")
        print(f"{'explorer':8} {'boundaries':>10} {'crash points':>12} {'problems':>8} "
              f"{'total s':>9} {'cpu s':>7} {'ms per crash':>12}")  # fmt: skip
        # alternate, so both see the same neighbours
        for n in range(args.runs):
            for name, module in explorers:
                one = _measure(name, module, url, n)
                results.setdefault(name, {"explorations": []})["explorations"].append(one)
    for name, mine in results.items():
        done = mine["explorations"]
        for key in ("seconds", "seconds_per_crash", "cpu_seconds"):
            mine[f"{key}_median"] = statistics.median(e[key] for e in done)
        print(f"median {name}: {mine['seconds_median']:.2f} s, "
              f"{mine['seconds_per_crash_median'] * 1000:.0f} ms per crash, "
              f"{mine['cpu_seconds_median']:.2f} CPU s")  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "revision": revision,
        "server_version": version,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "load_average_at_start": load,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "workflow": "tests.apps.explored.Fulfil: 8 activities, a 10-minute sleep, "
                    "a wait ended by its 1-day deadline",
        "compared_explorer": args.explorer,
        "results": results,
    }, indent=2) + "\n")  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

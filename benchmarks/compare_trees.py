"""Two trees of akter, one benchmark, the same minutes: before and after a change.

    python benchmarks/compare_trees.py --base /path/to/old/checkout [--new .] \\
        [--bench workflows|turns] [--pairs 4] [--out benchmarks/results/compare.json] -- ARGS...

``--base`` is another checkout of akter (``git worktree add /tmp/akter-base REV``). Each pair runs
the benchmark script once in each tree, the base first in odd pairs and the new tree first in
even ones, each in a process whose ``PYTHONPATH`` is that tree (so each imports its own akter),
with ``ARGS`` passed through (``--no-dbos --rounds 1 --n 100 --database-url URL`` for
``workflows``; ``--n 300 --rounds 1 --database-url URL`` for ``turns``). A pair's ratio is new
over base within that pair, so a neighbour that loads the shared machine for a minute moves both
sides; the table shows, per metric, the median of each side and the median of the pairs' ratios.
A ratio above 1 is a larger figure: worse for a latency or a cost, better for a rate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def figures(bench: str, data: dict[str, Any]) -> dict[str, float]:
    """The numbers one run of a benchmark wrote, by metric name (with its unit)."""
    if bench == "workflows":
        return {
            f"{row['metric']} ({row['unit']})": row["akter"]
            for row in data["table"]
            if row["akter"] is not None
        }
    found = {f"{name} ({unit})": value for name, unit, value in _turn_results(data)}
    found.update(data["ratios"])
    return found


def _turn_results(data: dict[str, Any]) -> list[tuple[str, str, float]]:
    rows: list[tuple[str, str, float]] = []
    for result in data["results"]:
        rows.append((f"{result['name']} p50", "ms", result["p50_ms"]))
        rows.append((f"{result['name']} p99", "ms", result["p99_ms"]))
        rows.append((result["name"], "/s", result["per_second"]))
    return rows


def run_once(tree: Path, bench: str, args: list[str], out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    script = tree / "benchmarks" / f"{bench}.py"
    subprocess.run([sys.executable, str(script), *args, "--out", str(out)], env=env, cwd=tree, check=True)
    return figures(bench, json.loads(out.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, type=Path)
    parser.add_argument("--new", default=HERE.parent, type=Path)
    parser.add_argument("--bench", choices=("workflows", "turns"), default="workflows")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    args = [a for a in options.args if a != "--"]
    trees = {"base": options.base.resolve(), "new": options.new.resolve()}
    runs: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(options.pairs):
            order = ("base", "new") if pair % 2 == 0 else ("new", "base")
            for side in order:
                print(f"pair {pair + 1}/{options.pairs}: {side} ({trees[side]})", flush=True)
                out = Path(scratch) / f"{side}-{pair}.json"
                runs[side].append(run_once(trees[side], options.bench, args, out))
    metrics = [m for m in runs["base"][0] if all(m in r for r in runs["base"] + runs["new"])]
    table = []
    for metric in metrics:
        base = [r[metric] for r in runs["base"]]
        new = [r[metric] for r in runs["new"]]
        ratios = [n / b for b, n in zip(base, new, strict=True) if b]
        table.append(
            {
                "metric": metric,
                "base": statistics.median(base),
                "new": statistics.median(new),
                "new_over_base": statistics.median(ratios) if ratios else None,
                "ratios": ratios,
            }
        )
    width = max(len(row["metric"]) for row in table)
    print(f"\n{'metric':<{width}}  {'base':>10}  {'new':>10}  new/base (median of {options.pairs} pairs)")
    for row in table:
        ratio = "-" if row["new_over_base"] is None else f"{row['new_over_base']:.2f}"
        print(f"{row['metric']:<{width}}  {row['base']:>10.2f}  {row['new']:>10.2f}  {ratio:>8}")
    out = options.out or HERE / "results" / f"compare-{options.bench}.json"
    commits = {side: _commit(tree) for side, tree in trees.items()}
    out.write_text(
        json.dumps({"bench": options.bench, "args": args, "commits": commits, "table": table}, indent=1)
    )
    print(f"wrote {out}")


def _commit(tree: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


if __name__ == "__main__":
    main()

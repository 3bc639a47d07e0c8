"""``akter demo`` against the test database: what it prints, what it leaves stored, and that a
second run on the same database works as well as the first.

The first run is the real command in its own process (``python -m akter.cli demo``), as a user
types it; the second runs ``run_demo`` in this process against the same database. Both are read
back through a second connection.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from akter import codec, demo
from tests.integration.conftest import Peek

OUTCOMES = "outcomes  order-1 shipped, order-2 interrupted, order-3 payment overdue"


def run_command(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AKTER_DATABASE_URL", "AKTER_LOG_LEVEL")}
    return subprocess.run(
        [sys.executable, "-m", "akter.cli", "demo", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
        check=False,
    )


async def stored_outcomes(peek: Peek, shop_id: str) -> dict[str, str]:
    rows = await peek.rows(
        "SELECT key, outcome FROM actor_workflow_executions WHERE actor_id = %s AND status = 'finished'",
        shop_id,
    )
    return dict(rows)


async def test_demo_narrates_three_orders_leaves_them_finished_and_runs_again_on_the_same_database(
    database_url: str, peek: Peek
) -> None:
    # the demo waits out its cool-offs and payment window in real time: the second run follows
    # the first in this one test rather than running the first again in another
    done = run_command("--database-url", database_url)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert done.stderr == ""  # no log lines interleave with the narration by default
    for line in [
        "order-1: paid in time, then shipped",
        "order-2: cancelled during its cool-off; the compensation gives the stock back",
        "order-3: nobody pays within 2s; the order fails and gives its stock back",
        OUTCOMES,
        "stock     WarehouseState(stock={'widget': 8}) (of 10: order-1 took 2; orders 2 and 3 gave theirs"
        " back)",
        "shop      ShopState(paid_cents=5000)",
        "stored    3 executions with 11 steps, 6 events, 0 outbox rows left",
        "  akter ui akter.demo:app    (the inspector page: http://127.0.0.1:8080/)",
    ]:
        assert line in out.splitlines(), line
    # what a person follows: a step recorded, a timer armed, an event matched, a result
    for pattern in [
        r"started   Fulfil 'order-1': x1\.",
        r"step      reserve #1 \(activity\): ok Reservation\(order='order-1', sku='widget', qty=2\)",
        r"step      cool-off #1 \(clock\): sleeping until \+1\.\d\ds",
        r"timer     armed for \+1\.\d\ds; the execution is suspended until then",
        r"event     DemoShop #1 PaymentReceived\(order='order-1', amount_cents=5000\)",
        r"step      payment #1 \(wait\): matched event #1 PaymentReceived",
        r"finished  succeeded: ok Shipped\(order='order-1', tracking='TRK-[0-9A-F]{8}', paid_cents=5000\)",
        r"event     DemoWarehouse #3 StockReleased\(order='order-2', sku='widget', qty=3, left=8\)",
        r"finished  interrupted",
        r"step      payment #1 \(wait\): timed out",
        r"finished  failed: error PaymentOverdue\(order='order-3', waited_s=2\)",
    ]:
        assert re.search(pattern, out), pattern
    shop_id = re.search(r"akter inspect actor akter\.demo:app demo DemoShop (\S+)", out)
    assert shop_id is not None
    assert await stored_outcomes(peek, shop_id.group(1)) == {
        "order-1": "succeeded",
        "order-2": "interrupted",
        "order-3": "failed",
    }
    assert await peek.count("actor_outbox") == 0
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0

    lines: list[str] = []
    second = await demo.run_demo(database_url, lines.append)
    assert second.ok
    assert OUTCOMES in lines
    assert second.shop.actor_id not in out  # fresh actors each run
    assert await stored_outcomes(peek, second.shop.actor_id) == {
        "order-1": "succeeded",
        "order-2": "interrupted",
        "order-3": "failed",
    }
    assert await peek.value("SELECT count(*) FROM actor_workflow_executions") == 6
    states = await peek.rows("SELECT state FROM actor_state WHERE actor_type = 'DemoWarehouse'")
    assert [codec.decode(bytes(s), demo.WarehouseState) for (s,) in states] == [
        demo.WarehouseState({"widget": 8})
    ] * 2


def test_demo_exits_2_when_the_database_is_unreachable() -> None:
    done = run_command("--database-url", "postgresql://postgres@127.0.0.1:1/none")
    assert done.returncode == 2
    assert done.stderr.startswith("akter: the demo cannot use the database: cannot reach PostgreSQL at")
    assert "Connection refused" in done.stderr

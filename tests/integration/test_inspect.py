"""``akter inspect``: what it shows of stored actors and executions, decoded, and how it fails.

Each test stores real rows by running the demo's shop (``akter.demo``) with the relay in this
process, stops the relay, then runs the command the way a user would (``click``'s runner in a
worker thread, since the command runs its own event loop; one test in a subprocess) and reads
what it printed. Corrupt rows are made through a second connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import attrs
import psycopg
import pytest
from click.testing import CliRunner, Result
from returns.result import Success

from akter import demo, testing
from akter.cli.inspect import inspect_group
from akter.ids import ActorRef, ExecutionId
from akter.inspect import connect
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet

APP = "akter.demo:app"


@attrs.frozen
class Stored:
    url: str
    shop: ActorRef
    warehouse: ActorRef
    paid: str  # execution id of order-1: finished, shipped
    waiting: str  # execution id of order-2: suspended, waiting for payment


@pytest.fixture
async def stored(database_url: str) -> Stored:
    shop = ActorRef("demo", demo.DemoShop.name, "shop-1")
    warehouse = ActorRef("demo", demo.DemoWarehouse.name, "warehouse-1")
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, shop.actor_id, tenant="demo")
        first = demo.Order("order-1", warehouse.actor_id, demo.SKU, qty=2, amount_cents=5000)
        paid = await orders.start(demo.Fulfil, first)
        await orders.send(demo.pay, demo.Pay(order="order-1", amount_cents=5000))
        await quiet(app, relay)  # order-1 reserved its stock and cools off, its payment stored
        second = demo.Order("order-2", warehouse.actor_id, demo.SKU, qty=1, amount_cents=2500)
        waiting = await orders.start(demo.Fulfil, second)
        await quiet(app, relay)
        # past the cool-off on the database clock: order-1 ships, order-2 waits for its payment
        await testing.Clock(database_url).advance(demo.COOL_OFF * 2)
        await quiet(app, relay)
        assert isinstance(await paid.result(timeout=20), Success)
        assert (await waiting.poll()).status == "suspended"
    return Stored(database_url, shop, warehouse, paid.execution_id, waiting.execution_id)


async def run_cli(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, inspect_group, list(args))


async def inspect_actor(stored: Stored, ref: ActorRef, *extra: str) -> Result:
    return await run_cli(
        "actor", APP, ref.tenant, ref.actor_type, ref.actor_id, "--database-url", stored.url, *extra
    )


async def inspect_execution(stored: Stored, execution_id: str, *extra: str) -> Result:
    return await run_cli("execution", APP, execution_id, "--database-url", stored.url, *extra)


async def test_actor_shows_decoded_state_executions_receipts_events_and_timers(stored: Stored) -> None:
    shown = await inspect_actor(stored, stored.shop)
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert "actor demo/DemoShop/shop-1" in text
    assert "ShopState(paid_cents=5000)" in text
    assert "Fulfil key 'order-1': finished (succeeded)" in text
    assert "result ok Shipped(order='order-1', tracking='TRK-" in text
    assert "Fulfil key 'order-2': suspended" in text
    assert "pay: ok None" in text
    assert "#1 PaymentReceived(order='order-1', amount_cents=5000)" in text
    assert f"wf:{stored.waiting}: akter.wf.resume -> demo/DemoShop/shop-1" in text
    assert "<undecodable" not in text

    warehouse = await inspect_actor(stored, stored.warehouse)
    assert "WarehouseState(stock={'widget': 7})" in warehouse.output
    assert "reserve_stock: ok Reservation(order='order-2', sku='widget', qty=1)" in warehouse.output


async def test_actor_as_json(stored: Stored) -> None:
    shown = await inspect_actor(stored, stored.shop, "--json")
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.output)
    assert view["state"]["value"] == {"paid_cents": 5000}
    assert [e["value"]["value"] for e in view["events"]] == [{"order": "order-1", "amount_cents": 5000}]
    assert {x["key"]: x["status"] for x in view["executions"]} == {
        "order-1": "finished",
        "order-2": "suspended",
    }
    assert [o["timer_key"] for o in view["outbox"]] == [f"wf:{stored.waiting}"]
    assert view["counts"] == {
        "events": 1,
        "executions": 2,
        "outbox": 1,
        "receipts": view["counts"]["receipts"],
    }


async def test_execution_shows_decoded_steps_and_its_timer(stored: Stored) -> None:
    waiting = await inspect_execution(stored, stored.waiting)
    assert waiting.exit_code == 0, waiting.output
    text = waiting.output
    assert "status     suspended" in text
    assert "payload    Order(id='order-2', warehouse='warehouse-1', sku='widget', qty=1" in text
    assert "reserve#1 attempt 1 (activity): ok Reservation(order='order-2', sku='widget', qty=1)" in text
    assert "cool-off#1 attempt 1 (clock): elapsed" in text
    assert "payment#1 attempt 1 (wait): pending, waiting for PaymentReceived after event #1, deadline" in text
    assert f"timer      wf:{stored.waiting}, due" in text

    paid = await inspect_execution(stored, stored.paid, "--json")
    view = json.loads(paid.output)
    assert view["outcome"] == "succeeded"
    assert view["timer"] is None
    steps = {s["step"]: s for s in view["steps"]}
    assert list(steps) == ["reserve", "cool-off", "payment", "ship"]
    assert steps["payment"]["exit"]["text"] == (
        "matched event #1 PaymentReceived(order='order-1', amount_cents=5000)"
    )
    assert steps["ship"]["exit"]["value"]["ok"]["order"] == "order-1"


async def test_undecodable_rows_are_shown_as_undecodable(stored: Stored, peek: Peek) -> None:
    await peek.conn.execute(
        "UPDATE actor_state SET state = '\\x00'::bytea || convert_to('{\"paid_cents\": \"lots\"}', 'UTF8')"
        " WHERE actor_id = 'shop-1'"
    )
    await peek.conn.execute("UPDATE actor_events SET value = '\\x07beef'::bytea WHERE actor_id = 'shop-1'")
    await peek.conn.execute(
        "UPDATE actor_receipts SET command = 'refund' WHERE actor_id = 'shop-1' AND command = 'pay'"
    )
    await peek.conn.execute(
        "UPDATE actor_workflow_step SET exit = '\\x00'::bytea"
        ' || convert_to(\'{"error": {"type": "Gone", "value": {}}}\', \'UTF8\')'
        " WHERE execution_id = %s AND step = 'reserve'",
        (stored.paid,),
    )

    shown = await inspect_actor(stored, stored.shop)
    assert shown.exit_code == 0, shown.output
    assert "<undecodable: does not structure as ShopState" in shown.output
    assert "#1 <undecodable: stored value has unknown frame header 0x07>" in shown.output
    assert "refund: <undecodable: command DemoShop.refund is not declared by this App" in shown.output

    as_json = json.loads((await inspect_actor(stored, stored.shop, "--json")).output)
    assert as_json["state"]["raw"] == {"paid_cents": "lots"}
    assert "ShopState" in as_json["state"]["undecodable"]
    assert as_json["events"][0]["value"]["raw"] == {"bytes": 3, "hex": "07beef"}

    execution = await inspect_execution(stored, stored.paid)
    assert execution.exit_code == 0, execution.output
    undeclared = "step reserve of <workflow DemoShop.Fulfil> no longer declares error Gone"
    assert f"reserve#1 attempt 1 (activity): <undecodable: {undeclared}>" in execution.output


async def test_not_found_exits_1_and_usage_or_database_errors_exit_2(stored: Stored, peek: Peek) -> None:
    nobody = await inspect_actor(stored, ActorRef("demo", "DemoShop", "nobody"))
    assert (nobody.exit_code, nobody.output) == (
        1,
        "akter: no actor demo/DemoShop/nobody is stored: it never committed a turn\n",
    )

    unknown_type = await inspect_actor(stored, ActorRef("demo", "Nope", "x"))
    assert unknown_type.exit_code == 1
    assert "akter.demo:app declares DemoShop, DemoWarehouse" in unknown_type.output

    never = str(ExecutionId(stored.shop, "Fulfil", "order-9"))
    missing = await inspect_execution(stored, never)
    assert missing.exit_code == 1
    assert f"no execution {never} is stored" in missing.output

    malformed = await inspect_execution(stored, "x1.not-an-id")
    assert malformed.exit_code == 2
    assert "is not a well-formed execution id" in malformed.output

    bad_app = await run_cli(
        "actor", "akter.demo:nothing", "demo", "DemoShop", "shop-1", "--database-url", stored.url
    )
    assert (bad_app.exit_code, bad_app.output) == (2, "akter: 'akter.demo' has no attribute 'nothing'\n")

    unreachable = await run_cli(
        "actor", APP, "demo", "DemoShop", "shop-1", "--database-url", "postgresql://postgres@127.0.0.1:1/none"
    )
    assert unreachable.exit_code == 2
    assert unreachable.output.startswith("akter: cannot connect to the database at postgresql://postgres@")

    await peek.conn.execute("DROP TABLE actor_generations")
    no_schema = await inspect_actor(stored, stored.shop)
    assert (no_schema.exit_code, no_schema.output) == (
        2,
        "akter: the database has no akter schema (run `akter migrate`, or check the URL)\n",
    )


async def test_the_views_are_read_only(stored: Stored) -> None:
    async with await connect(stored.url) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await conn.execute("DELETE FROM actor_events")


def test_akter_inspect_is_an_akter_command(database_url: str) -> None:
    env = {**os.environ, "AKTER_LOG_LEVEL": "warning"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "akter.cli",
            "inspect",
            "actor",
            APP,
            "demo",
            "DemoShop",
            "nobody",
            "--database-url",
            database_url,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr == "akter: no actor demo/DemoShop/nobody is stored: it never committed a turn\n"
    assert done.stdout == ""

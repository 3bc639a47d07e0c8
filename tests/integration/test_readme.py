"""The README's worked example must keep working: it is executed here, with the clock jumped."""

from __future__ import annotations

import re
import types
from datetime import timedelta
from pathlib import Path

import psycopg
from returns.result import Success

import akter
from akter import testing
from tests.integration.workflow_support import quiet

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> types.ModuleType:
    text = README.read_text()
    block = re.search(r"## A worked example\n\n```python\n(.*?)```", text, re.S)
    assert block is not None, "the README lost its worked example"
    module = types.ModuleType("readme_example")
    exec(compile(block.group(1), str(README), "exec"), module.__dict__)
    return module


async def test_the_worked_example_runs(database_url: str) -> None:
    ex = _example()
    app = akter.App([ex.Shop], database_url=database_url)
    clock = testing.Clock(database_url)
    async with app.relay() as relay, app.client(caller=akter.User("alice")) as client:
        shop = client.actor(ex.Shop, "shop-1", tenant="acme")
        run = await shop.start(ex.Ship, ex.Order(id="o-1", qty=2))
        assert (await shop.send(ex.pay, ex.Pay(order="o-1", amount=30))) == Success(None)
        await quiet(app, relay)
        await clock.advance(timedelta(minutes=11))
        assert await run.result(timeout=60) == Success(ex.Shipped(order="o-1", paid=30))


async def test_the_loop_example_runs_each_occurrence(database_url: str) -> None:
    ex = _example()
    text = README.read_text()
    block = re.search(r"## Loops, branches, interrupts and cleanup\n.*?```python\n(.*?)```", text, re.S)
    assert block is not None, "the README lost its loop example"
    exec(compile(block.group(1), str(README), "exec"), ex.__dict__)
    app = akter.App([ex.Shop], database_url=database_url)
    clock = testing.Clock(database_url)
    async with app.relay() as relay, app.client() as client:
        run = await client.actor(ex.Shop, "shop-2", tenant="acme").start(ex.Batch, ex.Order(id="o-2", qty=3))
        for _ in range(3):
            await quiet(app, relay)
            await clock.advance(timedelta(seconds=2))
        assert await run.result(timeout=60) == Success(ex.Shipped(order="o-2", paid=None))
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT step, count(*) FROM actor_workflow_step GROUP BY step ORDER BY step")
        assert await cur.fetchall() == [("pack", 3), ("pause", 3)]

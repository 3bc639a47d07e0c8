"""The README's worked example must keep working: it is executed here, with the clock jumped; so
are its loop example and the synchronous application of docs/running.md, on the example's actors."""

from __future__ import annotations

import asyncio
import atexit
import re
import threading
import types
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from returns.result import Success

import akter
from akter import testing
from tests.integration.workflow_support import quiet, until

README = Path(__file__).resolve().parents[2] / "README.md"
RUNNING = README.parent / "docs" / "running.md"


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


async def test_the_worked_example_main_runs(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    ex = _example()
    ex.app = akter.App([ex.Shop], database_url=database_url)
    clock = testing.Clock(database_url)
    main = asyncio.create_task(ex.main())
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        # the durable cool-off is recorded: jump past it instead of waiting ten minutes
        async def cool_offs() -> Any:
            cur = await conn.execute("SELECT count(*) FROM actor_workflow_step WHERE step = 'cool-off'")
            return await cur.fetchone()

        await until(cool_offs, lambda row: row == (1,), "the cool-off step recorded")
    await clock.advance(timedelta(minutes=11))
    async with asyncio.timeout(60):
        await main
    assert capsys.readouterr().out == "<Success: Shipped(order='o-1', paid=30)>\n"


def test_the_sync_section_serves_views_from_a_started_engine(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ex = _example()
    ex.app = akter.App([ex.Shop], database_url=database_url)
    block = re.search(r"\*\*Django, Flask.*?```python\n(.*?)```", RUNNING.read_text(), re.S)
    assert block is not None, "docs/running.md lost its Django/Flask example"
    closers: list[Any] = []
    monkeypatch.setattr(atexit, "register", closers.append)
    exec(compile(block.group(1), str(RUNNING), "exec"), ex.__dict__)
    try:
        outcomes = set()
        threads = [
            threading.Thread(target=lambda i=i: outcomes.add(str(ex.pay_order(f"o-{i}", i))))
            for i in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcomes == {"<Success: None>"}
    finally:
        assert closers == [ex.app.close_sync]
        ex.app.close_sync()


def _anchor(heading: str) -> str:
    """A heading's anchor as GitHub spells it: lower case, punctuation dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_anchor(line.lstrip("#")) for line in prose.splitlines() if line.startswith("#")}


def test_every_link_of_the_readme_and_the_docs_leads_somewhere() -> None:
    root = README.parent
    pages = [README, *sorted(root.glob("docs/*.md")), *sorted(root.glob("benchmarks/results/*.md"))]
    broken = []
    for page in pages:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
                broken.append(f"{page.relative_to(root)}: {target}")
    assert broken == []


def test_the_readme_reaches_its_guarantees_before_line_150() -> None:
    lines = README.read_text().splitlines()
    headings = [n for n, line in enumerate(lines, 1) if line.startswith("## ")]
    at = {lines[n - 1]: n for n in headings}
    assert at["## Quick start"] < at["## A worked example"] < at["## What akter guarantees"] <= 150
    assert len(lines) <= 450

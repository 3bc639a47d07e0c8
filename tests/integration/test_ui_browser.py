"""``akter ui``: the inspector page, driven in headless Chromium against real executions.

The page runs as the real command in its own process (``python -m akter.cli ui akter.demo:app
--port 0``) over a database where the demo's shop has run three orders: one shipped, one
waiting for its payment, one failed because nobody paid. Playwright's Python client drives
Debian's ``chromium`` (``/usr/bin/chromium``; no browser download). Each view is saved as a
screenshot under ``tests/artifacts/`` for a person to look at.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
import pytest_asyncio
from returns.result import Success

from akter import demo, testing
from akter.ids import ActorRef
from tests.integration.conftest import Peek
from tests.integration.ui_support import serving_ui
from tests.integration.workflow_support import quiet

CHROMIUM = os.environ.get("AKTER_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
#: how long the page may take to show what the database holds (a wait, not a timing assertion)
SEEN_WITHIN_MS = 20_000

pytestmark = [
    pytest.mark.slow,
    # one Chromium for the module (launching it costs seconds): Playwright's connection belongs
    # to the event loop that launched it, so this module's tests and fixtures share one loop
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None,
        reason=f"no Chromium at {CHROMIUM}: install Debian's chromium (apt-get install chromium) to run the"
        " browser tests of the inspector page",
    ),
]

playwright_api = pytest.importorskip("playwright.async_api")


@attrs.frozen
class Stored:
    url: str
    shop: ActorRef
    shipped: str
    waiting: str
    overdue: str


@pytest_asyncio.fixture(loop_scope="module")
async def peek(database_url: str) -> AsyncIterator[Peek]:
    """The conftest's second connection, opened on this module's loop."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        yield Peek(conn)


@pytest_asyncio.fixture(loop_scope="module")
async def stored(database_url: str) -> Stored:
    shop = ActorRef("demo", demo.DemoShop.name, "shop-1")
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, shop.actor_id, tenant="demo")
        first = demo.Order("order-1", "warehouse-1", demo.SKU, qty=2, amount_cents=5000)
        shipped = await orders.start(demo.Fulfil, first)
        await orders.send(demo.pay, demo.Pay(order="order-1", amount_cents=5000))
        await quiet(app, relay)  # order-1 reserved its stock and cools off, its payment stored
        late = demo.Order("order-3", "warehouse-1", demo.SKU, qty=1, amount_cents=100, payment_window_s=1)
        overdue = await orders.start(demo.Fulfil, late)
        second = demo.Order("order-2", "warehouse-1", demo.SKU, qty=1, amount_cents=2500)
        waiting = await orders.start(demo.Fulfil, second)
        await quiet(app, relay)
        clock = testing.Clock(database_url)
        await clock.advance(demo.COOL_OFF * 2)  # past the cool-off: order-1 ships, the others wait
        await quiet(app, relay)
        assert isinstance(await shipped.result(timeout=20), Success)
        await clock.advance(timedelta(seconds=2))  # past order-3's payment window
        await quiet(app, relay)
        assert (await overdue.poll()).status == "finished"
        assert (await waiting.poll()).status == "suspended"
    return Stored(database_url, shop, shipped.execution_id, waiting.execution_id, overdue.execution_id)


@pytest.fixture
def page_url(stored: Stored) -> Iterator[str]:
    """The page as a user starts it, on a free port; its URL is the line it prints."""
    with serving_ui("akter.demo:app", stored.url) as url:
        yield url


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def chromium() -> AsyncIterator[Any]:
    """The headless Chromium every test of this module opens its pages in."""
    async with playwright_api.async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            await launched.close()


@pytest_asyncio.fixture(loop_scope="module")
async def browser(chromium: Any) -> AsyncIterator[Any]:
    """A page in a context of its own (no cookies, storage or history from another test)."""
    context = await chromium.new_context(viewport={"width": 1300, "height": 900})
    try:
        page = await context.new_page()
        page.set_default_timeout(SEEN_WITHIN_MS)
        yield page
    finally:
        await context.close()


async def screenshot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"ui-{name}.png"), full_page=True)


async def test_the_list_shows_the_executions_and_a_click_opens_a_timeline(
    stored: Stored, page_url: str, browser: Any
) -> None:
    page = browser
    await page.goto(page_url)
    rows = page.locator("#executions tr.row")
    assert await rows.count() == 3
    assert await page.locator(f'#executions tr[data-execution="{stored.waiting}"] .status').inner_text() == (
        "suspended"
    )
    assert await page.locator(f'#executions tr[data-execution="{stored.shipped}"] .status').inner_text() == (
        "succeeded"
    )
    assert "Executions (3)" in await page.locator("#counts h2").inner_text()
    counts = await page.locator("#counts li").all_inner_texts()
    assert sorted(c.split()[-2:] for c in counts) == [["failed", "1"], ["succeeded", "1"], ["suspended", "1"]]
    # what needs a person is on top: the order nobody paid for
    attention = page.locator("#attention")
    assert "Needs attention (1)" in await attention.locator("h2").inner_text()
    assert "order-3" in await attention.inner_text()
    await screenshot(page, "executions")

    await page.locator(f'#executions tr[data-execution="{stored.shipped}"] a.execution').click()
    await page.wait_for_url(f"**/executions/{stored.shipped}")
    lanes = await page.locator("#timeline .lane").evaluate_all("ls => ls.map(l => l.dataset.step)")
    assert lanes == ["reserve#1", "cool-off#1", "payment#1", "ship#1"]
    assert "finished: succeeded" in await page.locator("#why").inner_text()
    payment = await page.locator('#timeline .lane[data-step="payment#1"] .bar').get_attribute("title")
    assert "matched event #1 PaymentReceived(order='order-1', amount_cents=5000)" in (payment or "")
    await screenshot(page, "timeline-finished")

    # a filter narrows the list and its counts
    await page.goto(page_url + "?outcome=failed")
    assert await page.locator("#executions tr.row").count() == 1
    assert "Executions (1)" in await page.locator("#counts h2").inner_text()
    assert await page.locator("#executions tr.row").get_attribute("data-execution") == stored.overdue


async def test_a_waiting_execution_says_why_and_its_timeline_advances_without_a_reload(
    stored: Stored, page_url: str, browser: Any
) -> None:
    page = browser
    await page.goto(page_url + "executions/" + stored.waiting)
    why = page.locator("#why")
    assert "waiting for PaymentReceived after event #" in await why.inner_text()
    bar = page.locator('#timeline .lane[data-step="payment#1"] .bar')
    assert "pending" in (await bar.get_attribute("class") or "")
    assert await page.locator("#timeline .timer").count() == 1  # the payment window's deadline
    await screenshot(page, "timeline-waiting")
    await page.evaluate("window.notReloaded = true")

    app = demo.make_app(stored.url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, stored.shop.actor_id, tenant="demo")
        await orders.send(demo.pay, demo.Pay(order="order-2", amount_cents=2500))
        assert isinstance(await orders.run(demo.Fulfil, stored.waiting).result(timeout=20), Success)
        await quiet(app, relay)

    await page.locator("#why", has_text="finished: succeeded").wait_for()
    assert await page.evaluate("window.notReloaded") is True  # the same document, updated in place
    assert await page.locator('#timeline .lane[data-step="ship#1"]').count() == 1
    assert "pending" not in (await bar.get_attribute("class") or "")
    assert await page.locator("#live > div").get_attribute("data-live") == "false"  # polling stops
    await screenshot(page, "timeline-live-finished")


async def _shown_ids(page: Any) -> list[str]:
    return await page.locator("#executions tr.row").evaluate_all("rs => rs.map(r => r.dataset.execution)")


async def test_the_list_pages_through_the_executions_newest_first_behind_a_cursor(
    stored: Stored, page_url: str, browser: Any
) -> None:
    page = browser
    await page.goto(page_url + "?workflow=Fulfil&limit=2")
    first = await _shown_ids(page)
    assert first == [stored.waiting, stored.overdue]  # the newest two
    assert await page.locator("#first").count() == 0
    assert "Executions (3)" in await page.locator("#counts h2").inner_text()  # counts are of the filter
    await screenshot(page, "executions-page-1")
    await page.locator("#next").click()
    await page.wait_for_url("**after=**")
    assert "workflow=Fulfil" in page.url  # the filter travels with the cursor
    assert await _shown_ids(page) == [stored.shipped]
    assert await page.locator("#next").count() == 0  # the last page
    await page.locator("#first").click()
    await page.wait_for_url("**limit=2")
    assert await _shown_ids(page) == first
    # a cursor that is not one is a page that says so, not a crash
    response = await page.goto(page_url + "?after=not-a-cursor")
    assert response.status == 400
    assert "is not a cursor" in await page.locator("#problem").inner_text()


async def test_undeliverable_intents_and_executions_needing_attention_are_on_top(
    stored: Stored, page_url: str, browser: Any, peek: Peek
) -> None:
    parked = await peek.value(
        "INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at,"
        " target_type, target_id, command, payload, caller, created_at, attempts, last_error, parked_at,"
        " parked_reason)"
        " SELECT routing_key, tenant, actor_type, actor_id, regexp_replace(intent_id, '[^.]+$', 'parked0'),"
        " bucket, akter_parked_due(), 'DemoWarehouse', 'warehouse-9', 'restock', payload, caller, created_at,"
        " 25, 'UndeliverableIntent: DemoWarehouse declares no command restock', akter_now(),"
        " 'undeliverable after 25 attempts' FROM actor_outbox WHERE timer_key IS NOT NULL LIMIT 1"
        " RETURNING intent_id"
    )
    await peek.conn.execute(
        "UPDATE actor_workflow_executions SET blocked_reason = 'this App declares no workflow Fulfil v9'"
        " WHERE execution_id = %s",
        (stored.waiting,),
    )
    page = browser
    await page.goto(page_url)
    undeliverable = page.locator("#parked")
    assert "Undeliverable intents (1)" in await undeliverable.locator("h2").inner_text()
    line = await undeliverable.locator(f'tr[data-intent="{parked}"]').inner_text()
    assert "restock" in line
    assert "undeliverable after 25 attempts" in line
    attention = page.locator("#attention")
    assert "Needs attention (2)" in await attention.locator("h2").inner_text()
    blocked = await attention.locator(f'tr[data-execution="{stored.waiting}"]').inner_text()
    assert "blocked: this App declares no workflow Fulfil v9" in blocked
    assert await attention.locator(f'tr[data-execution="{stored.overdue}"]').count() == 1
    tops = [(await page.locator(s).bounding_box())["y"] for s in ("#parked", "#attention", "#executions")]
    assert tops == sorted(tops)  # the alerts come first, the list after them
    await screenshot(page, "executions-attention")


async def test_an_actor_shows_its_state_events_receipts_and_outbox(
    stored: Stored, page_url: str, browser: Any
) -> None:
    page = browser
    await page.goto(page_url + "executions/" + stored.waiting)
    await page.locator("a.actor").first.click()
    await page.wait_for_url("**/actor?**")
    assert await page.locator("h1").inner_text() == str(stored.shop)
    assert "ShopState(paid_cents=5000)" in await page.locator("#state").inner_text()
    events = await page.locator("#events").inner_text()
    assert "PaymentReceived(order='order-1', amount_cents=5000)" in events
    assert "pay" in await page.locator("#receipts").inner_text()
    assert await page.locator("#actor-executions tr").count() == 4  # a header and three executions
    assert "wf:" in await page.locator("#outbox").inner_text()  # the waiting order's deadline timer
    await screenshot(page, "actor")


async def test_a_value_that_does_not_decode_is_shown_with_its_stored_json(
    stored: Stored, page_url: str, browser: Any, peek: Peek
) -> None:
    await peek.conn.execute(
        "UPDATE actor_state SET state = '\\x00'::bytea || convert_to('{\"paid_cents\": \"lots\"}', 'UTF8')"
        " WHERE actor_id = 'shop-1'"
    )
    page = browser
    ref = stored.shop
    await page.goto(f"{page_url}actor?tenant={ref.tenant}&type={ref.actor_type}&id={ref.actor_id}")
    state = page.locator("#state")
    assert "undecodable: does not structure as ShopState" in await state.inner_text()
    await state.locator("summary").click()
    assert '"paid_cents": "lots"' in await state.locator("pre").inner_text()
    await screenshot(page, "undecodable")


async def test_a_bind_beyond_loopback_is_refused_without_the_flag(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AKTER_DATABASE_URL"}
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "akter.cli",
            "ui",
            "akter.demo:app",
            "--database-url",
            database_url,
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "will not listen on 0.0.0.0" in done.stderr
    assert "no login" in done.stderr
    assert "--allow-remote" in done.stderr


async def test_an_unknown_execution_is_a_page_that_says_so(page_url: str, browser: Any) -> None:
    page = browser
    response = await page.goto(page_url + "executions/not-an-id")
    assert response.status == 400
    assert await page.locator("#problem").inner_text() != ""
    asyncio.get_running_loop()  # the page is served by its own process; this loop only drives it

"""akter's own intents outlive any outage (invariant 14): a resume, a schedule fire, a deadline,
a child start and a parent's interrupt of its child, each with the relays down for two days and
with the database clock jumping 90 days while a relay runs — both far past the 24 h retry
window of the intent's id. The receiver refuses the expired id; the delivery renews it and
the work happens once. What is parked anyway says so where a user looks (``schedules list``).

Everything a user would observe is read through a second connection (``peek``): the outbox
rows, the receipts, the executions and what the schedules list prints."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from click.testing import CliRunner
from returns.result import Failure, Success

import akter
from akter import testing
from akter.cli import main
from akter.outbox import admin
from akter.outbox.relay import Relay, RelaySettings
from tests.apps import family, jobs
from tests.apps.family import Fulfil, Line, Order, OrderIn, Orders, Summary, Warehouse
from tests.apps.jobs import Jobs, RunReport, run_report
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

SETTINGS = RelaySettings(
    heartbeat=timedelta(milliseconds=200),
    ownership_lease=timedelta(seconds=1),
    backoff_base=timedelta(milliseconds=200),
)
UTC_START = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


@attrs.frozen
class Outage:
    """How the intent outlives its id: ``down`` (no relay runs for ``gap``, then one starts) or
    ``jump`` (the database clock moves ``gap`` forward while a relay runs)."""

    kind: str
    gap: timedelta


OUTAGES = [
    pytest.param(Outage("down", timedelta(days=2)), id="relays-down-2-days"),
    pytest.param(Outage("jump", timedelta(days=90)), id="clock-jumps-90-days"),
]


@pytest.fixture(autouse=True)
def _disarm() -> Iterator[None]:
    family.PICKS.clear()
    yield
    testing.disarm_all()


class Relays:
    """One relay at a time, each in an App of its own (as in a process of its own: a restart
    loses everything in memory), stopped and started as an outage needs."""

    def __init__(self, make_app: Callable[[], akter.App]) -> None:
        self.make_app = make_app
        self._stack: contextlib.AsyncExitStack | None = None
        self.relay: Relay | None = None

    async def start(self) -> Relay:
        self._stack = contextlib.AsyncExitStack()
        app = await self._stack.enter_async_context(self.make_app())
        self.relay = await self._stack.enter_async_context(app.relay(SETTINGS))
        return self.relay

    async def stop(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack = self.relay = None

    async def idle(self) -> None:
        if self.relay is None:
            raise AssertionError("no relay runs")
        async with asyncio.timeout(60):
            await self.relay.idle()


@pytest.fixture
async def family_app(database_url: str) -> AsyncIterator[akter.App]:
    app = family.make_app(database_url)
    async with app:
        yield app


@pytest.fixture
async def relays(database_url: str) -> AsyncIterator[Relays]:
    relays = Relays(lambda: family.make_app(database_url))
    await relays.start()
    yield relays
    await relays.stop()


async def outage_of_later_intents(outage: Outage, relays: Relays, clock: testing.Clock) -> None:
    """The intents are due later: the relays stop, or the clock jumps while they run."""
    if outage.kind == "down":
        await relays.stop()
        await clock.advance(outage.gap)
        await relays.start()
    else:
        await clock.advance(outage.gap)


@contextlib.asynccontextmanager
async def outage_of_due_intents(
    outage: Outage, relays: Relays, clock: testing.Clock, peek: Peek, target: str
) -> AsyncIterator[None]:
    """The intents to ``target`` are due now; each is held back while the block writes it, then
    the outage happens. ``down``: its delivery fails (a bug in akter, as the fault point says)
    and backs off, the relay stops, the clock moves and a new relay starts with the bug fixed.
    ``jump``: its delivery is paused in flight while the clock jumps, then goes on."""
    if outage.kind == "down":
        testing.fail("relay.before_delivery", match=target)
        yield
        await until(
            lambda: peek.value(
                "SELECT count(*) FROM actor_outbox WHERE target_id = %s AND claim IS NULL"
                " AND last_error LIKE '%%InjectedFailure%%'",
                target,
            ),
            lambda n: n >= 1,
        )
        await relays.stop()
        testing.disarm_all()
        await clock.advance(outage.gap)
        await relays.start()
    else:
        held = testing.pause("relay.before_delivery", match=target)
        yield
        await held.reached()
        await clock.advance(outage.gap)
        held.release()


async def nothing_parked(peek: Peek) -> None:
    parked = await peek.rows("SELECT command, parked_reason FROM actor_outbox WHERE parked_at IS NOT NULL")
    assert parked == []


async def receipts(peek: Peek, actor_id: str, command: str) -> int:
    return int(
        await peek.value(
            "SELECT count(*) FROM actor_receipts WHERE actor_id = %s AND command = %s", actor_id, command
        )
    )


async def status_of(peek: Peek, execution_id: str) -> str | None:
    status: str | None = await peek.value(
        "SELECT status FROM actor_workflow_executions WHERE execution_id = %s", execution_id
    )
    return status


async def suspended(peek: Peek, execution_id: str) -> None:
    await until(
        lambda: status_of(peek, execution_id),
        lambda status: status == "suspended",
    )


async def result_across(outage: Outage, relays: Relays, clock: testing.Clock, peek: Peek, run: Any) -> Any:
    """The result of ``run``, suspended with its intents due later, across the outage."""
    await suspended(peek, run.execution_id)
    await outage_of_later_intents(outage, relays, clock)
    return await run.result(timeout=60)


@pytest.mark.parametrize("outage", OUTAGES)
async def test_a_resume_whose_id_expired_is_delivered(
    outage: Outage, family_app: akter.App, relays: Relays, clock: testing.Clock, peek: Peek
) -> None:
    async with family_app.client() as client:
        run = await client.actor(Orders, "o-r", tenant="acme").start(
            Order, OrderIn((Line("r", "w-r"),), linger=60)
        )
        await until(
            lambda: peek.value(
                "SELECT count(*) FROM actor_workflow_step WHERE execution_id = %s AND step = 'linger'",
                run.execution_id,
            ),
            lambda n: n == 1,
        )
        result = await result_across(outage, relays, clock, peek, run)
    assert result == Success(Summary(("r by Anonymous()",), ()))
    await relays.idle()
    await nothing_parked(peek)


@pytest.mark.parametrize("outage", OUTAGES)
async def test_a_deadline_whose_id_expired_interrupts_its_execution(
    outage: Outage, family_app: akter.App, relays: Relays, clock: testing.Clock, peek: Peek
) -> None:
    async with family_app.client() as client:
        run = await client.actor(Warehouse, "w-d", tenant="acme").start(
            Fulfil, Line("d", "w-d", mode="hold"), timeout=timedelta(minutes=10)
        )
        result = await result_across(outage, relays, clock, peek, run)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    assert result.failure().reason == "deadline of 0:10:00 passed"
    assert family.PICKS == {}  # the held line never picked: the deadline stopped it first
    await relays.idle()
    await nothing_parked(peek)
    assert await receipts(peek, "w-d", "akter.wf.deadline:Fulfil") == 1


@pytest.mark.parametrize("outage", OUTAGES)
async def test_a_child_start_whose_id_expired_starts_the_child_and_the_parent_finishes(
    outage: Outage, family_app: akter.App, relays: Relays, clock: testing.Clock, peek: Peek
) -> None:
    async with family_app.client() as client:
        async with outage_of_due_intents(outage, relays, clock, peek, "w-c"):
            run = await client.actor(Orders, "o-c", tenant="acme").start(Order, OrderIn((Line("c", "w-c"),)))
        result = await run.result(timeout=60)
    assert result == Success(Summary(("c by Anonymous()",), ()))
    assert family.PICKS == {"c": 1}
    await relays.idle()
    await nothing_parked(peek)
    assert await receipts(peek, "w-c", "akter.wf.start_child") == 1
    children = await peek.rows(
        "SELECT status, outcome FROM actor_workflow_executions WHERE parent_id = %s", run.execution_id
    )
    assert children == [("finished", "succeeded")]


@pytest.mark.parametrize("outage", OUTAGES)
async def test_a_parents_interrupt_whose_id_expired_interrupts_its_child_once(
    outage: Outage, family_app: akter.App, relays: Relays, clock: testing.Clock, peek: Peek
) -> None:
    async with family_app.client() as client:
        run = await client.actor(Orders, "o-i", tenant="acme").start(
            Order, OrderIn((Line("h", "w-h", mode="hold"),))
        )
        child = await until(
            lambda: peek.value(
                "SELECT execution_id FROM actor_workflow_executions"
                " WHERE parent_id = %s AND status = 'suspended'",
                run.execution_id,
            ),
            lambda eid: eid is not None,
        )
        async with outage_of_due_intents(outage, relays, clock, peek, "w-h"):
            await run.interrupt()
            await until(run.poll, lambda s: s.status == "finished")
        await until(lambda: status_of(peek, child), lambda status: status == "finished")
    [(outcome, reason)] = await peek.rows(
        "SELECT outcome, interrupt_reason FROM actor_workflow_executions WHERE execution_id = %s", child
    )
    assert (outcome, reason) == ("interrupted", f"its parent {run.execution_id} was interrupted")
    assert family.PICKS == {}
    await relays.idle()
    await nothing_parked(peek)
    assert await receipts(peek, "w-h", "akter.wf.interrupt:Fulfil") == 1


# --- schedules ---


@pytest.fixture
async def jobs_app(database_url: str, clock: testing.Clock) -> AsyncIterator[akter.App]:
    await clock.set(UTC_START)
    app = jobs.make_app(database_url)
    async with app:
        yield app


def hourly(**options: Any) -> akter.Schedule:
    return akter.Schedule(
        name="hourly",
        actor=Jobs,
        actor_id="main",
        tenant="acme",
        member=run_report,
        payload=RunReport("hourly"),
        every=timedelta(hours=1),
        **options,
    )


async def _reports(peek: Peek) -> int:
    return await receipts(peek, "main", "run_report")


CATCH_UPS = [pytest.param(("latest", 1), id="latest"), pytest.param(("all", 3), id="all")]


@pytest.mark.parametrize("outage", OUTAGES)
@pytest.mark.parametrize("catch_up", CATCH_UPS)
async def test_a_schedule_whose_timer_id_expired_fires_and_keeps_firing(
    outage: Outage, catch_up: tuple[str, int], jobs_app: akter.App, clock: testing.Clock, peek: Peek
) -> None:
    """``latest`` delivers the latest slot that passed; ``all`` the last ``max_catch_up`` (3)."""
    policy, delivered = catch_up
    url = jobs_app.database_url
    if url is None:
        raise AssertionError("the test App names its database")
    relays = Relays(lambda: jobs.make_app(url))
    await relays.start()
    try:
        async with jobs_app.client() as client:
            await client.schedules.add(hourly(catch_up=policy, max_catch_up=3))
            await outage_of_later_intents(outage, relays, clock)
            await relays.idle()
            assert await _reports(peek) == delivered
            now = await clock.now()
            info = await client.schedules.get("acme", "hourly")
            assert info.status == "active"
            assert info.next_slot is not None
            assert info.next_slot > now  # armed ahead, not stuck on a slot in the past
            assert info.last_slot is not None
            assert info.last_slot > now - timedelta(hours=1)
            await nothing_parked(peek)
            # and it goes on firing at its next slot
            await clock.set(info.next_slot + timedelta(seconds=1))
            await relays.idle()
            assert await _reports(peek) == delivered + 1
    finally:
        await relays.stop()


async def test_a_schedule_whose_timer_is_parked_is_listed_as_parked(
    jobs_app: akter.App, clock: testing.Clock, peek: Peek, database_url: str
) -> None:
    settings = attrs.evolve(SETTINGS, max_attempts=2)
    testing.fail("relay.before_delivery", match="main")  # akter's own bug: the fire cannot be delivered
    async with jobs_app.client() as client:
        await client.schedules.add(hourly())
        async with jobs_app.relay(settings) as relay:
            await clock.set(UTC_START + timedelta(hours=1))
            for _ in range(2):
                async with asyncio.timeout(60):
                    await relay.idle()
                await clock.advance(timedelta(minutes=5))
        assert await peek.value("SELECT count(*) FROM actor_outbox WHERE parked_at IS NOT NULL") == 1
        info = await client.schedules.get("acme", "hourly")
    assert info.status == "parked"
    assert info.parked_reason is not None
    assert "undeliverable after 2 attempts" in info.parked_reason
    assert info.as_json()["status"] == "parked"
    listed = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["schedules", "list", "tests.apps.jobs:app", "--database-url", database_url],
        catch_exceptions=False,
    )
    assert listed.exit_code == 0, listed.output
    assert "acme/hourly  parked" in listed.output
    assert "undeliverable after 2 attempts" in listed.output
    assert "akter outbox retry" in listed.output
    # an operator retries it days later, past its id's expiry: no --new-id needed for akter's own,
    # since its delivery renews the id; the schedule fires its latest slot and goes on
    testing.disarm_all()
    await clock.advance(timedelta(days=2))
    assert info.parked_intent is not None
    assert isinstance(await admin.retry(peek.conn, info.parked_intent), Success)
    async with jobs_app.client() as client, jobs_app.relay(settings) as relay:
        async with asyncio.timeout(60):
            await relay.idle()
        info = await client.schedules.get("acme", "hourly")
    assert (info.status, info.fired, await _reports(peek)) == ("active", 1, 1)
    await nothing_parked(peek)


async def test_executions_show_names_a_parked_child_start_of_the_execution(
    family_app: akter.App, relays: Relays, clock: testing.Clock, peek: Peek, database_url: str
) -> None:
    await relays.stop()
    testing.fail("relay.before_delivery", match="w-p")  # akter's own bug: the start cannot be delivered
    async with family_app.client() as client:
        run = await client.actor(Orders, "o-p", tenant="acme").start(Order, OrderIn((Line("p", "w-p"),)))
        async with family_app.relay(attrs.evolve(SETTINGS, max_attempts=2)) as relay:
            for _ in range(2):
                async with asyncio.timeout(60):
                    await relay.idle()
                await clock.advance(timedelta(minutes=5))
    parked = await peek.rows("SELECT command FROM actor_outbox WHERE parked_at IS NOT NULL")
    assert parked == [("akter.wf.start_child",)]
    shown = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        ["executions", "show", "tests.apps.family:app", run.execution_id, "--database-url", database_url],
        catch_exceptions=False,
    )
    assert shown.exit_code == 0, shown.output
    assert (
        "parked     akter.wf.start_child to acme/Warehouse/w-p: undeliverable after 2 attempts"
        in shown.output
    )
    assert "akter outbox retry v1." in shown.output
    show_json = ["executions", "show", "tests.apps.family:app", run.execution_id, "--json"]
    as_json = await asyncio.to_thread(
        CliRunner().invoke,
        main,
        [*show_json, "--database-url", database_url],
        catch_exceptions=False,
    )
    assert as_json.exit_code == 0, as_json.output
    (row,) = json.loads(as_json.output)["parked"]
    assert row["command"] == "akter.wf.start_child"
    assert row["target"] == "acme/Warehouse/w-p"
    assert row["retry"].startswith("akter outbox retry v1.")
    assert row["parked_at"].endswith("+00:00")

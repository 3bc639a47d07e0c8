"""The apps in ``examples/`` do what their docstrings promise, on a real PostgreSQL.

Each test imports an example's declarations, runs its App with the relay in this process, and
asserts what a user would observe: the run's result, what the stand-in services were asked to do
(and in which order), and rows read through a second connection. Deadlines and retry backoffs are
reached by moving the database clock, never by sleeping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from returns.result import Failure, Result, Success

import akter
from akter import codec, testing
from akter.outbox.relay import Relay
from examples import approval, fulfilment, saga
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet

TWO_DAYS = timedelta(days=2, seconds=1)


def failure_of(result: Result[Any, Exception]) -> Exception:
    """The error of a failed run (declared errors compare by identity, so tests read fields)."""
    assert isinstance(result, Failure), result
    error: Exception = result.failure()
    return error


# ---- saga -------------------------------------------------------------------------------------


@pytest.fixture
async def travel(database_url: str) -> AsyncIterator[tuple[akter.App, Relay, Any]]:
    saga.desk.reset()
    app = saga.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        yield app, relay, client.actor(saga.Traveller, "ada", tenant="travel")


async def test_saga_books_flight_hotel_and_charge_once_each(travel: Any) -> None:
    _, _, ada = travel
    run = await ada.start(saga.Book, saga.trip("berlin", card="tok_visa"))
    assert await run.result(timeout=20) == Success(saga.Itinerary("berlin", "F-0001", "H-0002", "C-0003"))
    assert saga.desk.ledger == [
        "reserve flight LH 454",
        "reserve hotel Hotel Adlon x3",
        "charge 129.00 to tok_visa",
    ]
    again = await ada.start(saga.Book, saga.trip("berlin", card="tok_visa"))
    assert again.execution_id == run.execution_id
    assert len(saga.desk.ledger) == 3


async def test_saga_declined_card_cancels_the_hotel_then_the_flight(travel: Any, peek: Peek) -> None:
    _, _, ada = travel
    run = await ada.start(saga.Book, saga.trip("paris", card="tok_declined"))
    error = failure_of(await run.result(timeout=20))
    assert isinstance(error, saga.CardDeclined)
    assert (error.card, error.reason) == ("tok_declined", "insufficient funds")
    assert saga.desk.ledger == [
        "reserve flight LH 454",
        "reserve hotel Hotel Adlon x3",
        "cancel hotel H-0002",
        "cancel flight F-0001",
    ]
    # a declared error is a business outcome: recorded once, never retried
    attempts = await peek.rows("SELECT attempt FROM actor_workflow_step WHERE step = 'charge-card'")
    assert attempts == [(1,)]


async def test_saga_sold_out_flight_books_and_undoes_nothing(travel: Any) -> None:
    _, _, ada = travel
    run = await ada.start(saga.Book, saga.trip("nowhere", card="tok_visa", flight="XX 1"))
    error = failure_of(await run.result(timeout=20))
    assert isinstance(error, saga.SoldOut)
    assert error.what == "flight XX 1"
    assert saga.desk.ledger == []


async def test_saga_interrupted_while_the_charge_waits_to_retry_undoes_the_bookings(
    travel: Any, peek: Peek
) -> None:
    app, relay, ada = travel
    saga.desk.bank_down = True
    run = await ada.start(saga.Book, saga.trip("rome", card="tok_visa"))
    await quiet(app, relay)
    assert (await run.poll()).status == "suspended"
    settled = await peek.rows(
        "SELECT attempt, exit IS NOT NULL FROM actor_workflow_step WHERE step = 'charge-card'"
    )
    assert settled == [(1, True)]

    await run.interrupt()
    assert isinstance(failure_of(await run.result(timeout=20)), akter.Interrupted)
    assert saga.desk.ledger == [
        "reserve flight LH 454",
        "reserve hotel Hotel Adlon x3",
        "bank unavailable",
        "cancel hotel H-0002",
        "cancel flight F-0001",
    ]
    await quiet(app, relay)
    assert await peek.count("actor_outbox") == 0
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0


async def test_saga_retries_the_charge_a_minute_later_on_the_database_clock(
    travel: Any, clock: testing.Clock, peek: Peek
) -> None:
    app, relay, ada = travel
    saga.desk.bank_down = True
    run = await ada.start(saga.Book, saga.trip("rome", card="tok_visa"))
    await quiet(app, relay)
    assert (await run.poll()).status == "suspended"
    saga.desk.bank_down = False
    await clock.advance(timedelta(minutes=1, seconds=1))
    assert await run.result(timeout=20) == Success(saga.Itinerary("rome", "F-0001", "H-0002", "C-0004"))
    assert saga.desk.ledger[2:] == ["bank unavailable", "charge 129.00 to tok_visa"]
    attempts = await peek.rows(
        "SELECT attempt FROM actor_workflow_step WHERE step = 'charge-card' ORDER BY 1"
    )
    assert attempts == [(1,), (2,)]


# ---- approval ---------------------------------------------------------------------------------


@pytest.fixture
async def reports(database_url: str) -> AsyncIterator[tuple[akter.App, Relay, Any]]:
    approval.mailer.sent.clear()
    app = approval.make_app(database_url)
    async with app.relay() as relay, app.client(akter.User("sam")) as client:
        yield app, relay, client


def request(**overrides: Any) -> approval.ReviewRequest:
    return approval.ReviewRequest(
        **{"submitter": "sam", "approver": "alice", "manager": "carol", "amount_cents": 42_00, **overrides}
    )


async def report_state(peek: Peek, report: str) -> approval.ReportState:
    stored = await peek.value("SELECT state FROM actor_state WHERE actor_id = %s", report)
    return codec.decode(bytes(stored), approval.ReportState)


async def test_approval_the_approver_decides_in_time(reports: Any, peek: Peek) -> None:
    _, _, client = reports
    run = await client.actor(approval.ExpenseReport, "r1", tenant="acme").start(approval.Review, request())
    alice = client.actor(approval.ExpenseReport, "r1", tenant="acme", caller=akter.User("alice"))
    await alice.send(approval.decide, approval.Decide(approve=True, note="fine"))
    verdict = approval.Verdict(approved=True, decided_by="alice", escalated=False, note="fine")
    assert await run.result(timeout=20) == Success(verdict)
    assert approval.mailer.sent == ["to alice: please review r1 (42.00)"]
    assert await report_state(peek, "r1") == approval.ReportState(status="approved", decided_by="alice")


async def test_approval_someone_else_does_not_count_and_the_manager_decides_after_escalation(
    reports: Any, clock: testing.Clock, peek: Peek
) -> None:
    app, relay, client = reports
    run = await client.actor(approval.ExpenseReport, "r2", tenant="acme").start(approval.Review, request())
    bob = client.actor(approval.ExpenseReport, "r2", tenant="acme", caller=akter.User("bob"))
    await bob.send(approval.decide, approval.Decide(approve=True))
    await quiet(app, relay)
    assert (await run.poll()).status == "suspended"

    await clock.advance(TWO_DAYS)
    await quiet(app, relay)
    assert approval.mailer.sent[-1] == "to carol: alice did not review r2"
    carol = client.actor(approval.ExpenseReport, "r2", tenant="acme", caller=akter.User("carol"))
    await carol.send(approval.decide, approval.Decide(approve=False, note="over budget"))
    verdict = approval.Verdict(approved=False, decided_by="carol", escalated=True, note="over budget")
    assert await run.result(timeout=20) == Success(verdict)
    assert await report_state(peek, "r2") == approval.ReportState(status="rejected", decided_by="carol")
    assert await peek.value("SELECT count(*) FROM actor_events WHERE actor_id = 'r2'") == 2


async def test_approval_nobody_decides_and_the_deadline_rejects(
    reports: Any, clock: testing.Clock, peek: Peek
) -> None:
    app, relay, client = reports
    run = await client.actor(approval.ExpenseReport, "r3", tenant="acme").start(approval.Review, request())
    await quiet(app, relay)
    await clock.advance(TWO_DAYS)
    await quiet(app, relay)
    assert (await run.poll()).status == "suspended"
    await clock.advance(TWO_DAYS)
    verdict = approval.Verdict(
        approved=False, decided_by="deadline", escalated=True, note="nobody decided in time"
    )
    assert await run.result(timeout=20) == Success(verdict)
    assert approval.mailer.sent == ["to alice: please review r3 (42.00)", "to carol: alice did not review r3"]
    assert await report_state(peek, "r3") == approval.ReportState(status="rejected", decided_by="deadline")


async def test_approval_anonymous_callers_cannot_decide(reports: Any, peek: Peek) -> None:
    _, _, client = reports
    await client.actor(approval.ExpenseReport, "r4", tenant="acme").start(approval.Review, request())
    stranger = client.actor(approval.ExpenseReport, "r4", tenant="acme", caller=akter.Anonymous())
    with pytest.raises(akter.AccessDenied):
        await stranger.send(approval.decide, approval.Decide(approve=True))
    assert await peek.value("SELECT count(*) FROM actor_events WHERE actor_id = 'r4'") == 0


# ---- fulfilment -------------------------------------------------------------------------------


async def test_fulfilment_ships_each_line_in_its_own_child_and_refunds_the_backordered_one(
    database_url: str, peek: Peek
) -> None:
    fulfilment.services.reset()
    app = fulfilment.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        store = client.actor(fulfilment.Store, "store-1", tenant="shop")
        run = await store.start(fulfilment.PlaceOrder, fulfilment.order("o-1"))
        result = await run.result(timeout=60)
        receipt = result.unwrap()
        assert receipt.total_cents == 8900 + 2 * 1500 + 3 * 1200 + 2500 + 1900
        assert [p.sku for p in receipt.shipped] == ["boots", "scarf", "gloves", "hat"]
        assert receipt.shipped[0].tracking == "TRACK-NORTH-BOOTS"
        assert receipt.backordered == ("umbrella",)
        assert receipt.refunded_cents == 3000
        # each line was its own execution on the warehouse that stocks it, started by the order
        children = await peek.rows(
            "SELECT actor_id, outcome FROM actor_workflow_executions WHERE parent_id = %s",
            run.execution_id,
        )
        assert sorted(children) == sorted(
            [
                ("north", "succeeded"),
                ("north", "failed"),
                ("south", "succeeded"),
                ("south", "succeeded"),
                ("east", "succeeded"),
            ]
        )
        assert fulfilment.services.ledger.count("refund 3000 cents on o-1") == 1
        assert len([e for e in fulfilment.services.ledger if e.startswith("label")]) == 4
        # the same order again attaches to its execution: nothing ships twice
        again = await store.start(fulfilment.PlaceOrder, fulfilment.order("o-1"))
        assert again.execution_id == run.execution_id
        await quiet(app, relay)
        assert len([e for e in fulfilment.services.ledger if e.startswith("label")]) == 4


async def test_fulfilment_main_prints_the_receipt(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fulfilment.services.reset()
    await fulfilment.main(database_url)
    out = capsys.readouterr().out
    assert "backordered=('umbrella',), refunded_cents=3000" in out
    assert "north: umbrella out of stock" in out

"""A resume turn hands its execution to a runner: this process's, when it owns the actor, or the
owner's, through the execution's timer made due now. Nothing waits for the 30 s recovery timer,
and a resume whose commit fails leaves nothing of itself behind."""

from __future__ import annotations

import gc
import itertools
import weakref
from datetime import timedelta
from typing import Any

from returns.result import Success

from akter import demo, testing
from akter.actor.kernel import Committed, UnderLock
from akter.actor.turn import Turn
from akter.ids import ActorRef, CommandId, ExecutionId
from akter.outbox.intents import decode_caller
from akter.outbox.relay import RelaySettings
from akter.workflow.api.commands import RESUME, Resume, ResumeMark
from tests.apps import flows
from tests.apps.flows import Done, Flows, Job, Settle
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, until

PRINCIPAL = "ledger 2; principal Anonymous(); tenant acme"


async def test_a_resume_committed_by_a_relay_that_does_not_own_the_actor_runs_at_once(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    owner_app, other_app = flows.make_app(database_url), flows.make_app(database_url)
    async with owner_app.relay() as owner, other_app.relay() as other, owner_app.client() as client:

        async def split() -> tuple[frozenset[int], frozenset[int]]:
            return owner.owned(), other.owned()

        await until(split, lambda o: bool(o[0]) and bool(o[1]) and len(o[0] | o[1]) == 256)
        actor_id = next(
            f"h{i}" for i in itertools.count() if ActorRef("acme", "Flows", f"h{i}").bucket in owner.owned()
        )
        run = await client.actor(Flows, actor_id, tenant="acme").start(Settle, Job("handoff", seconds=600))
        await until(run.poll, lambda s: s.status == "suspended")
        # The owner claims the timer once the sleep is due, and stalls before delivering it: the
        # other relay delivers it instead, as a relay that owned the bucket before an outage would.
        stalled = testing.pause("relay.before_delivery", match=actor_id)
        await clock.advance(timedelta(seconds=601))
        await stalled.reached()
        intent_id, caller = (await peek.rows("SELECT intent_id, caller FROM actor_outbox"))[0]
        record = await (await other_app.engine()).sender.send(
            ActorRef("acme", "Flows", actor_id),
            Flows.commands[RESUME],
            Resume(execution_id=run.execution_id),
            CommandId.parse(intent_id),
            decode_caller(bytes(caller)),
        )
        assert not record.replayed
        stalled.release()
        # no clock moves from here: the recovery timer (30 s ahead) is never what runs it
        assert await run.result(timeout=15) == Success(Done(PRINCIPAL))
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0


class FailNextResume:
    """A turn hook after the workflow hook's: once ``armed``, fails the next resume of one actor
    before it commits, and keeps weak references to what that resume handed over."""

    def __init__(self, actor_id: str) -> None:
        self.actor_id = actor_id
        self.armed = False
        self.handed: list[weakref.ref[ExecutionId]] = []

    async def before_commit(self, db: UnderLock, turn: Turn[Any], record: Committed) -> None:
        marks = [m for m in turn.staged.get("workflow", ()) if isinstance(m, ResumeMark)]
        if marks and self.armed and not self.handed and turn.ref.actor_id == self.actor_id:
            self.handed.extend(weakref.ref(m.execution_id) for m in marks)
            raise RuntimeError("this resume's commit fails")

    def after_commit(self, record: Committed) -> None:
        pass


async def test_a_resume_whose_commit_fails_leaves_nothing_behind(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    app = flows.make_app(database_url)
    spy = FailNextResume("leaky")
    app.hooks.append(spy)
    settings = RelaySettings(backoff_base=timedelta(minutes=1))
    async with app.relay(settings), app.client() as client:
        run = await client.actor(Flows, "leaky", tenant="acme").start(Settle, Job("leak", seconds=600))
        await until(run.poll, lambda s: s.status == "suspended")
        spy.armed = True
        await clock.advance(timedelta(seconds=601))
        await until(lambda: peek.value("SELECT last_error FROM actor_outbox"), lambda e: e is not None)
        gc.collect()
        assert spy.handed
        assert [ref() for ref in spy.handed] == [None] * len(spy.handed)
        # and nothing was lost: the backed-off resume is delivered again and the run finishes
        await clock.advance(timedelta(seconds=61))
        assert await run.result(timeout=60) == Success(Done(PRINCIPAL))


async def test_an_event_resumes_a_waiting_execution_here_without_a_relay_delivery(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
        order = demo.Order("order-1", "warehouse-1", demo.SKU, qty=1, amount_cents=900)
        run = await orders.start(demo.Fulfil, order)
        await quiet(app, relay)
        await clock.advance(demo.COOL_OFF * 2)
        await quiet(app, relay)  # waiting for its payment
        resumes = "SELECT count(*) FROM actor_receipts WHERE command = 'akter.wf.resume'"
        before = await peek.value(resumes)
        await orders.send(demo.pay, demo.Pay(order="order-1", amount_cents=900))
        assert isinstance(await run.result(timeout=30), Success)
        await quiet(app, relay)
        # the pay turn was the resume turn: no timer was delivered to wake it
        assert await peek.value(resumes) == before


async def test_an_event_leaves_a_paused_execution_paused_until_it_is_resumed(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
        order = demo.Order("order-1", "warehouse-1", demo.SKU, qty=1, amount_cents=900)
        run = await orders.start(demo.Fulfil, order)
        await quiet(app, relay)
        await clock.advance(demo.COOL_OFF * 2)
        await quiet(app, relay)
        await client.pause_executions(run.execution_id, reason="hold it")
        await until(run.poll, lambda s: s.status == "paused")
        await orders.send(demo.pay, demo.Pay(order="order-1", amount_cents=900))
        await quiet(app, relay)
        assert (await run.poll()).status == "paused"
        await client.resume_executions(run.execution_id)
        # the payment that came while it was paused is applied after the resume
        assert isinstance(await run.result(timeout=30), Success)

"""The demo app: a small shop run end to end on PostgreSQL, narrated as the rows appear.

``akter demo`` (``akter.cli.demo``) runs it. It is an example, not part of the library: no
akter module but that command imports it (an import contract in ``pyproject.toml``).

The app is declared here at module level, as a user's would be: a ``DemoShop`` actor owns one
``Fulfil`` execution per order, and a ``DemoWarehouse`` actor holds the stock. ``Fulfil``
reserves stock (an activity that sends a command to the warehouse with derived command ids),
cools off (a durable sleep), waits for the order's ``PaymentReceived`` event with a deadline,
and ships; a failure or an interrupt gives the stock back (a compensation). ``akter inspect
akter.demo:app ...`` decodes what the demo stored with these same declarations.

``run_demo`` starts the App with its relay in this process (``App.relay()``, as small
deployments and tests do) and plays three orders: one paid in time, one interrupted during its
cool-off, one whose payment window passes. A ``Narrator`` reads what happened from the database
through a second, read-only connection (the views of ``akter.inspect``) and prints it: executions
started, steps recorded, timers armed, events appended and matched, results. Durable time here is
the real clock (a cool-off of a second and a half — longer than a pass holds a sleep in process,
so the execution suspends — and a two-second payment window): the demo may run against a
database that matters, so it never moves its clock. Each run uses fresh actor ids, so running it
again on the same database adds a new shop and warehouse beside the old ones.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import attrs
import psycopg
from returns.maybe import Maybe, Some
from returns.result import Failure, Success

import akter
from akter import inspect as views
from akter.errors import CorruptRecord
from akter.ids import ActorRef, ExecutionId
from akter.workflow.api.declare import ActivityStep

T = TypeVar("T")

TENANT = "demo"
SKU = "widget"
INITIAL_STOCK = 10
COOL_OFF = timedelta(seconds=1.5)
PAYMENT_WINDOW_S = 30
SHORT_PAYMENT_WINDOW_S = 2
#: how often the narrator reads the database while something runs
POLL_INTERVAL = 0.05
#: a step of the demo that takes longer than this is stuck: the demo says so and exits 1
STEP_TIMEOUT = 20.0


# ---- the app ----------------------------------------------------------------------------------


@attrs.frozen
class WarehouseState:
    stock: dict[str, int] = attrs.field(factory=lambda: {SKU: INITIAL_STOCK})


@attrs.frozen
class StockRequest:
    order: str
    sku: str
    qty: int


@attrs.frozen
class Reservation:
    order: str
    sku: str
    qty: int


@attrs.frozen
class StockReserved:
    order: str
    sku: str
    qty: int
    left: int


@attrs.frozen
class StockReleased:
    order: str
    sku: str
    qty: int
    left: int


@attrs.frozen(auto_exc=True)
class OutOfStock(Exception):
    sku: str
    asked: int
    available: int


DemoWarehouse = akter.Actor("DemoWarehouse", state=WarehouseState, events=[StockReserved, StockReleased])


@DemoWarehouse.command(errors=[OutOfStock])
def reserve_stock(turn: akter.Turn[WarehouseState], req: StockRequest) -> Reservation:
    have = turn.state.stock.get(req.sku, 0)
    if have < req.qty:
        raise OutOfStock(sku=req.sku, asked=req.qty, available=have)
    turn.state = WarehouseState(stock={**turn.state.stock, req.sku: have - req.qty})
    turn.emit(StockReserved(order=req.order, sku=req.sku, qty=req.qty, left=have - req.qty))
    return Reservation(order=req.order, sku=req.sku, qty=req.qty)


@DemoWarehouse.command
def release_stock(turn: akter.Turn[WarehouseState], req: StockRequest) -> None:
    left = turn.state.stock.get(req.sku, 0) + req.qty
    turn.state = WarehouseState(stock={**turn.state.stock, req.sku: left})
    turn.emit(StockReleased(order=req.order, sku=req.sku, qty=req.qty, left=left))


@attrs.frozen
class ShopState:
    paid_cents: int = 0


@attrs.frozen
class Pay:
    order: str
    amount_cents: int


@attrs.frozen
class PaymentReceived:
    order: str
    amount_cents: int


@attrs.frozen
class Order:
    id: str
    warehouse: str
    sku: str
    qty: int
    amount_cents: int
    payment_window_s: int = PAYMENT_WINDOW_S


@attrs.frozen
class Parcel:
    order: str
    tracking: str


@attrs.frozen
class Shipped:
    order: str
    tracking: str
    paid_cents: int


@attrs.frozen(auto_exc=True)
class PaymentOverdue(Exception):
    order: str
    waited_s: int


DemoShop = akter.Actor("DemoShop", state=ShopState, events=[PaymentReceived])


@DemoShop.command
def pay(turn: akter.Turn[ShopState], cmd: Pay) -> None:
    turn.state = ShopState(paid_cents=turn.state.paid_cents + cmd.amount_cents)
    turn.emit(PaymentReceived(order=cmd.order, amount_cents=cmd.amount_cents))


Fulfil = DemoShop.workflow(
    "Fulfil", input=Order, output=Shipped, errors=[OutOfStock, PaymentOverdue], key=lambda order: order.id
)
reserve: ActivityStep[Reservation] = Fulfil.activity("reserve", success=Reservation, errors=[OutOfStock])
release: ActivityStep[None] = Fulfil.activity("release")
cool_off = Fulfil.sleep("cool-off")
payment = Fulfil.wait("payment", PaymentReceived)
ship: ActivityStep[Parcel] = Fulfil.activity("ship", success=Parcel)


async def take_stock(order: Order) -> Reservation:
    """Reserve the order's stock at its warehouse. The command's id is derived from the
    execution, step and attempt, so a rerun of this attempt cannot reserve twice."""
    warehouse = akter.activity_context().client.actor(DemoWarehouse, order.warehouse)
    match await warehouse.send(reserve_stock, StockRequest(order=order.id, sku=order.sku, qty=order.qty)):
        case Success(reservation):
            return reservation  # type: ignore[no-any-return]
        case Failure(error):
            raise error
    raise AssertionError("unreachable")  # pragma: no cover


def give_back(order: Order) -> Callable[[Reservation], Any]:
    async def put_back(reservation: Reservation) -> None:
        warehouse = akter.activity_context().client.actor(DemoWarehouse, order.warehouse)
        outcome = await warehouse.send(
            release_stock, StockRequest(order=reservation.order, sku=reservation.sku, qty=reservation.qty)
        )
        outcome.unwrap()

    return lambda reservation: release(put_back, reservation)


def book_parcel(reservation: Reservation) -> Parcel:
    """A stand-in for a carrier's API. Its tracking number is random: the step records it once
    and every replay returns the recorded one."""
    return Parcel(order=reservation.order, tracking=f"TRK-{secrets.token_hex(4).upper()}")


@Fulfil.body
async def fulfil(wf: akter.WorkflowContext, order: Order) -> Shipped:
    reservation = await wf.compensate(reserve(take_stock, order), undo=give_back(order))
    await cool_off(COOL_OFF)  # the customer may still cancel (interrupt) here
    match await payment(
        where=lambda paid: paid.order == order.id, timeout=timedelta(seconds=order.payment_window_s)
    ):
        case Some(paid):
            parcel = await ship(book_parcel, reservation)
            return Shipped(order=order.id, tracking=parcel.tracking, paid_cents=paid.amount_cents)
        case Maybe.empty:
            raise PaymentOverdue(order=order.id, waited_s=order.payment_window_s)
    raise AssertionError("unreachable")  # pragma: no cover


def make_app(database_url: str | None = None) -> akter.App:
    # the demo is a tool, like ``akter relay``: it brings whatever database it is given up to date
    return akter.App([DemoShop, DemoWarehouse], database_url=database_url, migrate_on_start=True)


#: for ``akter inspect akter.demo:app ...``
app = make_app()


# ---- the narrator -----------------------------------------------------------------------------


class DemoStuck(Exception):
    """Something the demo waits for did not happen within ``STEP_TIMEOUT``."""


@attrs.define
class _Watch:
    eid: ExecutionId
    status: str | None = None
    #: when the timer last narrated was armed (each arm writes a new created_at)
    timer: datetime | None = None
    steps: dict[tuple[str, int], views.StepView] = attrs.field(factory=dict)
    finished: views.ExecutionView | None = None


class Narrator:
    """Prints what the database records while the demo runs, from its own read-only connection.

    Each ``poll`` reads the watched executions (``akter.inspect.read_execution``) and the new
    events of the watched actors, and prints what changed, stamped with the database time
    relative to the start of the current scene."""

    def __init__(
        self, conn: psycopg.AsyncConnection[Any], app: akter.App, write: Callable[[str], None]
    ) -> None:
        self.conn = conn
        self.app = app
        self.write = write
        self.actors: dict[ActorRef, int] = {}
        self.watches: dict[str, _Watch] = {}
        self.origin = datetime.now(UTC)

    async def db_now(self) -> datetime:
        async with self.conn.transaction():
            row = await (await self.conn.execute("SELECT akter_now()")).fetchone()
        if row is None:  # pragma: no cover - a SELECT without FROM always returns one row
            raise AssertionError("SELECT akter_now() returned no row")
        now: datetime = row[0]
        return now

    def stamp(self, at: datetime) -> str:
        return f"+{(at - self.origin).total_seconds():.2f}s".rjust(7)

    async def scene(self, title: str) -> None:
        self.write("")
        self.write(title)
        self.origin = await self.db_now()

    async def say(self, what: str) -> None:
        """A line for a call the demo makes through its client (it plays the shop's front end)."""
        await self.poll()
        self.write(f"  {self.stamp(await self.db_now())}  client    {what}")

    def watch_actor(self, ref: ActorRef) -> None:
        self.actors.setdefault(ref, 0)

    def watch(self, eid: ExecutionId) -> None:
        self.watches.setdefault(str(eid), _Watch(eid))

    async def poll(self) -> None:
        lines: list[tuple[datetime, str, str]] = []
        async with self.conn.transaction():
            for ref, seen in self.actors.items():
                events = await views.read_events(self.conn, self.app, ref, after=seen, limit=1000)
                for event in events:
                    lines.append(
                        (event.created_at, "event", f"{ref.actor_type} #{event.sequence} {event.value.text}")
                    )
                    self.actors[ref] = event.sequence
            for watch in self.watches.values():
                if watch.finished is None:
                    lines += await self._execution(watch)
        for at, label, text in sorted(lines, key=lambda line: line[0]):
            self.write(f"  {self.stamp(at)}  {label:<9} {text}")

    async def _execution(self, watch: _Watch) -> list[tuple[datetime, str, str]]:
        view = await views.read_execution(self.conn, self.app, watch.eid)
        if view is None:
            return []
        lines: list[tuple[datetime, str, str]] = []
        if watch.status is None:
            lines.append((view.started_at, "started", f"{view.workflow} {view.key!r}: {view.execution_id}"))
        for step in view.steps:
            known = watch.steps.get((step.step, step.attempt))
            if known is not None and known.pending == step.pending:
                continue
            watch.steps[(step.step, step.attempt)] = step
            if step.exit is not None and step.settled_at is not None:
                lines.append(
                    (step.settled_at, "step", f"{step.step} #{step.attempt} ({step.kind}): {step.exit.text}")
                )
            elif step.kind in ("clock", "wait"):
                lines.append((step.started_at, "step", self._pending(step)))
        timer = view.timer
        # Only arms made while suspended are the pass's (or an event's, or an interrupt's): a
        # running execution's timer is its recovery timer, and a claimed one shows the relay's
        # delivery lease, not a due time.
        if (
            view.status == "suspended"
            and timer is not None
            and timer.claimed_by is None
            and timer.created_at != watch.timer
        ):
            watch.timer = timer.created_at
            if timer.due_at <= timer.created_at:
                text = "due now: the relay delivers a resume at once and the execution runs again"
            else:
                text = f"armed for {self.stamp(timer.due_at).strip()}; the execution is suspended until then"
            lines.append((timer.created_at, "timer", text))
        if view.status == "finished":
            watch.finished = view
            result = view.result.text if view.result is not None else "no result"
            text = result if result == view.outcome else f"{view.outcome}: {result}"
            lines.append((view.finished_at or view.updated_at, "finished", text))
        watch.status = view.status
        return lines

    def _pending(self, step: views.StepView) -> str:
        head = f"{step.step} #{step.attempt} ({step.kind})"
        due = self.stamp(step.due_at).strip() if step.due_at is not None else "never"
        if step.kind == "clock":
            return f"{head}: sleeping until {due}"
        return f"{head}: waiting for {step.wait_tag}, deadline {due}"

    async def follow(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` while printing what happens; then print what is left."""
        task = asyncio.ensure_future(awaitable)
        try:
            async with asyncio.timeout(STEP_TIMEOUT):
                while not task.done():
                    await self.poll()
                    await asyncio.wait([task], timeout=POLL_INTERVAL)
        except TimeoutError:
            raise DemoStuck("no outcome") from None
        finally:
            task.cancel()
        await self.poll()
        return task.result()

    async def until(self, what: str, check: Callable[[], bool]) -> None:
        """Print what happens until ``check()`` holds (it reads what the polls saw)."""
        try:
            async with asyncio.timeout(STEP_TIMEOUT):
                while True:
                    await self.poll()
                    if check():
                        return
                    await asyncio.sleep(POLL_INTERVAL)
        except TimeoutError:
            raise DemoStuck(what) from None

    def pending(self, eid: ExecutionId, step: str) -> Callable[[], bool]:
        watch = self.watches[str(eid)]
        return lambda: any(s.step == step and s.pending for s in watch.steps.values())


# ---- the run ----------------------------------------------------------------------------------


@attrs.frozen
class DemoRun:
    """What a demo run did, for its summary and for tests."""

    shop: ActorRef
    warehouse: ActorRef
    outcomes: dict[str, str]
    ok: bool


def _database(database_url: str | None) -> tuple[str, str]:
    """The URL to use and how to describe it (the embedded server starts here when chosen)."""
    from akter.store.database import default_data_dir, describe, resolve_database_url

    configured = database_url or os.environ.get("AKTER_DATABASE_URL")
    began = time.monotonic()
    url = resolve_database_url(configured)
    if configured:
        return url, describe(url)
    return url, f"embedded PostgreSQL in {default_data_dir()} (ready in {time.monotonic() - began:.1f}s)"


def _fresh_ids() -> tuple[str, str]:
    now = datetime.now(UTC)
    stamp = f"{now:%Y%m%d-%H%M%S}-{now.microsecond // 1000:03d}"
    return f"shop-{stamp}", f"warehouse-{stamp}"


class _Scenes:
    """The three orders, each a scene: the demo plays the customer, the narrator reports."""

    def __init__(self, narrator: Narrator, orders: Any, warehouse_id: str) -> None:
        self.narrator = narrator
        self.orders = orders
        self.warehouse_id = warehouse_id

    def order(self, n: int, qty: int, window: int = PAYMENT_WINDOW_S) -> Order:
        return Order(
            f"order-{n}", self.warehouse_id, SKU, qty, amount_cents=qty * 2500, payment_window_s=window
        )

    async def start(self, order: Order) -> tuple[akter.Run[Shipped], ExecutionId]:
        await self.narrator.say(
            f"start Fulfil for {order.id}: {order.qty} x {order.sku}, {order.payment_window_s}s to pay"
        )
        run: akter.Run[Shipped] = await self.orders.start(Fulfil, order)
        eid = ExecutionId.parse(run.execution_id)
        self.narrator.watch(eid)
        return run, eid

    async def paid(self) -> str:
        narrator = self.narrator
        await narrator.scene("order-1: paid in time, then shipped")
        order = self.order(1, qty=2)
        run, eid = await self.start(order)
        await narrator.until("order-1 waits for payment", narrator.pending(eid, "payment"))
        await narrator.say(
            f"pay {order.amount_cents / 100:.2f} for order-1 (a command; it emits PaymentReceived)"
        )
        await self.orders.send(pay, Pay(order=order.id, amount_cents=order.amount_cents))
        result = await narrator.follow(run.result())
        return "shipped" if isinstance(result, Success) else f"unexpected: {result}"

    async def cancelled(self) -> str:
        narrator = self.narrator
        await narrator.scene("order-2: cancelled during its cool-off; the compensation gives the stock back")
        run, eid = await self.start(self.order(2, qty=3))
        await narrator.until("order-2 cools off", narrator.pending(eid, "cool-off"))
        await narrator.say("interrupt order-2 (the customer cancelled)")
        await run.interrupt()
        result = await narrator.follow(run.result())
        if isinstance(result, Failure) and isinstance(result.failure(), akter.Interrupted):
            return "interrupted"
        return f"unexpected: {result}"

    async def unpaid(self) -> str:
        narrator = self.narrator
        await narrator.scene(
            f"order-3: nobody pays within {SHORT_PAYMENT_WINDOW_S}s; the order fails and gives its stock back"
        )
        run, _ = await self.start(self.order(3, qty=1, window=SHORT_PAYMENT_WINDOW_S))
        result = await narrator.follow(run.result())
        if isinstance(result, Failure) and isinstance(result.failure(), PaymentOverdue):
            return "payment overdue"
        return f"unexpected: {result}"


EXPECTED = {"order-1": "shipped", "order-2": "interrupted", "order-3": "payment overdue"}


def _introduce(write: Callable[[str], None], described: str, shop: ActorRef, warehouse: ActorRef) -> None:
    write(f"database  {described}")
    write(
        f"time      real time: the cool-off is a {COOL_OFF.total_seconds():g}s durable sleep and "
        f"order-3 has a {SHORT_PAYMENT_WINDOW_S}s payment window (the database clock is not moved)"
    )
    write(f"actors    {shop} owns the orders; {warehouse} holds {INITIAL_STOCK} x {SKU}")
    write("")
    write("Fulfil, one execution per order (akter/demo/__init__.py):")
    write("  reserve   activity: reserve_stock at the warehouse; a failure or interrupt releases it")
    write("  cool-off  durable sleep: a timer row in the outbox, not asyncio.sleep")
    write("  payment   wait for this order's PaymentReceived event, with a deadline")
    write("  ship      activity: book a parcel with the carrier")


async def run_demo(database_url: str | None = None, write: Callable[[str], None] = print) -> DemoRun:
    """Play the demo against ``database_url`` (else ``AKTER_DATABASE_URL``, else the embedded
    server), printing through ``write``. Raises ``akter.ConfigurationError`` (or a psycopg error)
    when the database is not usable, ``DemoStuck`` when the engine does not make progress."""
    began = time.monotonic()
    write("akter demo: an order workflow, run end to end on PostgreSQL with the relay in this process")
    write("")
    url, described = await asyncio.to_thread(_database, database_url)
    shop_id, warehouse_id = _fresh_ids()
    shop = ActorRef(TENANT, DemoShop.name, shop_id)
    warehouse = ActorRef(TENANT, DemoWarehouse.name, warehouse_id)
    demo_app = make_app(url)
    async with demo_app, demo_app.relay(), demo_app.client() as client, await views.connect(url) as conn:
        _introduce(write, described, shop, warehouse)
        narrator = Narrator(conn, demo_app, write)
        narrator.watch_actor(shop)
        narrator.watch_actor(warehouse)
        scenes = _Scenes(narrator, client.actor(DemoShop, shop_id, tenant=TENANT), warehouse_id)
        outcomes = {"order-1": await scenes.paid(), "order-2": await scenes.cancelled()}
        outcomes["order-3"] = await scenes.unpaid()
        summary = await _summary(conn, demo_app, shop, warehouse)
    ok = outcomes == EXPECTED
    write("")
    write(f"outcomes  {', '.join(f'{k} {v}' for k, v in outcomes.items())}")
    for line in summary:
        write(line)
    write("")
    write("Look closer (read-only; add --database-url as above if you passed one):")
    write(f"  akter inspect actor akter.demo:app {TENANT} {DemoShop.name} {shop_id}")
    write(f"  akter inspect actor akter.demo:app {TENANT} {DemoWarehouse.name} {warehouse_id}")
    write(f"  akter inspect execution akter.demo:app {ExecutionId(shop, Fulfil.name, 'order-2')}")
    write("  akter ui akter.demo:app    (the inspector page: http://127.0.0.1:8080/)")
    write("")
    write(
        f"done in {time.monotonic() - began:.1f}s" + ("" if ok else " -- an outcome was not the expected one")
    )
    return DemoRun(shop=shop, warehouse=warehouse, outcomes=outcomes, ok=ok)


async def _summary(
    conn: psycopg.AsyncConnection[Any], app: akter.App, shop: ActorRef, warehouse: ActorRef
) -> list[str]:
    async with conn.transaction():
        store = await views.read_actor(conn, app, warehouse)
        owner = await views.read_actor(conn, app, shop)
        steps = await conn.execute(
            "SELECT count(*) FROM actor_workflow_step s JOIN actor_workflow_executions x"
            " ON x.routing_key = s.routing_key AND x.execution_id = s.execution_id"
            " WHERE x.routing_key = %s AND x.tenant = %s AND x.actor_type = %s AND x.actor_id = %s",
            (shop.routing_key, shop.tenant, shop.actor_type, shop.actor_id),
        )
        row = await steps.fetchone()
    if store is None or owner is None:
        # the demo's own turns created both actors just before; a missing one is another
        # process deleting them under the demo
        raise CorruptRecord(f"the demo's actors {warehouse} and {shop} are gone from the database")
    if row is None:  # pragma: no cover - count(*) always returns one row
        raise AssertionError("SELECT count(*) returned no row")
    stock = store.state.text if store.state else "none stored"
    return [
        f"stock     {stock} (of {INITIAL_STOCK}: order-1 took 2; orders 2 and 3 gave theirs back)",
        f"shop      {owner.state.text if owner.state else 'none stored'}",
        f"stored    {owner.counts['executions']} executions with {row[0]} steps, "
        f"{owner.counts['events'] + store.counts['events']} events, "
        f"{owner.counts['outbox'] + store.counts['outbox']} outbox rows left",
    ]

"""An order fulfilled line by line: one child execution per line, on the warehouse that holds it.

Run it with ``python examples/fulfilment.py`` (the embedded PostgreSQL, or ``AKTER_DATABASE_URL``).

A ``Store`` actor owns one ``PlaceOrder`` execution per order. It prices the order, then starts a
``FulfilLine`` child execution for each line on the ``Warehouse`` actor that stocks it — at most
``MAX_PARALLEL`` at a time — and waits for all of them. Each child picks and labels its line; a
line out of stock ends its child with the declared ``OutOfStock`` error, which reaches the parent
as a ``Failure`` value (never an exception in the parent's body), so the parent refunds exactly
the lines that could not ship.

Each child belongs to its warehouse: it runs under that actor's lock, next to its stock, and it
survives a crash of the process that started it. The parent and its children never write each
other's rows: a child is started through the store's outbox and its finish resumes the store
through the warehouse's outbox. Cancelling the order (interrupting ``PlaceOrder``) interrupts
the lines still being fulfilled.

The warehouse services are in-memory stand-ins that write what they did to ``services.ledger``.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import attrs
from returns.result import Failure, Result, Success

import akter

MAX_PARALLEL = 4

# ---- the services (stand-ins) -----------------------------------------------------------------


@attrs.frozen
class OutOfStock(Exception):
    sku: str


class Services:
    """What the warehouses and the payment provider were asked to do, in order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ledger: list[str] = []
        self.out_of_stock: set[str] = {"umbrella"}

    def reset(self) -> None:
        with self.lock:
            self.ledger.clear()

    def note(self, entry: str) -> None:
        with self.lock:
            self.ledger.append(entry)

    def pick(self, warehouse: str, sku: str, quantity: int) -> str:
        if sku in self.out_of_stock:
            self.note(f"{warehouse}: {sku} out of stock")
            raise OutOfStock(sku)
        self.note(f"{warehouse}: picked {quantity} x {sku}")
        return f"{warehouse}-{sku}"

    def label(self, parcel: str) -> str:
        self.note(f"label {parcel}")
        return f"TRACK-{parcel.upper()}"

    def refund(self, order: str, cents: int) -> int:
        self.note(f"refund {cents} cents on {order}")
        return cents


services = Services()

# ---- the actors and workflows -----------------------------------------------------------------


@attrs.frozen
class Line:
    sku: str
    quantity: int
    cents: int
    warehouse: str


@attrs.frozen
class Order:
    id: str
    lines: tuple[Line, ...]


@attrs.frozen
class Parcel:
    sku: str
    tracking: str


@attrs.frozen
class Receipt:
    order: str
    total_cents: int
    shipped: tuple[Parcel, ...]
    backordered: tuple[str, ...]
    refunded_cents: int


@attrs.frozen
class Nothing:
    pass


Store = akter.Actor("Store", state=Nothing)
Warehouse = akter.Actor("Warehouse", state=Nothing)

FulfilLine = Warehouse.workflow("FulfilLine", input=Line, output=Parcel, errors=[OutOfStock])
pick = FulfilLine.activity("pick", success=str, errors=[OutOfStock])
label = FulfilLine.activity("label", success=str)


@FulfilLine.body
async def fulfil_line(wf: akter.WorkflowContext, line: Line) -> Parcel:
    parcel = await pick(services.pick, line.warehouse, line.sku, line.quantity)
    return Parcel(sku=line.sku, tracking=await label(services.label, parcel))


PlaceOrder = Store.workflow("PlaceOrder", input=Order, output=Receipt, key=lambda order: order.id)
ship_line = PlaceOrder.child("ship-line", FulfilLine)
refund = PlaceOrder.activity("refund", success=int)


@PlaceOrder.body
async def place_order(wf: akter.WorkflowContext, order: Order) -> Receipt:
    outcomes = await akter.all(
        *(wf.run(Warehouse, line.warehouse, FulfilLine, line) for line in order.lines), limit=MAX_PARALLEL
    )
    shipped: list[Parcel] = []
    backordered: list[Line] = []
    for line, outcome in zip(order.lines, outcomes, strict=True):
        match outcome:
            case Success(parcel):
                shipped.append(parcel)
            case Failure(OutOfStock()):
                backordered.append(line)
            case Failure(error):  # a defect or an interrupt of that line: fail the order loudly
                raise error
    owed = sum(line.cents * line.quantity for line in backordered)
    refunded = await refund(services.refund, order.id, owed) if owed else 0
    return Receipt(
        order=order.id,
        total_cents=sum(line.cents * line.quantity for line in order.lines),
        shipped=tuple(shipped),
        backordered=tuple(line.sku for line in backordered),
        refunded_cents=refunded,
    )


def make_app(database_url: str | None = None) -> akter.App:
    """The example's App (``database_url``: None for ``AKTER_DATABASE_URL`` or the embedded server)."""
    return akter.App([Store, Warehouse], database_url=database_url)


def order(order_id: str) -> Order:
    return Order(
        order_id,
        (
            Line("boots", 1, 8900, "north"),
            Line("umbrella", 2, 1500, "north"),
            Line("scarf", 3, 1200, "south"),
            Line("gloves", 1, 2500, "south"),
            Line("hat", 1, 1900, "east"),
        ),
    )


def describe(result: Result[Receipt, Exception]) -> str:
    match result:
        case Success(receipt):
            return f"{receipt!r}"
        case Failure(error):
            return f"failed: {error!r}"
    raise AssertionError(result)  # pragma: no cover


async def main(database_url: str | None = None) -> None:
    order_id = f"order-{datetime.now(UTC):%Y%m%d-%H%M%S-%f}"
    app = make_app(database_url)
    async with app, app.relay(), app.client() as client:
        store = client.actor(Store, "store-1", tenant="shop")
        run = await store.start(PlaceOrder, order(order_id))
        print(f"order {order_id}: five lines, one out of stock")
        print("  ", describe(await run.result(timeout=60)))
    print("what the services were asked to do:")
    for entry in services.ledger:
        print("  ", entry)


if __name__ == "__main__":
    asyncio.run(main())

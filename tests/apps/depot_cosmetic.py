"""``tests.apps.depot``'s ``before``, written again with only cosmetic differences.

``renamed``: every Python name differs — the classes, the actor, workflow and step variables,
the body and its activities — while the declared names (actor type, workflow, steps) and the
types' fields stay. ``reordered``: the same names as ``before``, but the steps are declared in
another order and the types list their fields in another order. Neither changes how anything
is stored, so both have ``before``'s manifest hash and the deploy check accepts them.
"""

from __future__ import annotations

from datetime import timedelta

import attrs

import akter

# ---- renamed ------------------------------------------------------------------------------------


@attrs.frozen
class YardState:
    started: int = 0


@attrs.frozen
class Purchase:
    id: str
    qty: int = 1
    nap_s: int = 3600


@attrs.frozen
class Booking:
    order: str
    slot: int


@attrs.frozen
class Sticker:
    order: str
    carrier: str


@attrs.frozen
class Dispatched:
    order: str
    slot: int
    carrier: str
    notified: bool = False


Warehouse = akter.Actor("Depot", state=YardState)
dispatch = Warehouse.workflow("Ship", input=Purchase, output=Dispatched, key=lambda p: p.id)
book_it = dispatch.activity("reserve", success=Booking)
doze = dispatch.sleep("nap")
send_off = dispatch.activity("ship", success=Sticker)


@dispatch.body
async def dispatch_body(ctx: akter.WorkflowContext, purchase: Purchase) -> Dispatched:
    booking = await book_it(lambda: Booking(order=purchase.id, slot=purchase.qty * 10))
    await doze(timedelta(seconds=purchase.nap_s))
    sticker = await send_off(lambda: Sticker(order=purchase.id, carrier="post"))
    return Dispatched(order=purchase.id, slot=booking.slot, carrier=sticker.carrier)


renamed = akter.App([Warehouse])

# ---- reordered ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DepotState:
    started: int = 0


@attrs.frozen(kw_only=True)
class Order:
    nap_s: int = 3600
    qty: int = 1
    id: str


@attrs.frozen(kw_only=True)
class Reservation:
    slot: int
    order: str


@attrs.frozen(kw_only=True)
class Label:
    carrier: str
    order: str


@attrs.frozen(kw_only=True)
class Shipped:
    notified: bool = False
    carrier: str
    slot: int
    order: str


Depot = akter.Actor("Depot", state=DepotState)
Ship = Depot.workflow("Ship", input=Order, output=Shipped, key=lambda o: o.id)
ship = Ship.activity("ship", success=Label)
nap = Ship.sleep("nap")
reserve = Ship.activity("reserve", success=Reservation)


@Ship.body
async def ship_body(wf: akter.WorkflowContext, order: Order) -> Shipped:
    booked = await reserve(lambda: Reservation(order=order.id, slot=order.qty * 10))
    await nap(timedelta(seconds=order.nap_s))
    label = await ship(lambda: Label(order=order.id, carrier="post"))
    return Shipped(order=order.id, slot=booked.slot, carrier=label.carrier)


reordered = akter.App([Depot])

"""``tests.apps.depot``'s ``Ship`` with its declarations unchanged and its body changed: what the
manifest check accepts and only the replay check (``akter workflows replay``) can refuse.

Every variant declares exactly the steps, types and markers of ``depot.before`` — the same
manifest hash — and a body that differs:

* ``reordered`` — awaits ``nap`` before ``reserve`` (the same awaits, another order);
* ``branched`` — when the recorded reservation's slot is 10 or more, ships before the nap (a new
  branch on the same recorded value: an order of ``qty=0`` has slot 0 and does not take it);
* ``same`` — the body of ``before``, written again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import akter
from tests.apps.depot import DepotState, Label, Order, Ping, Reservation, Shipped


def build(variant: str) -> akter.Actor[DepotState]:
    depot = akter.Actor("Depot", state=DepotState)

    @depot.command
    def ping(turn: akter.Turn[DepotState], cmd: Ping) -> int:
        return cmd.n

    workflow = depot.workflow("Ship", input=Order, output=Shipped, key=lambda o: o.id)
    reserve = workflow.activity("reserve", success=Reservation)
    nap = workflow.sleep("nap")
    ship = workflow.activity("ship", success=Label)

    def do_reserve(order: Order) -> Reservation:
        return Reservation(order=order.id, slot=order.qty * 10)

    def do_ship(order: str, how: str) -> Label:
        return Label(order=order, carrier=how)

    @workflow.body
    async def run(wf: akter.WorkflowContext, order: Order) -> Shipped:
        if variant == "reordered":
            await nap(timedelta(seconds=order.nap_s))
            booked = await reserve(do_reserve, order)
        else:
            booked = await reserve(do_reserve, order)
            if variant == "branched" and booked.slot >= 10:
                await ship(do_ship, order.id, "express")
            await nap(timedelta(seconds=order.nap_s))
        shipped = await ship(do_ship, order.id, "post")
        return Shipped(order=order.id, slot=booked.slot, carrier=shipped.carrier)

    return depot


VARIANTS: dict[str, list[akter.Actor[Any]]] = {v: [build(v)] for v in ("reordered", "branched", "same")}


def make_app(variant: str, database_url: str | None = None) -> akter.App:
    return akter.App(VARIANTS[variant], database_url=database_url)


reordered = make_app("reordered")
branched = make_app("branched")
same = make_app("same")

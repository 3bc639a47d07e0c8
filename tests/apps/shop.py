"""A shop with workflow members, used by akter's own workflow tests and the processes they start."""

from __future__ import annotations

import os
from datetime import timedelta

import attrs
from returns.maybe import Maybe, Some

import akter


@attrs.frozen
class ShopState:
    orders: int = 0


@attrs.frozen
class Paid:
    order: str
    amount: int


@attrs.frozen
class Pay:
    order: str
    amount: int


@attrs.frozen
class Order:
    id: str
    qty: int = 1
    fail_times: int = 0
    sleep_s: int = 0
    wait_s: int = 0


@attrs.frozen
class Reservation:
    order: str
    slot: int


@attrs.frozen
class Shipped:
    order: str
    slot: int
    paid: int | None = None


@attrs.frozen(auto_exc=True)
class OutOfStock(Exception):
    sku: str
    asked: int


Shop = akter.Actor("Shop", state=ShopState, events=[Paid])


@Shop.command
def pay(turn: akter.Turn[ShopState], cmd: Pay) -> None:
    turn.emit(Paid(order=cmd.order, amount=cmd.amount))


#: calls per activity in this process, keyed "step:order"
CALLS: dict[str, int] = {}


def _count(name: str, order: Order | str) -> int:
    key = f"{name}:{order if isinstance(order, str) else order.id}"
    CALLS[key] = CALLS.get(key, 0) + 1
    return CALLS[key]


def do_reserve(order: Order) -> Reservation:
    n = _count("reserve", order)
    if order.qty > 100:
        raise OutOfStock(sku=order.id, asked=order.qty)
    if n <= order.fail_times:
        raise RuntimeError(f"warehouse down (call {n})")
    return Reservation(order=order.id, slot=order.qty * 10)


async def do_release(reservation: Reservation) -> None:
    _count("release", reservation.order)


Ship = Shop.workflow("Ship", input=Order, output=Shipped, errors=[OutOfStock], key=lambda o: o.id)
reserve = Ship.activity(
    "reserve",
    success=Reservation,
    errors=[OutOfStock],
    retry=akter.Retry.constant(timedelta(0), times=3),
)
release = Ship.activity("release")
cool_off = Ship.sleep("cool-off")
paid = Ship.wait("paid", Paid)


@Ship.body
async def ship(wf: akter.WorkflowContext, order: Order) -> Shipped:
    reservation = await wf.compensate(reserve(do_reserve, order), undo=lambda r: release(do_release, r))
    if order.sleep_s:
        await cool_off(timedelta(seconds=order.sleep_s))
    amount = None
    if order.wait_s:
        match await paid(where=lambda e: e.order == order.id, timeout=timedelta(seconds=order.wait_s)):
            case Some(event):
                amount = event.amount
            case Maybe.empty:
                amount = -1
    return Shipped(order=order.id, slot=reservation.slot, paid=amount)


def make_app(database_url: str | None = None) -> akter.App:
    return akter.App([Shop], database_url=database_url or os.environ.get("AKTER_DATABASE_URL"))

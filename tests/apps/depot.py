"""A depot whose ``Ship`` workflow exists in versions before and after a deploy.

Used by the manifest, deploy-check and rolling-deploy tests, and by the ``akter relay`` /
``akter workflows check`` processes they start (``tests.apps.depot:<variant>``). Every variant
declares an actor type named ``Depot`` with a workflow ``Ship``, built by ``build`` with one
thing changed; ``VARIANTS`` names them, and each has an App of the same name at module level
(its database comes from ``--database-url`` or ``AKTER_DATABASE_URL``).

``before`` — the code executions start under::

    reserve (activity → Reservation)  →  nap (clock, ``order.nap_s``)  →  ship (activity → Label)

An execution started by ``before`` parks in ``nap`` having recorded ``reserve``: what the
refusal tests check a deploy against.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs

import akter


@attrs.frozen
class DepotState:
    started: int = 0


@attrs.frozen
class Order:
    id: str
    qty: int = 1
    nap_s: int = 3600


@attrs.frozen
class OrderWithGift:
    """``Order`` with one more field: another payload schema."""

    id: str
    qty: int = 1
    nap_s: int = 3600
    gift: bool = False


@attrs.frozen
class Reservation:
    order: str
    slot: int


@attrs.frozen
class ReservationWithAisle:
    """``Reservation`` with one more field: another result schema for ``reserve``."""

    order: str
    slot: int
    aisle: str = "A"


@attrs.frozen
class Label:
    order: str
    carrier: str


@attrs.frozen
class LabelWithTracking:
    order: str
    carrier: str
    tracking: str = ""


@attrs.frozen
class Shipped:
    order: str
    slot: int
    carrier: str
    notified: bool = False


@attrs.frozen
class Ping:
    n: int


#: activity calls in this process, keyed "step:order"
CALLS: dict[str, int] = {}


def _count(step: str, order: str) -> None:
    CALLS[f"{step}:{order}"] = CALLS.get(f"{step}:{order}", 0) + 1


def build(
    *,
    reserve_name: str = "reserve",
    nap_kind: str = "clock",
    payload: type[Any] = Order,
    reservation: type[Any] = Reservation,
    label: type[Any] = Label,
    ship: bool = True,
    notify: bool = False,
    carrier: akter.Versions | None = None,
    ship_workflow: bool = True,
    returns_workflow: bool = False,
) -> akter.Actor[DepotState]:
    """A ``Depot`` actor type with ``Ship`` as ``before`` declares it, except as told.

    ``notify`` adds a step ``notify`` after ``ship`` with a version marker ``notify`` (current 1,
    min 0) that chooses it: executions that predate it skip it. ``carrier`` declares a version
    marker ``carrier``: executions that recorded 1 or more ship with a courier, others by post."""
    depot = akter.Actor("Depot", state=DepotState)

    @depot.command
    def ping(turn: akter.Turn[DepotState], cmd: Ping) -> int:
        return cmd.n

    if returns_workflow:
        returns = depot.workflow("Return", input=Order, output=Label)
        collect = returns.activity("collect", success=Label)

        @returns.body
        async def take_back(wf: akter.WorkflowContext, order: Order) -> Label:
            return await collect(lambda: label(order=order.id, carrier="post"))  # type: ignore[no-any-return]

    if not ship_workflow:
        return depot
    versions: dict[str, akter.Versions] = {}
    if notify:
        versions["notify"] = akter.Versions(current=1)
    if carrier is not None:
        versions["carrier"] = carrier
    workflow = depot.workflow("Ship", input=payload, output=Shipped, key=lambda o: o.id, versions=versions)
    reserve_step = workflow.activity(reserve_name, success=reservation)
    nap_clock = workflow.sleep("nap") if nap_kind == "clock" else None
    nap_activity = workflow.activity("nap") if nap_kind == "activity" else None
    ship_step = workflow.activity("ship", success=label) if ship else None
    notify_step = workflow.activity("notify") if notify else None

    def do_reserve(order: Any) -> Any:
        _count("reserve", order.id)
        return reservation(order=order.id, slot=order.qty * 10)

    def do_ship(order: str, how: str) -> Any:
        _count("ship", order)
        return label(order=order, carrier=how)

    def do_notify(order: str) -> None:
        _count("notify", order)

    @workflow.body
    async def run(wf: akter.WorkflowContext, order: Any) -> Shipped:
        booked = await reserve_step(do_reserve, order)
        if nap_clock is not None:
            await nap_clock(timedelta(seconds=order.nap_s))
        if nap_activity is not None:
            await nap_activity(lambda: None)
        how = "courier" if wf.version("carrier") >= 1 else "post"
        shipped = label(order=order.id, carrier=how)
        if ship_step is not None:
            shipped = await ship_step(do_ship, order.id, how)
        notified = False
        if notify_step is not None and wf.version("notify") >= 1:
            await notify_step(do_notify, order.id)
            notified = True
        return Shipped(order=order.id, slot=booked.slot, carrier=shipped.carrier, notified=notified)

    return depot


#: another actor type, for the deploy that drops ``Depot`` altogether
Yard = akter.Actor("Yard", state=DepotState)


@Yard.command
def count(turn: akter.Turn[DepotState], cmd: Ping) -> int:
    return cmd.n


VARIANTS: dict[str, list[akter.Actor[Any]]] = {
    "before": [build()],
    "before_marked": [build(carrier=akter.Versions(current=1))],
    # refused deploys, one reason each
    "no_actor_type": [Yard],
    "no_workflow": [build(ship_workflow=False, returns_workflow=True)],
    "step_removed": [build(ship=False)],
    "step_renamed": [build(reserve_name="book")],
    "kind_changed": [build(nap_kind="activity")],
    "result_changed": [build(reservation=ReservationWithAisle)],
    "payload_changed": [build(payload=OrderWithGift)],
    "marker_dropped": [build()],
    "marker_outside": [build(carrier=akter.Versions(current=3, min=2))],
    "marker_predates": [build(carrier=akter.Versions(current=2, min=1))],
    # refused for several reasons at once
    "reworked": [build(reservation=ReservationWithAisle, carrier=akter.Versions(current=3, min=2))],
    # compatible deploys
    "after": [build(notify=True)],
    "unreached_changed": [build(label=LabelWithTracking)],
    "new_workflow": [build(returns_workflow=True)],
}


def make_app(variant: str, database_url: str | None = None) -> akter.App:
    return akter.App(VARIANTS[variant], database_url=database_url)


before = make_app("before")
before_marked = make_app("before_marked")
no_actor_type = make_app("no_actor_type")
no_workflow = make_app("no_workflow")
step_removed = make_app("step_removed")
step_renamed = make_app("step_renamed")
kind_changed = make_app("kind_changed")
result_changed = make_app("result_changed")
payload_changed = make_app("payload_changed")
marker_dropped = make_app("marker_dropped")
marker_outside = make_app("marker_outside")
marker_predates = make_app("marker_predates")
reworked = make_app("reworked")
after = make_app("after")
unreached_changed = make_app("unreached_changed")
new_workflow = make_app("new_workflow")

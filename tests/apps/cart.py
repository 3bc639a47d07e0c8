"""A cart whose state, events and command payloads exist in versions before and after a deploy.

Used by the actor-manifest tests and by the ``akter workflows check`` / ``akter relay``
processes they start (``tests.apps.cart:<variant>``). Every variant declares an actor type
named ``Cart`` (and a ``Shopper`` that stages ``add`` commands to carts a day ahead, so that
undelivered intents carry ``add``'s payload), built by ``build`` with one thing changed;
``VARIANTS`` names them and each has an App of that name at module level (its database comes
from ``--database-url`` or ``AKTER_DATABASE_URL``).

``before`` stores ``{"items": [...]}`` states and ``Added`` events. Its commands: ``add``
(appends an item, emits ``Added``), ``fill`` (sets the items, emits nothing) and ``show``
(returns the items). Later variants keep the commands and name the field as they declare it.

No ``from __future__ import annotations`` here: the handlers' payload annotations are the types
``build`` was given, evaluated when each handler is defined.
"""

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import attrs

import akter


@attrs.frozen
class Cart:
    """The state as ``before`` stores it."""

    items: tuple[str, ...] = ()


@attrs.frozen
class CartLines:
    """``Cart`` with ``items`` renamed to ``lines`` (with a default)."""

    lines: tuple[str, ...] = ()


@attrs.frozen
class CartLinesRequired:
    """``Cart`` with ``items`` renamed to ``lines``, without a default."""

    lines: tuple[str, ...]


@attrs.frozen
class CartWithNote:
    """``Cart`` with a new field that has a default: a purely additive change."""

    items: tuple[str, ...] = ()
    note: str = ""


@attrs.frozen
class CartCounted:
    """``Cart`` whose ``items`` changed type."""

    items: tuple[int, ...] = ()


@attrs.frozen
class Line:
    sku: str
    qty: int = 1


@attrs.frozen
class CartV3:
    """The end of a chain of upgrades: ``Cart`` → ``CartLines`` → ``CartV3``."""

    lines: tuple[Line, ...] = ()


@attrs.frozen
class Added:
    item: str


@attrs.frozen
class Add:
    item: str


@attrs.frozen
class Fill:
    items: tuple[str, ...]


@attrs.frozen
class Show:
    pass


@attrs.frozen
class Remind:
    cart: str
    item: str


class Changed:
    """Types named as before (events and payloads are stored under their class name) with
    another shape."""

    @attrs.frozen
    class Added:
        item: str
        qty: int

    @attrs.frozen
    class Add:
        item: str
        qty: int


@attrs.frozen
class ShopperState:
    reminded: int = 0


def build(
    state: type[Any] = Cart,
    *,
    read: Callable[[Any], tuple[str, ...]] = lambda s: s.items,
    write: Callable[[Any, tuple[str, ...]], Any] = lambda s, items: attrs.evolve(s, items=items),
    upgrade: akter.Upgrade[Any] | Sequence[akter.Upgrade[Any]] = (),
    initial: Callable[[], Any] | None = None,
    event: type[Any] | None = Added,
    payload: type[Any] = Add,
    checkout: bool = False,
) -> list[akter.Actor[Any]]:
    """``Cart`` and ``Shopper`` as ``before`` declares them, except as told. ``read`` and
    ``write`` get and set the items in ``state``; ``event`` None: ``add`` emits nothing.
    ``checkout`` adds a workflow ``Checkout`` that waits a day for the cart's next event."""
    cart = akter.Actor("Cart", state=state, events=[event] if event else [], initial=initial, upgrade=upgrade)

    @cart.command
    def add(turn: akter.Turn[Any], cmd: payload) -> int:  # type: ignore[valid-type]
        items = (*read(turn.state), cmd.item)
        turn.state = write(turn.state, items)
        if event is not None:
            turn.emit(event(item=cmd.item))
        return len(items)

    @cart.command
    def fill(turn: akter.Turn[Any], cmd: Fill) -> None:
        turn.state = write(turn.state, cmd.items)

    @cart.command
    def show(turn: akter.Turn[Any], cmd: Show) -> list[str]:
        return list(read(turn.state))

    if checkout and event is not None:
        flow = cart.workflow("Checkout", input=Show, output=str)
        added = flow.wait("added", event)

        @flow.body
        async def run(wf: akter.WorkflowContext, order: Show) -> str:
            got = await added(timeout=timedelta(days=1))
            return got.map(lambda e: str(e.item)).value_or("")

    shopper = akter.Actor("Shopper", state=ShopperState)

    @shopper.command
    def remind(turn: akter.Turn[ShopperState], cmd: Remind) -> None:
        turn.send(cmd.cart, add, payload(item=cmd.item), after=timedelta(days=1))
        turn.state = ShopperState(reminded=turn.state.reminded + 1)

    return [cart, shopper]


def _lines(s: Any) -> tuple[str, ...]:
    return tuple(s.lines)


def _set_lines(s: Any, items: tuple[str, ...]) -> Any:
    return attrs.evolve(s, lines=items)


#: the upgrade a rename declares: the old record in, the new one out
TO_LINES = akter.Upgrade(Cart, lambda old: CartLines(lines=old.items))

VARIANTS: dict[str, list[akter.Actor[Any]]] = {
    "before": build(),
    # refused when stored data exists
    "renamed": build(CartLines, read=_lines, write=_set_lines),
    "renamed_required": build(
        CartLinesRequired, read=_lines, write=_set_lines, initial=lambda: CartLinesRequired(lines=())
    ),
    "retyped": build(CartCounted, read=lambda s: tuple(map(str, s.items)), write=lambda s, i: s),
    "event_removed": build(event=None),
    "event_changed": build(event=Changed.Added),
    "payload_changed": build(payload=Changed.Add),
    "waiting": build(checkout=True),
    "waiting_event_changed": build(event=Changed.Added, checkout=True),
    # compatible
    "additive": build(CartWithNote),
    "upgraded": build(CartLines, read=_lines, write=_set_lines, upgrade=TO_LINES),
    "chained": build(
        CartV3,
        read=lambda s: tuple(line.sku for line in s.lines),
        write=lambda s, items: CartV3(lines=tuple(Line(sku=i) for i in items)),
        upgrade=[
            TO_LINES,
            akter.Upgrade(CartLines, lambda old: CartV3(lines=tuple(Line(sku=i) for i in old.lines))),
        ],
    ),
}


def make_app(variant: str, database_url: str | None = None) -> akter.App:
    return akter.App(VARIANTS[variant], database_url=database_url)


before = make_app("before")
renamed = make_app("renamed")
renamed_required = make_app("renamed_required")
retyped = make_app("retyped")
event_removed = make_app("event_removed")
event_changed = make_app("event_changed")
payload_changed = make_app("payload_changed")
waiting = make_app("waiting")
waiting_event_changed = make_app("waiting_event_changed")
additive = make_app("additive")
upgraded = make_app("upgraded")
chained = make_app("chained")

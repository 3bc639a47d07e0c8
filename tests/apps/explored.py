"""Workflows for the crash-point explorer (``akter.testing.explore``).

``Pay`` charges a card through an activity, sleeps, then books the payment in a ``Ledger`` with
a command sent under the attempt's derived id. ``card`` chooses how the charge is made:

* ``"keyed"`` — the charge is recorded by the ledger too, under a derived id: a rerun attempt
  repeats the id and the ledger deduplicates it, so a crash anywhere charges once;
* ``"naive"`` — the charge is an external call with neither a derived id nor an idempotency key
  (appended to ``CHARGES``, a stand-in for a payment provider): a runner that dies after the
  call and before the attempt settles reruns it, and the card is charged twice.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import attrs
from returns.maybe import Nothing

import akter


@attrs.frozen
class Entries:
    texts: tuple[str, ...] = ()


@attrs.frozen
class Entry:
    text: str


@attrs.frozen
class Payment:
    order: str
    card: str = "keyed"


@attrs.frozen
class Paid:
    order: str
    entries: int


Shop = akter.Actor("ExploredShop", state=Entries)
Ledger = akter.Actor("ExploredLedger", state=Entries)

#: the external payment provider's charges, in this process
CHARGES: list[str] = []


@Ledger.command
def book(turn: akter.Turn[Entries], cmd: Entry) -> int:
    turn.state = Entries(texts=(*turn.state.texts, cmd.text))
    return len(turn.state.texts)


Pay = Shop.workflow("Pay", input=Payment, output=Paid)
charge = Pay.activity("charge", success=int)
settle = Pay.sleep("settle")
record = Pay.activity("record", success=int)


async def _book(ledger_id: str, text: str) -> int:
    ledger = akter.activity_context().client.actor(Ledger, ledger_id)
    return int((await ledger.send(book, Entry(text))).unwrap())


async def charge_card(ledger_id: str, payment: Payment) -> int:
    if payment.card == "naive":
        CHARGES.append(payment.order)  # no derived id, no idempotency key: a rerun charges again
        return 0
    return await _book(ledger_id, f"charge {payment.order}")


@Pay.body
async def pay(wf: akter.WorkflowContext, payment: Payment) -> Paid:
    ledger_id = f"ledger-{wf.ref.actor_id}"  # one ledger per shop: runs do not share it
    await charge(charge_card, ledger_id, payment)
    await settle(timedelta(hours=1))
    entries = await record(_book, ledger_id, f"paid {payment.order}")
    return Paid(order=payment.order, entries=entries)


# ---- a ten-step workflow: eight activities, a sleep and a wait that times out -----------------


@attrs.frozen
class Order:
    order: str


@attrs.frozen
class Confirmed:
    order: str


@attrs.frozen
class Shipped:
    order: str
    entries: int
    confirmed: bool


Warehouse = akter.Actor("ExploredWarehouse", state=Entries, events=[Confirmed])
Fulfil = Warehouse.workflow("Fulfil", input=Order, output=Shipped)
#: the activities in the order the body awaits them; each books one ledger entry
FULFIL_ACTIVITIES = ("reserve", "charge", "pick", "pack", "label", "ship", "notify", "invoice")
_fulfil = {name: Fulfil.activity(name, success=int) for name in FULFIL_ACTIVITIES}
cool_off = Fulfil.sleep("cool-off")
confirmation = Fulfil.wait("confirmation", Confirmed)


@Fulfil.body
async def fulfil(wf: akter.WorkflowContext, order: Order) -> Shipped:
    ledger_id = f"ledger-{wf.ref.actor_id}"
    entries = 0
    for i, name in enumerate(FULFIL_ACTIVITIES):
        entries = await _fulfil[name](_book, ledger_id, f"{name} {order.order}")
        if i == 3:
            await cool_off(timedelta(minutes=10))
        if i == 5:  # nobody confirms: the wait ends at its deadline, skipped on the clock
            confirmed = await confirmation(where=lambda e: e.order == order.order, timeout=timedelta(days=1))
    return Shipped(order=order.order, entries=entries, confirmed=confirmed != Nothing)


# ---- a loop over one step, and a race whose losing branch ran an activity ----------------------

Rounds = Shop.workflow("Rounds", input=Payment, output=Paid)
item = Rounds.activity("item", success=int)
first = Rounds.race("first")
early = Rounds.sleep("early")
late = Rounds.sleep("late")
prepare = Rounds.activity("prepare", success=int)
wrap_up = Rounds.activity("wrap-up", success=int)


async def effect(ledger_id: str, payment: Payment, text: str, external: bool) -> int:
    """Book ``text`` in the ledger under the derived id, or — for a ``naive`` card and an
    ``external`` call — call the provider with no key at all."""
    if payment.card == "naive" and external:
        CHARGES.append(text)
        return 0
    return await _book(ledger_id, text)


@Rounds.body
async def rounds(wf: akter.WorkflowContext, payment: Payment) -> Paid:
    ledger_id = f"ledger-{wf.ref.actor_id}"
    for n in (1, 2, 3):  # three occurrences of one step; only the second calls out
        await item(effect, ledger_id, payment, f"item {n}", n == 2)

    async def quick() -> int:
        await early(timedelta(hours=1))
        return await wrap_up(_book, ledger_id, f"wrap-up {payment.order}")

    async def slow() -> int:  # loses the race: its activity ran, its sleep is abandoned
        await prepare(effect, ledger_id, payment, "prepare", True)
        await late(timedelta(hours=2))
        return -1

    entries = await first.run(quick(), slow())
    return Paid(order=payment.order, entries=entries)


# ---- two activities side by side (akter.all) --------------------------------------------------

Split = Shop.workflow("Split", input=Payment, output=Paid)
left = Split.activity("left", success=int)
right = Split.activity("right", success=int)
#: per execution: set once ``left`` made its effect; ``right`` makes its own after that, so the
#: two reach each boundary in one order (a barrier, not a sleep)
LEFT_DONE: dict[str, asyncio.Event] = {}


def _left_done() -> asyncio.Event:
    return LEFT_DONE.setdefault(akter.activity_context().execution_id, asyncio.Event())


async def left_effect(ledger_id: str, payment: Payment) -> int:
    done = await effect(ledger_id, payment, "left", True)
    _left_done().set()
    return done


async def right_effect(ledger_id: str, payment: Payment) -> int:
    await _left_done().wait()
    return await effect(ledger_id, payment, "right", False)


@Split.body
async def split(wf: akter.WorkflowContext, payment: Payment) -> Paid:
    ledger_id = f"ledger-{wf.ref.actor_id}"
    a, b = await akter.all(left(left_effect, ledger_id, payment), right(right_effect, ledger_id, payment))
    return Paid(order=payment.order, entries=a + b)


#: for ``akter relay tests.apps.explored:app`` (the database from AKTER_DATABASE_URL)
app = akter.App([Shop, Ledger, Warehouse])


def make_app(database_url: str) -> akter.App:
    return akter.App([Shop, Ledger, Warehouse], database_url=database_url)

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

from datetime import timedelta

import attrs

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


def make_app(database_url: str) -> akter.App:
    return akter.App([Shop, Ledger], database_url=database_url)

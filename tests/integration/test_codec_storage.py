"""Billing values through real turns, intents and workflows; what a wrong shape does at each door.

A user of an order or billing system keeps ``Decimal`` totals, aware datetimes, ids and unions of
payment methods in state, events, payloads and workflow results: they must come back exactly.
A payload with a field of the wrong type is refused before anything is written, whether it is
sent, started or staged with ``turn.send``; stored state of another shape is a ``CorruptRecord``
and stays byte for byte as it was, never replaced by a default."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.result import Success

import akter
from akter import codec
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet


@attrs.frozen
class Card:
    last4: str


@attrs.frozen
class Transfer:
    iban: str


@attrs.frozen
class Ledger:
    balance: Decimal = Decimal("0.00")
    last_charge: datetime | None = None
    last_invoice: UUID | None = None
    methods: tuple[Card | Transfer, ...] = ()


@attrs.frozen
class Charge:
    invoice: UUID
    amount: Decimal
    at: datetime
    method: Card | Transfer


@attrs.frozen
class Charged:
    invoice: UUID
    amount: Decimal
    method: Card | Transfer


@attrs.frozen
class Forward:
    """Stage a ``charge`` of the value the test put in ``STAGED`` to actor ``to``."""

    to: str


@attrs.frozen
class Receipt:
    invoice: UUID
    total: Decimal
    method: Card | Transfer


Billing = akter.Actor("Billing", state=Ledger, events=[Charged])

#: what ``forward``, ``leave_state`` and ``emit_bad`` put where the test says (set per example)
STAGED: dict[str, Any] = {}


@Billing.command
def charge(turn: akter.Turn[Ledger], cmd: Charge) -> Decimal:
    state = turn.state
    turn.state = attrs.evolve(
        state,
        balance=state.balance + cmd.amount,
        last_charge=cmd.at,
        last_invoice=cmd.invoice,
        methods=(*state.methods, cmd.method),
    )
    turn.emit(Charged(invoice=cmd.invoice, amount=cmd.amount, method=cmd.method))
    return turn.state.balance


@Billing.command
def forward(turn: akter.Turn[Ledger], cmd: Forward) -> None:
    turn.send(cmd.to, charge, STAGED["charge"])


@Billing.command
def start_staged(turn: akter.Turn[Ledger], cmd: Forward) -> None:
    turn.start(Settle, STAGED["charge"])


@Billing.command
def leave_state(turn: akter.Turn[Ledger], cmd: Forward) -> None:
    turn.state = STAGED["state"]


@Billing.command
def emit_bad(turn: akter.Turn[Ledger], cmd: Forward) -> None:
    turn.emit(STAGED["event"])


Settle = Billing.workflow("Settle", input=Charge, output=Receipt)
authorize = Settle.activity("authorize", success=Card | Transfer)


@Settle.body
async def settle(wf: akter.WorkflowContext, order: Charge) -> Receipt:
    method = await authorize(lambda: order.method)
    return Receipt(invoice=order.invoice, total=order.amount * 2, method=method)


INVOICE = UUID("0b7e5f1c-3f5d-4a59-9c53-2f1f0d1f6a10")
AT = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
GOOD = Charge(invoice=INVOICE, amount=Decimal("19.90"), at=AT, method=Transfer("DE89 3704"))
TABLES = ("actor_receipts", "actor_events", "actor_outbox", "actor_state", "actor_workflow_executions")


async def _counts(peek: Peek) -> dict[str, int]:
    return {table: await peek.count(table) for table in TABLES}


@pytest.fixture(autouse=True)
def _staged() -> Any:
    yield
    STAGED.clear()


async def test_billing_values_come_back_exactly_through_turns_and_the_outbox(
    database_url: str, peek: Peek
) -> None:
    app = akter.App([Billing], database_url=database_url)
    STAGED["charge"] = attrs.evolve(GOOD, method=Card("4242"))
    async with app.relay() as relay, app.client(caller=akter.User("ada")) as client:
        ledger = client.actor(Billing, "acct-1", tenant="acme")
        assert await ledger.send(charge, GOOD) == Success(Decimal("19.90"))
        assert await ledger.send(forward, Forward(to="acct-1")) == Success(None)
        await quiet(app, relay)
    stored = await peek.value("SELECT state FROM actor_state WHERE actor_id = 'acct-1'")
    assert codec.decode(stored, Ledger) == Ledger(
        balance=Decimal("39.80"),
        last_charge=AT,
        last_invoice=INVOICE,
        methods=(Transfer("DE89 3704"), Card("4242")),
    )
    events = await peek.rows("SELECT value FROM actor_events WHERE actor_id = 'acct-1' ORDER BY sequence")
    methods = [codec.decode(value, Charged).method for (value,) in events]
    assert methods == [Transfer("DE89 3704"), Card("4242")]


async def test_a_workflow_keeps_decimals_and_a_union_of_records_exact(database_url: str) -> None:
    app = akter.App([Billing], database_url=database_url)
    async with app.relay(), app.client() as client:
        ledger = client.actor(Billing, "acct-2", tenant="acme")
        run = await ledger.start(Settle, GOOD)
        result = await run.result(timeout=60)
    assert result == Success(Receipt(invoice=INVOICE, total=Decimal("39.80"), method=Transfer("DE89 3704")))
    assert str(result.unwrap().total) == "39.80"


@pytest.mark.parametrize(
    "stored",
    [b"[1,2]", b'{"zzz":1}', b'{"balance":19.9}', b'{"balance":"19.90","methods":[{"last4":"1"}]}'],
    ids=["list", "unknown-key", "float-for-decimal", "untagged-union"],
)
async def test_stored_state_of_another_shape_is_a_corrupt_record_and_is_kept(
    database_url: str, peek: Peek, stored: bytes
) -> None:
    app = akter.App([Billing], database_url=database_url)
    async with app.client() as client:
        ledger = client.actor(Billing, "acct-3", tenant="acme")
        await ledger.send(charge, GOOD)
        bad = codec.frame(stored)
        await peek.rows("UPDATE actor_state SET state = %s WHERE actor_id = 'acct-3' RETURNING 1", bad)
        before = await _counts(peek)
        with pytest.raises(akter.CorruptRecord, match="Ledger"):
            await ledger.send(charge, GOOD)
    assert await peek.value("SELECT state FROM actor_state WHERE actor_id = 'acct-3'") == bad
    assert await _counts(peek) == before


# -- wrong types at the door: only akter's errors, and nothing written -----------------------------

#: each Charge field with values of another type (an int for the Decimal would be refused too)
WRONG: dict[str, st.SearchStrategy[Any]] = {
    "invoice": st.text(max_size=8) | st.integers() | st.none(),
    "amount": st.floats()
    | st.integers()
    | st.text(max_size=8)
    | st.decimals().filter(lambda d: not d.is_finite()),
    "at": st.datetimes(timezones=st.none()) | st.text(max_size=8) | st.integers() | st.dates(),
    "method": st.builds(Forward, st.text(max_size=4)) | st.text(max_size=4) | st.none() | st.integers(),
}
wrong_charges = st.sampled_from(sorted(WRONG)).flatmap(
    lambda name: WRONG[name].map(lambda value: attrs.evolve(GOOD, **{name: value}))
)
at_the_door = settings(
    deadline=None, max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
async def billing(database_url: str) -> Any:
    app = akter.App([Billing], database_url=database_url)
    async with app.client() as client:
        yield client.actor(Billing, "door", tenant="acme")


@at_the_door
@given(payload=wrong_charges, how=st.sampled_from(["send", "start", "turn.send", "turn.start"]))
async def test_a_wrong_typed_payload_is_refused_and_nothing_is_written(
    billing: Any, peek: Peek, payload: Charge, how: str
) -> None:
    STAGED["charge"] = payload
    attempts = {
        "send": lambda: billing.send(charge, payload),
        "start": lambda: billing.start(Settle, payload),
        "turn.send": lambda: billing.send(forward, Forward(to="elsewhere")),
        "turn.start": lambda: billing.send(start_staged, Forward(to="door")),
    }
    with pytest.raises(akter.AkterError) as caught:
        await attempts[how]()
    # at the door, the caller's input; inside a handler, the handler's defect
    assert isinstance(caught.value, akter.InvalidInput if how in ("send", "start") else akter.Defect)
    assert await _counts(peek) == dict.fromkeys(TABLES, 0)


@pytest.mark.parametrize(
    ("what", "value"),
    [
        ("state", Ledger(balance=19.9)),  # type: ignore[arg-type]
        ("state", Ledger(last_charge=datetime(2026, 12, 1))),  # naive
        ("state", Ledger(methods=[Card("1")])),  # type: ignore[arg-type]
        ("event", Charged(invoice="x", amount=Decimal(1), method=Card("1"))),  # type: ignore[arg-type]
    ],
    ids=["float-balance", "naive-datetime", "list-for-tuple", "str-for-uuid"],
)
async def test_a_handler_leaving_what_cannot_be_read_back_is_a_defect_and_writes_nothing(
    billing: Any, peek: Peek, what: str, value: Any
) -> None:
    STAGED[what] = value
    with pytest.raises(akter.Defect, match="cannot be stored"):
        await billing.send(leave_state if what == "state" else emit_bad, Forward(to="door"))
    assert await _counts(peek) == dict.fromkeys(TABLES, 0)


async def test_a_refused_payload_names_its_field(billing: Any) -> None:
    with pytest.raises(akter.InvalidInput, match=r"Charge\.amount: expected Decimal, got float 19\.9"):
        await billing.send(charge, attrs.evolve(GOOD, amount=19.9))
    with pytest.raises(akter.InvalidInput, match=r"Charge\.at: datetime .* is naive"):
        await billing.send(charge, attrs.evolve(GOOD, at=AT.replace(tzinfo=None) + timedelta(0)))

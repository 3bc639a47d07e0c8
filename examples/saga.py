"""A booking saga: reserve a flight, reserve a hotel, charge the card — or undo what was done.

Run it with ``python examples/saga.py`` (the embedded PostgreSQL, or ``AKTER_DATABASE_URL``).

A ``Traveller`` actor owns one ``Book`` execution per trip. Each step is an activity, and each
success registers its undo with ``wf.compensate``. When a later step fails with a declared error
(the card is declined), or the execution is interrupted (the traveller cancels while the bank is
down and the charge waits for its next attempt), akter runs the registered undos once, newest
first: the hotel is cancelled before the flight. A charge that fails for a passing reason (the
bank is down) is not a business outcome: it is retried, one minute later, then two, on the
database clock, and the execution holds no memory or thread while it waits.

The travel services are in-memory stand-ins that write what they did to ``desk.ledger``. In a
real app they call an airline, a hotel and a payment provider; each call passes the execution id
as its idempotency key, so a retried attempt (a crash after the provider answered but before the
step was recorded) cannot book or charge twice.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import attrs
from returns.result import Failure, Result, Success

import akter
from akter.workflow.api.declare import ActivityStep

# ---- the services (stand-ins) -----------------------------------------------------------------


@attrs.frozen
class FlightBooking:
    flight: str
    confirmation: str


@attrs.frozen
class HotelBooking:
    hotel: str
    confirmation: str


@attrs.frozen
class Charge:
    card: str
    amount_cents: int
    charge_id: str


@attrs.frozen(auto_exc=True)
class SoldOut(Exception):
    what: str


@attrs.frozen(auto_exc=True)
class CardDeclined(Exception):
    card: str
    reason: str


class BankUnavailable(Exception):
    """A passing failure: not declared, so the activity's retry policy tries again."""


class TravelDesk:
    """An airline, a hotel and a bank in one object. Every call is keyed by an idempotency key:
    the same key returns the first answer instead of booking again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.ledger: list[str] = []
        self.bank_down = False
        self._done: dict[str, object] = {}

    def _once(self, key: str, entry: str, value: object) -> object:
        with self._lock:
            if key not in self._done:
                self._done[key] = value
                self.ledger.append(entry)
            return self._done[key]

    def reserve_flight(self, flight: str, idempotency_key: str) -> FlightBooking:
        if flight.startswith("XX"):
            raise SoldOut(what=f"flight {flight}")
        booking = FlightBooking(flight, confirmation=f"F-{len(self.ledger) + 1:04d}")
        result = self._once(f"{idempotency_key}/flight", f"reserve flight {flight}", booking)
        assert isinstance(result, FlightBooking)
        return result

    def cancel_flight(self, booking: FlightBooking, idempotency_key: str) -> None:
        self._once(f"{idempotency_key}/cancel-flight", f"cancel flight {booking.confirmation}", None)

    def reserve_hotel(self, hotel: str, nights: int, idempotency_key: str) -> HotelBooking:
        booking = HotelBooking(hotel, confirmation=f"H-{len(self.ledger) + 1:04d}")
        result = self._once(f"{idempotency_key}/hotel", f"reserve hotel {hotel} x{nights}", booking)
        assert isinstance(result, HotelBooking)
        return result

    def cancel_hotel(self, booking: HotelBooking, idempotency_key: str) -> None:
        self._once(f"{idempotency_key}/cancel-hotel", f"cancel hotel {booking.confirmation}", None)

    def charge(self, card: str, amount_cents: int, idempotency_key: str) -> Charge:
        if self.bank_down:
            with self._lock:
                self.ledger.append("bank unavailable")
            raise BankUnavailable("the payment provider did not answer")
        if card == "tok_declined":
            raise CardDeclined(card=card, reason="insufficient funds")
        charge = Charge(card, amount_cents, charge_id=f"C-{len(self.ledger) + 1:04d}")
        result = self._once(f"{idempotency_key}/charge", f"charge {amount_cents / 100:.2f} to {card}", charge)
        assert isinstance(result, Charge)
        return result

    def refund(self, charge: Charge, idempotency_key: str) -> None:
        self._once(f"{idempotency_key}/refund", f"refund {charge.charge_id}", None)


desk = TravelDesk()


# ---- the actor and its workflow ---------------------------------------------------------------


@attrs.frozen
class TravellerState:
    """Bookings live in the workflow's record; the traveller needs no state of its own here."""


@attrs.frozen
class TripRequest:
    trip: str
    flight: str
    hotel: str
    nights: int
    card: str  # a payment provider's token, never a card number: no secrets are stored
    amount_cents: int


@attrs.frozen
class Itinerary:
    trip: str
    flight: str
    hotel: str
    charge: str


Traveller = akter.Actor("Traveller", state=TravellerState)

Book = Traveller.workflow(
    "Book", input=TripRequest, output=Itinerary, errors=[SoldOut, CardDeclined], key=lambda trip: trip.trip
)
reserve_flight: ActivityStep[FlightBooking] = Book.activity(
    "reserve-flight", success=FlightBooking, errors=[SoldOut]
)
reserve_hotel: ActivityStep[HotelBooking] = Book.activity(
    "reserve-hotel", success=HotelBooking, errors=[SoldOut]
)
charge_card: ActivityStep[Charge] = Book.activity(
    "charge-card",
    success=Charge,
    errors=[CardDeclined],
    retry=akter.Retry.exponential(timedelta(minutes=1), times=5),
)
cancel_flight: ActivityStep[None] = Book.activity("cancel-flight", retry=akter.Retry(times=10))
cancel_hotel: ActivityStep[None] = Book.activity("cancel-hotel", retry=akter.Retry(times=10))
refund: ActivityStep[None] = Book.activity("refund", retry=akter.Retry(times=10))


@Book.body
async def book(wf: akter.WorkflowContext, trip: TripRequest) -> Itinerary:
    key = wf.execution_id
    flight = await wf.compensate(
        reserve_flight(desk.reserve_flight, trip.flight, key),
        undo=lambda booking: cancel_flight(desk.cancel_flight, booking, key),
    )
    hotel = await wf.compensate(
        reserve_hotel(desk.reserve_hotel, trip.hotel, trip.nights, key),
        undo=lambda booking: cancel_hotel(desk.cancel_hotel, booking, key),
    )
    charge = await wf.compensate(
        charge_card(desk.charge, trip.card, trip.amount_cents, key),
        undo=lambda charge: refund(desk.refund, charge, key),
    )
    return Itinerary(trip.trip, flight.confirmation, hotel.confirmation, charge.charge_id)


def make_app(database_url: str | None = None) -> akter.App:
    """The App; without a URL it uses ``AKTER_DATABASE_URL``, else the embedded PostgreSQL."""
    return akter.App([Traveller], database_url=database_url)


app = make_app()


# ---- running it -------------------------------------------------------------------------------


def trip(name: str, card: str, flight: str = "LH 454") -> TripRequest:
    return TripRequest(name, flight, "Hotel Adlon", nights=3, card=card, amount_cents=129_00)


def describe(result: Result[Itinerary, Exception]) -> str:
    match result:
        case Success(itinerary):
            return f"booked: {itinerary!r}"
        case Failure(error):
            return f"not booked: {error!r}"
    raise AssertionError(result)  # pragma: no cover


async def main(database_url: str | None = None) -> None:
    traveller_id = f"ada-{datetime.now(UTC):%Y%m%d-%H%M%S-%f}"
    runner = make_app(database_url)
    async with runner, runner.relay(), runner.client() as client:
        ada = client.actor(Traveller, traveller_id, tenant="travel")

        print("1. a trip that books:")
        run = await ada.start(Book, trip("berlin", card="tok_visa"))
        print("  ", describe(await run.result(timeout=30)))

        print("2. the card is declined; the hotel, then the flight, are cancelled:")
        run = await ada.start(Book, trip("paris", card="tok_declined"))
        print("  ", describe(await run.result(timeout=30)))

        print("3. the bank is down, the charge waits a minute to retry; the traveller cancels:")
        desk.bank_down = True
        run = await ada.start(Book, trip("rome", card="tok_visa"))
        # A front end polls the run's status like this; the tests use a barrier instead.
        while (await run.poll()).status != "suspended":  # noqa: ASYNC110 -- no in-process event to await
            await asyncio.sleep(0.05)
        await run.interrupt()
        print("  ", describe(await run.result(timeout=30)))

    print("what the services were asked to do:")
    for entry in desk.ledger:
        print("  ", entry)


if __name__ == "__main__":
    asyncio.run(main())

"""An application that writes its own rows and akter's in one transaction (``with_connection``).

``python -m tests.apps.ledger URL ORDER`` opens a transaction on its own psycopg connection,
saves the order in the application's ``app_orders`` table, books it on a ``Ledger`` actor (a
command that emits an event and stages an intent to a ``Counter``) and starts its ``Ship``
workflow, all through that connection, prints ``written`` and SIGKILLs itself before the
commit: what a crash between the application's writes and its commit looks like."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import attrs
import psycopg

import akter
from tests.apps import counter, shop


@attrs.frozen
class Book:
    order: str
    amount: int


@attrs.frozen
class Booked:
    order: str
    amount: int


Ledger = akter.Actor("Ledger", state=counter.CounterState, events=[Booked])


@Ledger.command
def book(turn: akter.Turn[counter.CounterState], cmd: Book) -> int:
    total = turn.state.count + cmd.amount
    turn.state = attrs.evolve(turn.state, count=total)
    turn.emit(Booked(order=cmd.order, amount=cmd.amount))
    turn.send("audit", counter.add, counter.Add(cmd.amount))  # delivered by the relay
    return total


CREATE_TABLE = "CREATE TABLE IF NOT EXISTS app_orders (id text PRIMARY KEY, amount int NOT NULL)"


def make_app(database_url: str) -> akter.App:
    return akter.App([Ledger, counter.Counter, shop.Shop], database_url=database_url)


async def write_and_die(url: str, order: str) -> None:
    app = make_app(url)
    async with app, app.client() as client:
        conn = await psycopg.AsyncConnection.connect(url)
        await conn.execute("INSERT INTO app_orders VALUES (%s, 5)", (order,))
        joined = client.with_connection(conn)
        await joined.actor(Ledger, "l1", tenant="acme").send(book, Book(order=order, amount=5))
        await joined.actor(shop.Shop, "s1", tenant="acme").start(shop.Ship, shop.Order(id=order))
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    asyncio.run(write_and_die(sys.argv[1], sys.argv[2]))

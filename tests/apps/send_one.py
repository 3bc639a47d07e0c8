"""Sends one command in a fresh process: ``python -m tests.apps.send_one URL ACTOR_ID COMMAND_ID AMOUNT``.

Crash tests run it with ``AKTER_FAULTS`` set; it prints the outcome when it survives."""

from __future__ import annotations

import asyncio
import sys

from tests.apps.counter import Add, Counter, add, make_app


async def main(url: str, actor_id: str, command_id: str, amount: int) -> None:
    app = make_app(url)
    async with app.client() as client:
        outcome = await client.actor(Counter, actor_id, tenant="acme").send(
            add, Add(amount), command_id=command_id
        )
    print(outcome)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))

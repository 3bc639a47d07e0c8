"""Two sends in one fresh process: ``python -m tests.apps.send_twice URL FIRST SECOND``. The first
(on actor FIRST) tells the process the database clock; the second, on an actor it never saw and
guesses new, is an optimistic turn — the one a crash test kills (``AKTER_FAULTS=...@SECOND``)."""

from __future__ import annotations

import asyncio
import sys

from tests.apps.counter import Add, Counter, add, make_app


async def main(url: str, first: str, second: str) -> None:
    async with make_app(url).client() as client:
        await client.actor(Counter, first, tenant="acme").send(add, Add(1))
        print(await client.actor(Counter, second, tenant="acme").send(add, Add(5)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))

"""Stages one intent in a fresh process: ``python -m tests.apps.relay_send URL SENDER TARGET``.

Crash tests run it with ``AKTER_FAULTS`` set (the sender dies before its turn commits)."""

from __future__ import annotations

import asyncio
import sys

from tests.apps.relay_app import Sender, Stage, make_app, stage


async def main(url: str, sender_id: str, target: str) -> None:
    async with make_app(url).client() as client:
        print(await client.actor(Sender, sender_id, tenant="acme").send(stage, Stage(target=target)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))

"""``Session``: one engine's hold on its database — the pool, the database clock, the retry window.

Every layer above the store reaches PostgreSQL through a ``Session``: the actor layer's sender
runs turns on its pool, the outbox relay claims and delivers on it, workflow passes fence and
settle on it. It also carries the two facts read from the database at start-up that ids depend
on: the **retry window** (``actor_deployment.retry_window``, how long a command id stays
valid) and an **estimate of the database clock** (``skew_ms``: database clock minus this
process's, refreshed by every statement that returns ``akter_now()``).

It is the process's one estimate: ids are minted on it, optimistic turns run on it
(``akter.actor.drive``), and every turn's load or check corrects it (``observe_clock``). Ids
minted on the estimate may be stale (the clock moved, a test jumped it); the database refuses an
expired id and says what its clock reads, and whoever minted it corrects the estimate and mints
again.

Durable times (timers, deadlines, retry times, due times) are computed on the database clock:
``akter_now()`` inside the statement that writes them, or the clock a turn's load read under the
row lock. One exception, bounded: an optimistic turn runs on this estimate, and the due times
its hooks compute (a delayed send, a recovery timer) come from it. Its first statement
(``akter_turn_check``) refuses the whole turn, before anything is written, unless the estimate
is at most ``BEHIND_MS`` behind and 1 ms ahead of the ``akter_now()`` it reads under the row
lock, so such a time is at most 10 ms early and 1 ms late on the clock a loaded turn would use.

It also holds the engine's one ``Listener`` (``akter.store.listener``): one ``LISTEN`` connection
for every ``run.result()`` waiter and every subscription to an actor's events in the process.

``akter.engine`` builds the session; ``close`` closes the listener, then the pool.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg_pool

from akter.ids import CommandId
from akter.store.listener import Listener

#: how far behind ``akter_now()`` the estimate may be for an optimistic turn (see above)
BEHIND_MS = 10


class Session:
    """The pool, database URL, retry window and database-clock estimate of one engine."""

    def __init__(
        self,
        url: str,
        pool: psycopg_pool.AsyncConnectionPool[Any],
        listener: Listener,
        *,
        retry_window_ms: int,
        skew_ms: int,
    ) -> None:
        self.url = url
        self.pool = pool
        self.listener = listener
        self.retry_window_ms = retry_window_ms
        #: database clock minus local clock, in milliseconds
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        """This process's estimate of the database clock, in epoch milliseconds."""
        return local_ms() + self.skew_ms

    def observe_clock(self, database_now_ms: int) -> None:
        """Correct the estimate from a time the database just reported (``akter_now()``)."""
        self.skew_ms = database_now_ms - local_ms()

    def mint_command_id(self) -> CommandId:
        """A fresh command id, issued now on the estimated database clock."""
        return CommandId.mint(self.now_ms(), self.retry_window_ms)

    async def close(self) -> None:
        await self.listener.close()
        await self.pool.close()


def local_ms() -> int:
    """This process's wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000

"""``Sender``: runs one command as a turn on a session, retrying what a lost connection left unknown.

Everything that sends a command — a client's ``handle.send``, an activity's derived-id send, a
workflow handle's interrupt — goes through the one ``Sender`` of its engine. It knows the declared
actor types (``check_declared``), the turn options (busy timeout, the hooks of the layers above
the kernel) and the ``Session`` it runs on; it knows nothing of relays or workflows.

A lost connection or an exhausted pool is retried with the same command id until
``busy_timeout``: the id makes the retry exactly-once (the turn either committed, and the receipt
answers, or it did not). Past the budget, ``DatabaseUnavailable``. An id this sender minted that
the database finds expired is re-minted once (nothing was written); a caller's own id is never
re-minted, and its ``CommandExpired`` reaches the caller. Every turn's load or check corrects the
session's estimate of the database clock (``drive.py``), as the refusal of an expired id does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import psycopg
import psycopg_pool

from akter.actor.declare import Actor, Command
from akter.actor.drive import run_turn
from akter.actor.kernel import Committed, TurnOptions
from akter.callers import Caller
from akter.errors import CommandExpired, ConfigurationError, DatabaseUnavailable
from akter.ids import ActorRef, CommandId
from akter.store.session import Session
from akter.store.sqlstate import is_connection_lost

log = logging.getLogger("akter")


class Sender:
    """The declared actor types of an engine and the way to run their turns on its session."""

    def __init__(
        self,
        session: Session,
        actors: Mapping[str, Actor[Any]],
        options: TurnOptions,
    ) -> None:
        self.session = session
        self.actors = actors
        self.options = options

    # the session's parts that turn-level callers use on every step
    @property
    def pool(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        return self.session.pool

    @property
    def busy_timeout(self) -> timedelta:
        return self.options.busy_timeout

    def mint_command_id(self) -> CommandId:
        return self.session.mint_command_id()

    def check_declared(self, actor: Actor[Any]) -> None:
        """Refuse an actor type that is not one of this engine's (``ConfigurationError``)."""
        check_declared(self.actors, actor)

    async def send(
        self,
        ref: ActorRef,
        command: Command[Any, Any, Any],
        payload: object,
        command_id: CommandId | None,
        caller: Caller,
    ) -> Committed:
        """Run one turn, retrying lost connections with the same id until ``busy_timeout``."""
        minted = command_id is None
        #: a minted id not sent yet: no receipt can exist, so its turn may be optimistic
        fresh = minted
        cid = command_id or self.session.mint_command_id()
        deadline = time.monotonic() + self.busy_timeout.total_seconds()
        delay = 0.05
        while True:
            try:
                async with self.session.pool.connection() as conn:
                    attempt, fresh = fresh, False
                    record = await run_turn(
                        conn,
                        command,
                        ref,
                        payload,
                        cid,
                        caller,
                        self.options,
                        fresh=attempt,
                        clock=self.session,
                    )
            except CommandExpired as exc:
                self.session.observe_clock(exc.database_now_ms)
                if not minted:
                    raise
                minted = False
                cid = self.session.mint_command_id()
                fresh = True
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                if not (isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc)):
                    raise
                if time.monotonic() + delay > deadline:
                    raise DatabaseUnavailable(
                        f"PostgreSQL stayed unreachable past busy_timeout; {command!r} to {ref} "
                        f"(command id {cid}) may not have committed, send it again with that id: {exc}"
                    ) from exc
                log.warning(
                    "database unreachable (%s); retrying %s in %.2fs",
                    exc,
                    cid,
                    delay,
                    extra={"command_id": str(cid), "actor": str(ref)},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            else:
                return record


def check_declared(actors: Mapping[str, Actor[Any]], actor: object) -> None:
    """Refuse anything that is not one of ``actors`` (``ConfigurationError``, saying what to do)."""
    if not isinstance(actor, Actor):
        raise ConfigurationError(f"client.actor() takes an akter.Actor, got {type(actor).__name__}")
    if actors.get(actor.name) is not actor:
        raise ConfigurationError(f"{actor!r} is not part of this App; pass it to akter.App([...])")

"""One delivery: a claimed outbox row becomes a turn on its target, then is deleted or backed off.

The relay (``relay.py``) claims rows and calls ``deliver`` for each. The row is decoded against
the running App (target actor type, command, payload, stored caller) and run through the kernel's
``run_turn`` with the row's intent id as the command id, so a redelivery — after a crash between
the receiver's commit and our delete — replays the receiver's receipt instead of running the
handler twice. Then:

- the receiver's receipt committed (success or declared failure, new or replayed): the row is
  deleted, but only while our claim token is still on it; a keyed replacement clears the token,
  so a newer body is never deleted by the delivery of an older one. When the handler succeeds,
  the delete travels inside the receiver's turn, with its write (no commit of its own, and no
  redelivery after a crash between the two); otherwise it follows the turn;
- anything else (a defect in the handler, a refusal such as ``CommandExpired`` or ``ActorBusy``,
  an unknown actor type or command, an undecodable or oversized payload): the row backs off
  exponentially with ``last_error`` set — never dropped, never retried in a tight loop, never in
  the way of other rows — until its attempts reach ``max_attempts``; then it is *parked*
  (``parked_reason`` set, due never), where it costs the relay nothing until an operator retries
  or deletes it (``admin.py``). A refusal no retry can cure parks at once: an expired intent id
  (``CommandExpired``), which its receiver refuses for good;
- except that an expired id of a *renewable* command (``Command.renewable``: akter's own
  resumes, schedule fires, deadlines, child starts and interrupts, each idempotent by its
  receiver's state) is renewed instead: the row gets a fresh id, due now, attempts from zero
  (``queries.RENEW``). The receiver refused the old id before running anything, and running the
  handler under the new one does what it would have done, however long the relays were down or
  however far the clock moved (invariant 14). A user's own commands are never renewable: the
  retry window is what lets their receivers deduplicate;
- the connection was lost: the outcome is unknown, so nothing is written; the claim lease runs
  out and the row is claimed again, where the receipt settles what happened.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, LiteralString

import attrs
import psycopg
import psycopg_pool

from akter import faults, telemetry
from akter.actor.declare import Command
from akter.actor.drive import run_turn
from akter.actor.kernel import Committed, UnderLock
from akter.actor.staged import decode_payload
from akter.actor.turn import Turn
from akter.callers import System
from akter.errors import CommandExpired, UndeliverableIntent
from akter.ids import ActorRef, CommandId
from akter.outbox import queries
from akter.outbox.intents import decode_caller
from akter.outbox.settings import RelaySettings
from akter.store.sqlstate import is_connection_lost

if TYPE_CHECKING:
    import uuid

    from akter.actor.sender import Sender

log = logging.getLogger("akter.relay")

MAX_ERROR_CHARS = 2000


@attrs.frozen
class Claimed:
    """An outbox row this relay claimed, with the token that proves the claim is ours."""

    sender: ActorRef
    intent_id: str
    timer_key: str | None
    target_type: str
    target_id: str
    command: str
    payload: bytes
    caller: bytes
    attempts: int
    token: uuid.UUID
    #: the trace the intent was staged in (``akter.telemetry.carrier``), or None
    trace_context: str | None = None
    #: how long it had been due when claimed (ms, database clock): the start of its lag
    late_ms: int | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...], token: uuid.UUID) -> Claimed:
        (
            _rk,
            tenant,
            actor_type,
            actor_id,
            intent_id,
            key,
            ttype,
            tid,
            command,
            payload,
            caller,
            attempts,
            trace,
            late_ms,
        ) = row
        return cls(
            sender=ActorRef(tenant=tenant, actor_type=actor_type, actor_id=actor_id),
            intent_id=intent_id,
            timer_key=key,
            target_type=ttype,
            target_id=tid,
            command=command,
            payload=bytes(payload),
            caller=bytes(caller),
            attempts=attempts,
            token=token,
            trace_context=trace,
            late_ms=late_ms,
        )

    def claim_params(self) -> dict[str, Any]:
        return {**self.sender.key_params(), "intent_id": self.intent_id, "token": self.token}

    def describe(self) -> str:
        return (
            f"intent={self.intent_id} sender={self.sender} target={self.sender.tenant}/{self.target_type}/"
            f"{self.target_id} command={self.command} attempts={self.attempts}"
        )


def _decode(
    sender: Sender, row: Claimed
) -> tuple[Command[Any, Any, Any], ActorRef, object, System, CommandId]:
    actor = sender.actors.get(row.target_type)
    if actor is None:
        raise UndeliverableIntent(f"this App declares no actor type {row.target_type!r}")
    command = actor.commands.get(row.command)
    if command is None:
        raise UndeliverableIntent(f"{actor.name} declares no command {row.command!r}")
    ref = ActorRef(tenant=row.sender.tenant, actor_type=actor.name, actor_id=row.target_id)
    payload = decode_payload(row.payload, command.input)
    return command, ref, payload, decode_caller(row.caller), CommandId.parse(row.intent_id)


class Acknowledger:
    """Deletes delivered rows in batches: whoever finds no delete running sends one statement for
    every row acknowledged meanwhile, so concurrent deliveries share one commit instead of paying
    one each. A lone delivery is deleted at once; nothing waits for a batch to fill."""

    def __init__(self, sender: Sender) -> None:
        self._sender = sender
        self._lock = asyncio.Lock()
        self._pending: list[tuple[Claimed, asyncio.Future[None]]] = []

    async def ack(self, row: Claimed) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((row, done))
        async with self._lock:
            if done.done():
                return  # an earlier holder of the lock deleted it with its batch
            batch, self._pending = self._pending, []
            rows = [r for r, _ in batch]
            params = {
                "rks": [r.sender.routing_key for r in rows],
                "tenants": [r.sender.tenant for r in rows],
                "types": [r.sender.actor_type for r in rows],
                "ids": [r.sender.actor_id for r in rows],
                "intents": [r.intent_id for r in rows],
                "tokens": [r.token for r in rows],
            }
            try:
                async with self._sender.pool.connection() as conn:
                    await conn.execute(queries.ACK, params, prepare=True)
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                # Left claimed: after the lease they are delivered again and the receipts replay.
                log.warning(
                    "could not delete %d delivered rows error=%s; retried after the claim lease",
                    len(rows),
                    exc,
                )
            for _, waiter in batch:
                waiter.set_result(None)


class _DeleteInTurn:
    """A turn hook for one delivery: the delivered row is deleted in the receiver's own turn, in
    the round trip of its write, so a delivery costs no commit of its own. Hooks run only for a
    turn whose handler succeeded: a declared failure or a replayed receipt is acknowledged
    after the turn, as before."""

    def __init__(self, row: Claimed) -> None:
        self.row = row
        self.deleted = False

    async def before_commit(self, db: UnderLock, turn: Turn[Any], record: Committed) -> None:
        record.with_write(queries.ACK_IN_TURN, self.row.claim_params(), self._done)

    def _done(self, _: tuple[Any, ...] | None) -> None:
        self.deleted = True

    def after_commit(self, record: Committed) -> None:
        """Nothing: the row went with the turn."""


@telemetry.traced_delivery
async def deliver(sender: Sender, settings: RelaySettings, row: Claimed, acks: Acknowledger) -> bool:
    """Deliver one claimed row; True when the receiver's receipt committed and the row is done."""
    ids = (row.target_id, row.sender.actor_id, row.intent_id)
    command: Command[Any, Any, Any] | None = None
    try:
        await faults.hit("relay.after_claim", *ids)
        command, ref, payload, caller, command_id = _decode(sender, row)
        await faults.hit("relay.before_delivery", *ids)
        in_turn = _DeleteInTurn(row)
        options = attrs.evolve(sender.options, hooks=(*sender.options.hooks, in_turn), guess_new=False)
        async with sender.pool.connection() as conn:
            # a first delivery's id has never reached the receiver, so its turn may be
            # optimistic; a redelivery may find its receipt, which it replays without the handler
            fresh = row.attempts == 1
            record = await run_turn(
                conn, command, ref, payload, command_id, caller, options, fresh=fresh, clock=sender.session
            )
        await faults.hit("relay.before_delete", *ids)
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        if isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc):
            log.warning(
                "delivery interrupted %s error=%s; retried after the claim lease", row.describe(), exc
            )
            return False
        await _failed(sender, settings, row, exc, command)
        return False
    except Exception as exc:
        await _failed(sender, settings, row, exc, command)
        return False
    if not in_turn.deleted:
        await acks.ack(row)
    log.debug("delivered %s replayed=%s", row.describe(), record.replayed)
    return True


def renews(command: Command[Any, Any, Any] | None, exc: Exception) -> bool:
    """Whether this failure is an expired id of a command safe to deliver under a fresh one."""
    return isinstance(exc, CommandExpired) and command is not None and command.renewable


def park_reason(settings: RelaySettings, row: Claimed, exc: Exception) -> str | None:
    """Why the relay gives up on ``row`` after this failure, or ``None`` to back off and retry
    (a renewable command's expired id is renewed before this is asked: ``renews``).

    Only an expired id is hopeless at once. An unknown actor type or command, or a payload that
    does not decode or is over the cap, may be one deploy away from deliverable — in a rolling
    deploy an old relay meets intents that only the new code declares — so those spend their
    attempts like any failure."""
    if isinstance(exc, CommandExpired):
        return "its intent id expired, so its receiver refuses it for good"
    if row.attempts >= settings.max_attempts:
        return f"undeliverable after {row.attempts} attempts"
    return None


async def _failed(
    sender: Sender,
    settings: RelaySettings,
    row: Claimed,
    exc: Exception,
    command: Command[Any, Any, Any] | None,
) -> None:
    error = " ".join(f"{type(exc).__name__}: {exc}".split())[:MAX_ERROR_CHARS]
    if renews(command, exc):
        log.warning("delivery renewed %s: its id expired before delivery error=%s", row.describe(), error)
        renewed = f"renewed under a fresh id after {error}"[:MAX_ERROR_CHARS]
        await _finish(sender, queries.RENEW, {**row.claim_params(), "error": renewed}, row)
        return
    reason = park_reason(settings, row, exc)
    if reason is not None:
        # needs an operator: akter outbox retry|delete (docs/relay.md, "Parked intents")
        log.error("delivery parked %s reason=%s error=%s", row.describe(), reason, error)
        params = {**row.claim_params(), "error": error, "reason": f"{reason}; last error {error}"}
        await _finish(sender, queries.PARK, params, row)
        return
    delay_ms = settings.backoff_ms(row.attempts)
    log.warning("delivery failed %s retry_in_ms=%d error=%s", row.describe(), delay_ms, error)
    await _finish(sender, queries.BACK_OFF, {**row.claim_params(), "delay_ms": delay_ms, "error": error}, row)


async def _finish(sender: Sender, sql: LiteralString, params: dict[str, Any], row: Claimed) -> None:
    try:
        async with sender.pool.connection() as conn:
            await conn.execute(sql, params, prepare=True)
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        # Left claimed: after the lease the row is delivered again and the receipt replays.
        log.warning("could not settle %s error=%s; retried after the claim lease", row.describe(), exc)

"""The relay: claims due outbox rows of the buckets this process owns and delivers them as turns.

One ``Relay`` runs four kinds of task on one event loop:

- the *ownership* loop heartbeats and renews bucket leases (``ownership.py``) on a connection of
  its own, so deliveries filling the pool never starve it;
- the *listener* holds a connection in ``LISTEN akter_outbox`` / ``LISTEN akter_wake`` (never
  inside a transaction) and wakes the dispatcher when a commit made a row of an owned bucket due
  now, or when a test moved the durable clock;
- the *dispatcher* claims due rows in bounded batches (``queries.CLAIM``: ``FOR UPDATE SKIP
  LOCKED``, due time pushed forward by the delivery lease, attempt counted) and starts one
  delivery per row, at most ``concurrency`` at a time; between passes it sleeps until woken, until
  the next row falls due (the claim reports rows due within the poll interval), or for
  ``poll_interval``, whichever comes first;
- each *delivery* (``delivery.py``) runs the row as a turn on the target with the intent id as
  its command id, then deletes the row if the claim is still ours, or backs it off.

``akter relay APP`` (``akter.cli``) and ``App.relay()`` run this same class. The workflow layer
plugs in through ``RelayPlugin``: a plugin runs beside the relay and reads ``relay.owned()``;
a workflow resume is an internal command delivered like any other intent.

A lost database is an ordinary event (invariant 12): every loop logs, backs off and reconnects;
nothing here exits because PostgreSQL went away.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import psycopg
import psycopg_pool

from akter.errors import ConfigurationError
from akter.outbox import queries
from akter.outbox.delivery import Acknowledger, Claimed, deliver
from akter.outbox.ownership import Ownership
from akter.store.pool import connection_kwargs

if TYPE_CHECKING:
    from akter.app import Runtime

log = logging.getLogger("akter.relay")

_RECHECK = 0.01


@attrs.frozen
class RelaySettings:
    """How a relay behaves. The defaults suit production; tests shorten the leases.

    ``concurrency``: deliveries in flight at once (each holds a pooled connection while it runs).
    ``batch_size``: rows claimed per statement at most. ``poll_interval``: the longest sleep
    between scans when no notification arrives. ``claim_lease``: how far a claim pushes a row's due
    time (a dead relay's claimed rows are retried after it). ``heartbeat`` / ``ownership_lease``:
    see ``ownership.py``. ``backoff_base`` / ``backoff_cap``: a failed delivery is retried after
    ``min(base * 2 ** (attempts - 1), cap)``. ``max_attempts``: a row whose delivery failed this
    many times is parked for an operator instead of retried (10 attempts take about 8.5 minutes
    of back-off with the defaults); see ``delivery.park_reason``."""

    concurrency: int = 8
    batch_size: int = 64
    poll_interval: timedelta = timedelta(seconds=1)
    claim_lease: timedelta = timedelta(seconds=30)
    heartbeat: timedelta = timedelta(seconds=1)
    ownership_lease: timedelta = timedelta(seconds=4)
    backoff_base: timedelta = timedelta(seconds=1)
    backoff_cap: timedelta = timedelta(minutes=5)
    max_attempts: int = 10
    #: listen for notifications; off only to measure polling
    notifications: bool = True

    def __attrs_post_init__(self) -> None:
        problems = []
        if self.concurrency < 1 or self.batch_size < 1 or self.max_attempts < 1:
            problems.append("concurrency, batch_size and max_attempts must be at least 1")
        durations = (
            "poll_interval",
            "claim_lease",
            "heartbeat",
            "ownership_lease",
            "backoff_base",
            "backoff_cap",
        )
        problems.extend(
            f"{name} must be positive" for name in durations if getattr(self, name) <= timedelta(0)
        )
        if self.heartbeat * 2 >= self.ownership_lease:
            problems.append("heartbeat must be under half the ownership_lease, or leases lapse between beats")
        if problems:
            raise ConfigurationError("; ".join(problems))

    def backoff_ms(self, attempts: int) -> int:
        base = self.backoff_base // timedelta(milliseconds=1)
        cap = self.backoff_cap // timedelta(milliseconds=1)
        return int(min(base * 2 ** min(max(attempts - 1, 0), 40), cap))


class RelayPlugin(Protocol):
    """Work that runs beside a relay for as long as it runs (the workflow passes, later)."""

    async def run(self, relay: Relay) -> None:
        """Run until cancelled; read ``relay.owned()`` for the buckets this process owns."""


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


def new_member_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Relay:
    """Delivers due intents of the owned buckets. ``start()``, then ``stop()`` to drain."""

    def __init__(
        self,
        runtime: Runtime,
        settings: RelaySettings | None = None,
        *,
        member: str | None = None,
        plugins: Sequence[RelayPlugin] = (),
    ) -> None:
        self.runtime = runtime
        self.settings = settings or RelaySettings()
        self.member = member or new_member_id()
        self.ownership = Ownership(self.member, _ms(self.settings.ownership_lease))
        self._plugins = tuple(plugins)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._owned_once = asyncio.Event()
        self._progress = asyncio.Condition()
        self._in_flight: set[asyncio.Task[None]] = set()
        #: claimed rows not yet started: the next claim is made before the workers run dry
        self._queue: collections.deque[Claimed] = collections.deque()
        self._acks = Acknowledger(runtime)
        self._rng = random.Random()
        self._tasks: list[asyncio.Task[None]] = []
        self._passes_started = 0
        self._last_quiet_pass = 0
        self._failure: BaseException | None = None
        #: deliveries this relay finished (acknowledged or backed off), for logs and benchmarks
        self.delivered = 0
        self.failed = 0

    # --- public ---

    async def start(self) -> None:
        log.info(
            "relay starting member=%s concurrency=%d poll_interval=%s",
            self.member,
            self.settings.concurrency,
            self.settings.poll_interval,
        )
        spawn = self._spawn
        spawn("ownership", self._ownership_loop)
        if self.settings.notifications:
            spawn("listener", self._listen_loop)
        spawn("dispatcher", self._dispatch_loop)
        for plugin in self._plugins:
            spawn(f"plugin {type(plugin).__name__}", lambda p=plugin: p.run(self))  # type: ignore[misc]

    def owned(self) -> frozenset[int]:
        """The buckets this process may deliver in (and, later, run workflows of) right now."""
        return self.ownership.current()

    def wake(self) -> None:
        """Scan for due rows now instead of at the next poll."""
        self._wake.set()

    async def idle(self) -> None:
        """Return when nothing in the owned buckets is due now, no delivery is in flight and no
        plugin (a workflow pass) is still running.

        Starts a fresh scan first, so anything committed before this call is seen. A row that
        failed and backs off is not due now; a timer in the future is not due now. Bound the wait
        with ``asyncio.timeout`` where a test needs a deadline."""
        while True:
            await self._idle()
            # plugins (the workflow runner) may still be running passes that will make rows due
            busy = [p for p in self._plugins if not getattr(p, "quiet", lambda: True)()]
            if not busy:
                return
            for plugin in busy:
                await plugin.idle()  # type: ignore[attr-defined]

    async def stop(self) -> None:
        """Drain: stop claiming, let deliveries in flight finish, release the buckets, close."""
        if self._stopping.is_set():
            return
        log.info("relay draining member=%s in_flight=%d", self.member, len(self._in_flight))
        self._stopping.set()
        self._wake.set()
        dispatcher = [t for t in self._tasks if t.get_name() == "dispatcher"]
        await asyncio.gather(*dispatcher, return_exceptions=True)
        # rows claimed but not started are delivered too: they are ours until the claim lease ends
        while self._queue or self._in_flight:
            self._pump()
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._leave()
        log.info("relay stopped member=%s delivered=%d failed=%d", self.member, self.delivered, self.failed)

    async def wait(self) -> None:
        """Wait until ``stop()`` is called; raise if one of the relay's loops failed."""
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait([stopping, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if self._failure is not None:
            raise self._failure

    # --- loops ---

    def _spawn(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        async def guarded() -> None:
            try:
                await loop()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                # A bug, not an outage (outages are handled inside each loop): surface it.
                log.exception("relay loop %s failed member=%s", name, self.member)
                self._failure = exc
                self._stopping.set()
                raise

        self._tasks.append(asyncio.create_task(guarded(), name=name))

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        kwargs = connection_kwargs(self.runtime.url, name="akter-relay")
        return await psycopg.AsyncConnection.connect(self.runtime.url, **kwargs)

    async def _ownership_loop(self) -> None:
        conn: psycopg.AsyncConnection[Any] | None = None
        beat = self.settings.heartbeat.total_seconds()
        retry = _Backoff()
        try:
            while not self._stopping.is_set():
                try:
                    if conn is None or conn.closed:
                        conn = await self._connect()
                    before = self.ownership.owned
                    owned = await self.ownership.tick(conn)
                    retry.reset()
                    self._owned_once.set()
                    if owned - before:
                        self.wake()
                    delay = beat
                except psycopg.OperationalError as exc:
                    log.warning("ownership heartbeat failed member=%s error=%s", self.member, _one_line(exc))
                    await _close(conn)
                    conn = None
                    delay = min(beat, retry.next())
                await _sleep_unless(self._stopping, delay)
        finally:
            # also when cancelled mid-heartbeat by stop(): never leave the session to the GC
            await _close(conn)

    async def _leave(self) -> None:
        try:
            conn = await self._connect()
            async with conn:
                await self.ownership.leave(conn)
        except psycopg.OperationalError as exc:
            # The leases simply expire; survivors take over after the lease instead of at once.
            log.warning("could not release buckets member=%s error=%s", self.member, _one_line(exc))

    async def _listen_loop(self) -> None:
        retry = _Backoff()
        while not self._stopping.is_set():
            try:
                conn = await self._connect()
                async with conn:
                    await conn.execute(f"LISTEN {queries.CHANNEL}")
                    await conn.execute(f"LISTEN {queries.WAKE_CHANNEL}")
                    retry.reset()
                    # Notifications sent while we were not listening are lost: scan once.
                    self.wake()
                    async for note in conn.notifies():
                        if note.channel == queries.WAKE_CHANNEL or self._is_owned(note.payload):
                            self.wake()
            except psycopg.OperationalError as exc:
                log.warning("notification listener lost member=%s error=%s", self.member, _one_line(exc))
                await _sleep_unless(self._stopping, retry.next())

    def _is_owned(self, payload: str) -> bool:
        try:
            return int(payload) in self.owned()
        except ValueError:
            return True

    async def _dispatch_loop(self) -> None:
        await _wait_first(self._owned_once, self._stopping)
        retry = _Backoff()
        settings = self.settings
        while not self._stopping.is_set():
            self._wake.clear()
            self._passes_started += 1
            this_pass = self._passes_started
            # Claim when fewer rows wait than there are workers, up to a batch ahead: the claim
            # (an index descent per owned bucket) is paid once per batch, not once per delivery.
            want = settings.batch_size - len(self._queue) if len(self._queue) < settings.concurrency else 0
            # only a relay with nothing to do asks when the next row falls due
            probe = not self._queue and not self._in_flight
            sleep = settings.poll_interval.total_seconds()
            try:
                claimed, next_due = await self._claim(want, probe) if want > 0 else ([], None)
                self._queue.extend(claimed)
                self._pump()
                if want > 0 and len(claimed) == want:
                    continue  # more may be due: claim again at once
                if next_due is not None:
                    # A row falls due within the poll interval: sleep until then.
                    sleep = min(sleep, max(next_due / 1000, _RECHECK))
                if probe and not claimed and (next_due is None or next_due > 0):
                    await self._mark_quiet(this_pass)
                retry.reset()
            except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
                log.warning("claim failed member=%s error=%s", self.member, _one_line(exc))
                sleep = retry.next()
            await _wait_any(self._wake, self._stopping, sleep)

    async def _claim(self, limit: int, probe: bool) -> tuple[list[Claimed], int | None]:
        """Claim up to ``limit`` due rows; with ``probe``, also the ms until the next row falls
        due within the poll interval (None: none does)."""
        owned = sorted(self.owned())
        if not owned:
            return [], None
        start = self._rng.randrange(len(owned))
        token = uuid.uuid4()
        params = {
            "head": owned[start:],
            "tail": owned[:start],
            "limit": limit,
            "probe": probe,
            "horizon_ms": _ms(self.settings.poll_interval),
            "lease_ms": _ms(self.settings.claim_lease),
            "token": token,
            "member": self.member,
        }
        async with self.runtime.pool.connection() as conn:
            rows = await (await conn.execute(queries.CLAIM, params, prepare=True)).fetchall()
        next_due = rows[0][0] if rows else None
        claimed = [Claimed.from_row(row[1:], token) for row in rows if row[1] is not None]
        return claimed, None if next_due is None else int(next_due)

    def _pump(self) -> None:
        while self._queue and len(self._in_flight) < self.settings.concurrency:
            self._start_delivery(self._queue.popleft())

    def _start_delivery(self, row: Claimed) -> None:
        task = asyncio.create_task(self._deliver(row), name=f"deliver {row.intent_id}")
        self._in_flight.add(task)
        task.add_done_callback(self._delivery_done)

    async def _deliver(self, row: Claimed) -> None:
        ok = await deliver(self.runtime, self.settings, row, self._acks)
        if ok:
            self.delivered += 1
        else:
            self.failed += 1

    def _delivery_done(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("delivery task failed member=%s", self.member, exc_info=task.exception())
        self._pump()
        # the delivered turn may have staged more due rows, and the queue may run low
        self.wake()

    async def _mark_quiet(self, this_pass: int) -> None:
        async with self._progress:
            self._last_quiet_pass = this_pass
            self._progress.notify_all()

    async def _idle(self) -> None:
        await _wait_first(self._owned_once, self._stopping)
        need = self._passes_started + 1
        self.wake()
        async with self._progress:
            await self._progress.wait_for(lambda: self._last_quiet_pass >= need or self._stopping.is_set())
        if self._failure is not None:
            raise self._failure


class _Backoff:
    """Reconnect delays: 50 ms doubling to 5 s, with the jitter left out for readable logs."""

    def __init__(self) -> None:
        self.delay = 0.05

    def next(self) -> float:
        current, self.delay = self.delay, min(self.delay * 2, 5.0)
        return current

    def reset(self) -> None:
        self.delay = 0.05


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


async def _close(conn: psycopg.AsyncConnection[Any] | None) -> None:
    if conn is not None and not conn.closed:
        with contextlib.suppress(psycopg.Error):
            await conn.close()


async def _wait_any(event: asyncio.Event, stop: asyncio.Event, seconds: float | None) -> None:
    if event.is_set() or stop.is_set():
        return
    waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


async def _wait_first(event: asyncio.Event, stop: asyncio.Event) -> None:
    await _wait_any(event, stop, None)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    if stop.is_set():
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)

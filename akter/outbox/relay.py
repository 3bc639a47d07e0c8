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

It also runs *retention* for its owned buckets: expired receipts are deleted in bounded batches
(``retention.py``), so an App without workflows prunes them too.

Stopping is a *drain* (``stop()``): the dispatcher claims nothing more; the deliveries in flight
and the rows already claimed are delivered; plugins that can drain (``DrainingPlugin``: the
workflow runner) start nothing new, let what runs finish and record it, and hand their work on.
Meanwhile this process leaves the member set, so the others take every bucket it releases, and
it keeps (renews) only the buckets its remaining work needs (``Ownership.hold``), releasing each
as that work ends. ``drain_timeout`` bounds the drain, and ``force()`` cuts it short; what is
still running then is abandoned, as after a crash, and recovered by its leases.

A lost database is an ordinary event (invariant 12), and so is a lock or statement timeout: every
background statement goes through ``akter.store.background.persist``, which classifies the error
once (``akter.store.sqlstate.classify``), logs it (a bug with its traceback) and backs off with
jittered, capped waits; nothing here ends the process. A loop that fails anyway (a bug outside a
statement, in a plugin) is *failed*, which is not the same as *stop requested*: ``wait()`` and
``idle()`` raise it, and ``stop()`` still drains, cancels every task, releases the buckets and
closes its connections. ``stop()`` may be called any number of times.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import psycopg

from akter.outbox import queries, retention
from akter.outbox.delivery import Acknowledger, Claimed, deliver
from akter.outbox.ownership import Ownership
from akter.outbox.settings import RelaySettings as RelaySettings  # noqa: PLC0414 -- re-exported: akter, the app and the cli import it from the relay
from akter.store import connections
from akter.store.background import one_line, persist

if TYPE_CHECKING:
    from akter.actor.sender import Sender

log = logging.getLogger("akter.relay")

_RECHECK = 0.01

T = TypeVar("T")


class RelayPlugin(Protocol):
    """Work that runs beside a relay for as long as it runs (the workflow passes, later)."""

    async def run(self, relay: Relay) -> None:
        """Run until cancelled; read ``relay.owned()`` for the buckets this process owns."""


@runtime_checkable
class DrainingPlugin(RelayPlugin, Protocol):
    """A plugin whose work in flight a drain lets finish (the workflow runner): the relay calls
    ``drain()`` when ``stop()`` begins, keeps the buckets ``holding()`` names while
    ``drained()`` has not returned, and cancels ``run`` after it (or after the drain timeout)."""

    def drain(self) -> None:
        """Start nothing new; let what runs finish, record it and hand it on."""

    async def drained(self) -> None:
        """Return once nothing this plugin started is running any more."""

    def holding(self) -> frozenset[int]:
        """The buckets the work still running needs this process to keep owning."""

    def in_flight(self) -> dict[str, int]:
        """What runs now, counted by kind (``passes``, ``attempts``), for the relay's logs."""


def _ms(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


def new_member_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Relay:
    """Delivers due intents of the owned buckets. ``start()``, then ``stop()`` to drain."""

    def __init__(
        self,
        sender: Sender,
        settings: RelaySettings | None = None,
        *,
        member: str | None = None,
        plugins: Sequence[RelayPlugin] = (),
    ) -> None:
        self.sender = sender
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
        self._acks = Acknowledger(sender)
        self._rng = random.Random()
        self._tasks: list[asyncio.Task[None]] = []
        self._passes_started = 0
        self._last_quiet_pass = 0
        #: the first loop that failed (a bug): distinct from a stop request
        self._failure: BaseException | None = None
        self._failed = asyncio.Event()
        self._stop_lock = asyncio.Lock()
        self._stopped = False
        #: ``force()``: the drain ends now, abandoning what still runs
        self._forced = asyncio.Event()
        #: cuts the ownership loop's sleep short (a drain releases the idle buckets at once)
        self._beat = asyncio.Event()
        #: the drain ended before everything in flight finished (timed out or forced)
        self.abandoned = False
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
        spawn("retention", self._retention_loop)
        for plugin in self._plugins:
            spawn(f"plugin {type(plugin).__name__}", lambda p=plugin: p.run(self))  # type: ignore[misc]
        # Back only once its member row is written, so a look for live relays right after
        # (the explorer's, an operator's) sees this one. Bounded: a database gone at this moment
        # is an ordinary event, and the heartbeat goes on trying in the background.
        await _wait_any(self._owned_once, self._failed, self.settings.ownership_lease.total_seconds())

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

    def in_flight(self) -> dict[str, int]:
        """What this relay runs now: ``deliveries`` (claimed rows included), and what its
        draining plugins count (the workflow runner: ``passes`` and activity ``attempts``)."""
        counts = {"deliveries": len(self._in_flight) + len(self._queue)}
        for plugin in self._draining_plugins():
            for kind, n in plugin.in_flight().items():
                counts[kind] = counts.get(kind, 0) + n
        return counts

    async def stop(self) -> None:
        """Drain: stop claiming, let deliveries, passes and attempts in flight finish (at most
        ``drain_timeout``, or until ``force()``), then cancel every task, release the buckets
        and close the relay's connections — also after a loop failed. Calling it again (or
        concurrently) waits for the first call and does nothing more."""
        async with self._stop_lock:
            if self._stopped:
                return
            try:
                await self._drain()
            finally:
                # also when the drain is cancelled: nothing may outlive the relay
                await self._finish()
                self._stopped = True
        log.info("relay stopped member=%s delivered=%d failed=%d", self.member, self.delivered, self.failed)

    def force(self) -> None:
        """End a drain now (a second SIGTERM): what still runs is abandoned, as after a crash,
        and its leases recover it; ``stop()`` then releases the buckets and returns."""
        self._forced.set()

    def _draining_plugins(self) -> list[DrainingPlugin]:
        return [p for p in self._plugins if isinstance(p, DrainingPlugin)]

    def _holding(self) -> frozenset[int]:
        """The buckets a drain keeps: those the plugins' remaining work needs."""
        return frozenset().union(*(p.holding() for p in self._draining_plugins()))

    async def _drain(self) -> None:
        counts = self.in_flight()
        log.info(
            "relay draining member=%s in_flight=%d %s drain_timeout=%s failed=%s",
            self.member,
            counts["deliveries"] + counts.get("passes", 0),
            " ".join(f"{kind}={n}" for kind, n in counts.items()),
            self.settings.drain_timeout,
            self._failure is not None,
        )
        self._stopping.set()
        self._wake.set()
        for plugin in self._draining_plugins():
            plugin.drain()
        self._beat.set()  # leave the member set and release the idle buckets now
        async with self._progress:
            self._progress.notify_all()
        settled = asyncio.ensure_future(self._settle())
        forced = asyncio.ensure_future(self._forced.wait())
        try:
            await asyncio.wait(
                [settled, forced],
                timeout=self.settings.drain_timeout.total_seconds(),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            forced.cancel()
            if not settled.done():
                settled.cancel()
                await asyncio.gather(settled, return_exceptions=True)
                self.abandoned = True
            elif not settled.cancelled() and (error := settled.exception()) is not None:
                log.error("relay drain failed member=%s", self.member, exc_info=error)
        if self.abandoned:
            left = self.in_flight()
            log.warning(
                "relay drain %s member=%s abandoned %s; they are recovered by their leases",
                "forced" if self._forced.is_set() else f"timed out after {self.settings.drain_timeout}",
                self.member,
                " ".join(f"{kind}={n}" for kind, n in left.items()),
            )

    async def _settle(self) -> None:
        """What a drain waits for: the dispatcher's end, every claimed row delivered, then the
        draining plugins (a delivered resume may hand them one more execution to hand on)."""
        dispatcher = [t for t in self._tasks if t.get_name() == "dispatcher"]
        await asyncio.gather(*dispatcher, return_exceptions=True)
        # rows claimed but not started are delivered too: they are ours until the claim lease ends
        while self._queue or self._in_flight:
            self._pump()
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        for plugin in self._draining_plugins():
            await plugin.drained()

    async def _finish(self) -> None:
        self._stopping.set()
        self._queue.clear()
        tasks = [*self._tasks, *self._in_flight]
        for task in tasks:
            task.cancel()
        # each loop closes its own connection as it unwinds
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._leave()

    async def wait(self) -> None:
        """Wait until ``stop()`` is called or one of the relay's loops failed; raise the
        failure. Returning (or raising) does not stop the relay: call ``stop()``."""
        await _wait_first(self._stopping, self._failed)
        if self._failure is not None:
            raise self._failure

    # --- loops ---

    def _spawn(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        async def guarded() -> None:
            try:
                await loop()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # A bug outside any statement (statements back off in ``persist``): surface it
                # through wait() and idle(); stop() still cleans up after it.
                log.exception("relay loop %s failed member=%s", name, self.member)
                if self._failure is None:
                    self._failure = exc
                self._failed.set()
                async with self._progress:
                    self._progress.notify_all()
                raise

        self._tasks.append(asyncio.create_task(guarded(), name=name))

    async def _connect(self, role: str) -> psycopg.AsyncConnection[Any]:
        return await connections.connect(self.sender.session.url, name=f"akter-relay-{role}")

    def _fields(self) -> dict[str, Any]:
        return {"member": self.member}

    async def _ownership_loop(self) -> None:
        conn: psycopg.AsyncConnection[Any] | None = None
        beat = self.settings.heartbeat

        async def tick() -> frozenset[int]:
            nonlocal conn
            try:
                if conn is None or conn.closed:
                    conn = await self._connect("ownership")
                if self._stopping.is_set():
                    # draining: out of the member set, holding only what the work in flight needs
                    return await self.ownership.hold(conn, self._holding())
                return await self.ownership.tick(conn)
            except BaseException:
                await connections.close(conn)
                conn = None
                raise

        try:
            # runs on while the relay drains (its work in flight keeps its buckets); stop()
            # cancels it once the drain is over, and _leave releases the rest
            while True:
                before = self.ownership.owned
                self._beat.clear()
                # a retry must come before the lease runs out: never wait longer than a beat
                owned = await persist(
                    "ownership heartbeat", tick, log=log, fields=self._fields(), wait_max=beat
                )
                self._owned_once.set()
                if owned - before:
                    self.wake()
                await _sleep_unless(self._beat, beat.total_seconds())
        finally:
            # also when cancelled mid-heartbeat by stop(): never leave the session to the GC
            await connections.close(conn)

    async def _leave(self) -> None:
        """Release every bucket and the member row now, so survivors take over at once. Bounded
        by the ownership lease: past it the leases have lapsed anyway."""
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            async with asyncio.timeout(self.settings.ownership_lease.total_seconds()):
                conn = await self._connect("leave")
                await self.ownership.leave(conn)
        except (psycopg.Error, TimeoutError) as exc:
            # The leases simply expire; survivors take over after the lease instead of at once.
            log.warning("could not release buckets member=%s error=%s", self.member, _one_line(exc))
        finally:
            self.ownership.owned = frozenset()
            self.ownership.valid_until = 0.0
            await connections.close(conn)

    async def _listen_loop(self) -> None:
        timeout = self.settings.listen_timeout.total_seconds()

        async def session() -> None:
            conn = await self._connect("listen")
            try:
                await conn.execute(f"LISTEN {queries.CHANNEL}")
                await conn.execute(f"LISTEN {queries.WAKE_CHANNEL}")
                # Notifications sent while we were not listening are lost: scan once.
                self.wake()
                while not self._stopping.is_set():
                    # Bounded, so a stop request or a dead socket is noticed within the timeout.
                    got = 0
                    async with contextlib.aclosing(conn.notifies(timeout=timeout)) as notes:
                        async for note in notes:
                            got += 1
                            if note.channel == queries.WAKE_CHANNEL or self._is_owned(note.payload):
                                self.wake()
                            if self._stopping.is_set():
                                break
                    if not got and not self._stopping.is_set():
                        await conn.execute("SELECT 1")  # a half-open connection fails here
            finally:
                await connections.close(conn)

        await self._persist("notification listener", session)

    async def _persist(self, what: str, step: Callable[[], Awaitable[T]]) -> T | None:
        """``persist`` the step, giving up (None) when a stop is requested while it fails."""
        try:
            return await persist(what, step, log=log, fields=self._fields(), until=self._stopping)
        except Exception:
            if self._stopping.is_set():
                return None
            raise

    def _is_owned(self, payload: str) -> bool:
        try:
            return int(payload) in self.owned()
        except ValueError:
            return True

    async def _dispatch_loop(self) -> None:
        await _wait_first(self._owned_once, self._stopping)
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
            claimed: list[Claimed] = []
            next_due: int | None = None
            if want > 0:
                result = await self._persist("claim", functools.partial(self._claim, want, probe))
                if result is None:
                    return  # stop requested while the database was failing
                claimed, next_due = result
            self._queue.extend(claimed)
            self._pump()
            if want > 0 and len(claimed) == want:
                continue  # more may be due: claim again at once
            if next_due is not None:
                # A row falls due within the poll interval: sleep until then.
                sleep = min(sleep, max(next_due / 1000, _RECHECK))
            if probe and not claimed and (next_due is None or next_due > 0):
                await self._mark_quiet(this_pass)
            await _wait_any(self._wake, self._stopping, sleep)

    async def _retention_loop(self) -> None:
        await _wait_first(self._owned_once, self._stopping)
        settings = self.settings
        while not self._stopping.is_set():
            await self._persist(
                "receipt retention",
                lambda: retention.prune_receipts(self.sender.pool, self.owned(), settings.retention_batch),
            )
            await _sleep_unless(self._stopping, settings.retention_every.total_seconds())

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
        async with self.sender.pool.connection() as conn:
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
        ok = await deliver(self.sender, self.settings, row, self._acks)
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
            await self._progress.wait_for(
                lambda: self._last_quiet_pass >= need or self._stopping.is_set() or self._failure is not None
            )
        if self._failure is not None:
            raise self._failure


_one_line = one_line


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

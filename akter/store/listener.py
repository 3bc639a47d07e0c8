"""One ``LISTEN`` connection per engine, shared by every waiter of its process.

``Listener`` holds one connection in ``LISTEN <channel>`` (never inside a transaction) and hands
each notification to the waiters subscribed to its payload. ``run.result()`` is its user: the
channel is ``akter_finished`` and the payload an execution id (``akter.workflow.client.run``), so a
process waiting for a thousand results holds one connection, not a thousand. The same
connection also listens on the channels passed as ``channels`` (the engine adds
``akter_events``, whose payload is an actor's routing key: ``akter.actor.subscribe``); a waiter
names its channel and payload.

The connection is opened on the first subscription, not when the engine starts, so a process
that never waits for a result holds no idle connection for it. A lost connection is an ordinary
event (invariant 12): the listener reconnects with jittered, capped backoff (``stamina``, so a
restart does not make every process reconnect in lockstep) and, once it listens again, wakes
*every* waiter, because a notification sent while it was down is lost for good. Waiters
therefore re-check the database on every wake, and also on a fallback interval of their own:
the listener only makes waiting fast, it is never what makes it correct.

A channel named in ``noting`` may carry a value with its key: a payload ``<text> <key>``
(``text`` without a space) hands ``Noted(text)`` to the subscribers of ``key``, which wakes
them as a notification would; a payload without a space is the key alone, a plain wake. The
engine's ``akter_finished`` is such a channel: a finish notifies its result with the execution
id when it is small (``sql/functions/akter_wf_finish.sql``), so a waiter in another process
needs no read after the wake. What the text means, and whether to trust it, is the waiter's
business; one it cannot use reads as always.

It is store code: it knows channels and payloads, nothing of executions or actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import psycopg
import stamina

from akter.errors import ConfigurationError
from akter.store.pool import connection_kwargs
from akter.store.sqlstate import is_connection_lost

log = logging.getLogger("akter.listener")


@attrs.frozen
class Noted:
    """A value a notification carried (``Listener(noting=...)``): its text, for the waiter to
    decode and check; the database's row stays the truth."""

    text: str


class Subscription:
    """One waiter's interest in one payload. ``clear()`` before re-checking the database, then
    ``wait()``: a notification or a reconnect that arrives in between is not lost."""

    def __init__(self, listener: Listener, key: str) -> None:
        self._listener = listener
        self.key = key
        self._event = asyncio.Event()
        #: what this process learned itself and handed over (``Listener.hand_over``), or what a
        #: notification carried (``Noted``), if anything
        self.value: object | None = None

    def clear(self) -> None:
        self._event.clear()

    def wake(self) -> None:
        self._event.set()

    def hand(self, value: object) -> None:
        self.value = value
        self._event.set()

    async def ready(self, seconds: float) -> None:
        """Wait (up to ``seconds``) until the listener listens, so a first check made after this
        cannot miss a notification sent after it. Returns early, without raising, when the
        database is unreachable: the waiter then falls back to polling."""
        await self._listener.listening(seconds)

    async def wait(self, seconds: float) -> bool:
        """True when notified or woken by a reconnect, False after ``seconds``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), seconds)
            return True
        return False


#: The listener's reconnect back-off (seconds): from 50 ms, doubling to 5 s, jittered by half,
#: so a restarted server is listened to again within its first seconds up without a stampede.
RECONNECT_INITIAL = 0.05
RECONNECT_MAX = 5.0
RECONNECT_JITTER = 0.5


class Listener:
    """``LISTEN channel`` on one connection of its own, serving every subscriber of this loop."""

    def __init__(
        self,
        url: str,
        channel: str,
        *,
        channels: tuple[str, ...] = (),
        noting: tuple[str, ...] = (),
        name: str = "akter-listener",
    ) -> None:
        self.url = url
        self.channel = channel
        #: every channel the one connection listens on: ``channel`` first, then ``channels``
        self.channels = (channel, *(c for c in channels if c != channel))
        #: channels whose payload may be ``<text> <key>``
        self.noting = frozenset(noting)
        self._listened = (*self.channels, *(c for c in noting if c not in self.channels))
        self.name = name
        self._waiters: dict[tuple[str, str], set[Subscription]] = {}
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: times a LISTEN was (re)established, for logs and tests
        self.connects = 0

    @contextlib.contextmanager
    def subscribe(self, key: str, *, channel: str | None = None) -> Iterator[Subscription]:
        """Subscribe to notifications on ``channel`` (the first channel by default) whose
        payload is ``key``, for the block's duration."""
        if self._closed:
            raise ConfigurationError("this App was closed: start it again to wait for results")
        where = (channel or self.channel, key)
        if where[0] not in self.channels:
            raise ConfigurationError(f"this listener does not listen on {where[0]!r}")
        self._ensure_running()
        sub = Subscription(self, key)
        self._waiters.setdefault(where, set()).add(sub)
        try:
            yield sub
        finally:
            waiters = self._waiters.get(where)
            if waiters is not None:
                waiters.discard(sub)
                if not waiters:
                    del self._waiters[where]

    def hand_over(self, key: str, value: object, *, channel: str | None = None) -> None:
        """Hand what this process learned itself (a pass here finished an execution) to the
        subscribers of ``key`` at once, without the round trip of the notification through the
        server. The notification still comes; a waiter given nothing re-checks the database as
        always, so a hand-over only ever makes waiting shorter."""
        for sub in tuple(self._waiters.get((channel or self.channel, key), ())):
            sub.hand(value)

    async def listening(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._listening.wait(), seconds)
            return True
        return False

    async def close(self) -> None:
        """Stop listening and close the connection; subscribers are woken. Idempotent."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._wake_all()

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._run(), name=f"{self.name} {self.channel}")
            self._task.add_done_callback(_report)

    def _dispatch(self, channel: str, payload: str) -> None:
        text, sep, key = payload.partition(" ") if channel in self.noting else ("", "", payload)
        for sub in tuple(self._waiters.get((channel, key if sep else payload), ())):
            if sep:
                sub.hand(Noted(text))
            else:
                sub.wake()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for sub in waiters:
                sub.wake()

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(self.url, **connection_kwargs(self.url, name=self.name))
        try:
            for channel in self._listened:
                await conn.execute(f"LISTEN {channel}")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _run(self) -> None:
        failures = 0
        while True:
            conn = None
            async for attempt in stamina.retry_context(
                on=is_connection_lost,
                attempts=None,
                timeout=None,
                wait_initial=RECONNECT_INITIAL,
                wait_max=RECONNECT_MAX,
                wait_jitter=RECONNECT_JITTER,
            ):
                with attempt:
                    try:
                        conn = await self._connect()
                    except psycopg.Error as exc:
                        if is_connection_lost(exc):
                            failures += 1
                            log.warning(
                                "result listener cannot connect (try %d): %s", failures, _one_line(exc)
                            )
                        raise
            if conn is None:  # pragma: no cover -- the retry loop above returns a connection or raises
                raise RuntimeError("the result listener's retry loop ended without a connection")
            try:
                self.connects += 1
                failures = 0
                self._listening.set()
                # Whatever was notified while nobody listened is lost: every waiter re-checks.
                self._wake_all()
                async for note in conn.notifies():
                    self._dispatch(note.channel, note.payload)
            except psycopg.Error as exc:
                if not is_connection_lost(exc):
                    raise
                log.warning("result listener lost its connection, reconnecting: %s", _one_line(exc))
            finally:
                self._listening.clear()
                with contextlib.suppress(psycopg.Error):
                    await conn.close()


def _report(task: asyncio.Task[None]) -> None:
    # A bug, not an outage: say so. Waiters still poll; the next subscription starts a new task.
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("result listener failed", exc_info=exc)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__

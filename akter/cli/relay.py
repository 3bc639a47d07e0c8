"""``akter relay APP``: the relay process for an App, until SIGTERM or SIGINT.

It waits for PostgreSQL with backoff (invariant 12), applies the migrations, runs the deploy
check (``akter.workflow.tools.check``) and refuses to start, exit 1 with the check's report, when this
code cannot replay every open execution or would misread stored data; then it runs the App's
relay (``App.relay``, the same relay, gauges and drain as in process) until asked to stop.

The first SIGTERM or SIGINT drains (``Relay.stop``): no new claims or attempts, the work in
flight finishes and is recorded, the buckets go to the other relays at once, exit 0 — also when
``--drain-timeout`` ran out first (what was still running is abandoned and recovered by its
leases, as a Temporal worker's graceful stop timeout cancels its activities and stops cleanly).
A second signal forces the stop at once, with the same abandonment, and exits 128 + the signal's
number, as a process killed by that signal would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from datetime import timedelta
from typing import Any

import click
import psycopg
import psycopg_pool

from akter import logs
from akter.cli import support
from akter.cli.support import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, fail_with, load_app, one_line
from akter.errors import AkterError, ConfigurationError, DatabaseUnavailable, IncompatibleStoredData

log = logging.getLogger("akter.cli")


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


@click.command()
@click.argument("app_path", metavar="APP")
@click.option(
    "--database-url",
    help="PostgreSQL URL; overrides the App's own URL, which overrides AKTER_DATABASE_URL.",
)
@click.option(
    "--concurrency",
    envvar="AKTER_RELAY_CONCURRENCY",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Deliveries in flight at once (AKTER_RELAY_CONCURRENCY).",
)
@click.option(
    "--batch-size",
    envvar="AKTER_RELAY_BATCH_SIZE",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Rows claimed per statement at most (AKTER_RELAY_BATCH_SIZE).",
)
@click.option(
    "--poll-interval",
    envvar="AKTER_RELAY_POLL_INTERVAL",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Seconds between scans when no notification arrives (AKTER_RELAY_POLL_INTERVAL).",
)
@click.option(
    "--claim-lease",
    envvar="AKTER_RELAY_CLAIM_LEASE",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds a claimed row waits before another relay may retry it (AKTER_RELAY_CLAIM_LEASE).",
)
@click.option(
    "--heartbeat",
    envvar="AKTER_RELAY_HEARTBEAT",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Seconds between ownership heartbeats (AKTER_RELAY_HEARTBEAT).",
)
@click.option(
    "--ownership-lease",
    envvar="AKTER_RELAY_OWNERSHIP_LEASE",
    type=click.FloatRange(min=0, min_open=True),
    default=4.0,
    show_default=True,
    help="Seconds a bucket lease lasts without renewal (AKTER_RELAY_OWNERSHIP_LEASE).",
)
@click.option(
    "--max-attempts",
    envvar="AKTER_RELAY_MAX_ATTEMPTS",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Failed deliveries before an intent is parked for an operator (AKTER_RELAY_MAX_ATTEMPTS).",
)
@click.option(
    "--drain-timeout",
    envvar="AKTER_RELAY_DRAIN_TIMEOUT",
    type=click.FloatRange(min=0),
    default=25.0,
    show_default=True,
    help="Seconds a SIGTERM lets work in flight finish before abandoning it (AKTER_RELAY_DRAIN_TIMEOUT).",
)
@click.option(
    "--no-notifications",
    is_flag=True,
    envvar="AKTER_RELAY_NO_NOTIFICATIONS",
    help="Poll only; do not LISTEN (AKTER_RELAY_NO_NOTIFICATIONS).",
)
@click.option(
    "--log-format",
    envvar="AKTER_LOG_FORMAT",
    type=click.Choice(logs.FORMATS, case_sensitive=False),
    default="text",
    show_default=True,
    help="text for people, json (one object a line, with fields) for machines (AKTER_LOG_FORMAT).",
)
def relay(
    *,
    app_path: str,
    database_url: str | None,
    concurrency: int,
    batch_size: int,
    poll_interval: float,
    claim_lease: float,
    heartbeat: float,
    ownership_lease: float,
    max_attempts: int,
    drain_timeout: float,
    no_notifications: bool,
    log_format: str,
) -> None:
    """Run the relay for APP (module:attribute naming an akter.App) until SIGTERM or SIGINT.

    Claims due outbox rows of the buckets this process owns and delivers them as turns. Any
    number of relay processes may share one database. On SIGTERM it drains: it stops claiming,
    lets deliveries, workflow passes and activity attempts in flight finish and records them (at
    most --drain-timeout), releases its buckets and exits 0. A second signal stops it at once."""
    from akter.outbox.relay import RelaySettings

    logs.configure(fmt=log_format)
    try:
        settings = RelaySettings(
            concurrency=concurrency,
            batch_size=batch_size,
            poll_interval=_seconds(poll_interval),
            claim_lease=_seconds(claim_lease),
            heartbeat=_seconds(heartbeat),
            ownership_lease=_seconds(ownership_lease),
            max_attempts=max_attempts,
            notifications=not no_notifications,
            drain_timeout=_seconds(drain_timeout),
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        app = load_app(app_path)
        app.database_url = support.database_url(database_url, app=app)
    except ConfigurationError as exc:
        fail_with(exc)
    sys.exit(asyncio.run(_run_relay(app, settings)))


async def _open_when_reachable(app: Any, stop: asyncio.Event) -> Any:
    """The App's engine, once PostgreSQL answers. A database that is down or still starting is
    an ordinary event (invariant 12): the relay says so in its log and tries again, with
    jittered, capped backoff, until it connects or is asked to stop (None then). Anything else
    (a bad URL, a schema this akter cannot use) is raised at once."""
    import stamina

    from akter.store.sqlstate import is_connection_lost

    def unreachable(exc: Exception) -> bool:
        return isinstance(exc, DatabaseUnavailable | psycopg_pool.PoolTimeout) or is_connection_lost(exc)

    tries = 0
    async for attempt in stamina.retry_context(
        on=unreachable, attempts=None, timeout=None, wait_initial=0.2, wait_max=5.0, wait_jitter=0.5
    ):
        with attempt:
            if stop.is_set():
                return None
            tries += 1
            try:
                await app.start(migrate=True)  # a relay applies the migrations at start-up
                return await app.engine()
            except Exception as exc:
                if unreachable(exc):
                    log.warning("waiting for PostgreSQL (try %d): %s", tries, one_line(exc))
                raise
    return None  # pragma: no cover -- the loop above never ends without returning or raising


class _Signals:
    """SIGTERM and SIGINT: the first asks for a drain (``stop``), a second forces the relay."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.relay: Any = None
        #: the signal that forced the stop, if one did
        self.forced: int | None = None

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # not when embedded in a test's thread
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.received, sig)

    def received(self, sig: int) -> None:
        if not self.stop.is_set():
            self.stop.set()
            return
        if self.relay is not None and self.forced is None:
            log.warning("second %s: stopping now; the work in flight is abandoned", signal.Signals(sig).name)
            self.forced = sig
            self.relay.force()


async def _run_relay(app: Any, settings: Any) -> int:
    signals = _Signals()
    signals.install(asyncio.get_running_loop())
    stop = signals.stop
    try:
        opening = asyncio.ensure_future(_open_when_reachable(app, stop))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([opening, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not opening.done():
            opening.cancel()
            await asyncio.gather(opening, return_exceptions=True)
            log.info("stopped before PostgreSQL could be reached")
            return EXIT_OK
        engine = opening.result()
        if engine is None:
            return EXIT_OK
    except IncompatibleStoredData as exc:
        # refused like the workflow check below refuses: the same report, the same exit code
        log.error("the relay refuses to start: this code would misread stored data")  # noqa: TRY400
        click.echo(exc.report, err=True)
        return EXIT_FAILURE
    except (AkterError, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        # an expected refusal (no database, schema too new): the message says it all
        if isinstance(exc, psycopg.OperationalError):
            exc = support.cannot_connect(exc, app.database_url)
        click.echo(f"akter: cannot start the relay: {one_line(exc)}", err=True)
        return EXIT_USAGE
    if refused := await _workflow_check(app, engine):
        await app.close()
        return refused
    code = EXIT_OK
    abandoned = False
    try:
        # the App's own relay: the gauges, plugins and drain of ``app.relay()``, one code path
        async with app.relay(settings) as relay:
            signals.relay = relay
            waiter = asyncio.ensure_future(stop.wait())
            failed = asyncio.ensure_future(relay.wait())
            done, _ = await asyncio.wait([waiter, failed], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if failed in done and failed.exception() is not None:
                code = EXIT_FAILURE
            failed.cancel()
        abandoned = relay.abandoned
    finally:
        await app.close()
    if signals.forced is not None and abandoned:  # a drain that finished anyway exits as one
        code = 128 + signals.forced
    if abandoned and threading.current_thread() is threading.main_thread():
        # An abandoned synchronous activity still runs in a worker thread, which the interpreter
        # would wait for at exit: the drain is over, so leave without it.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


async def _workflow_check(app: Any, engine: Any) -> int:
    """The deploy check at start-up (``akter.workflow.tools.check``) on the App's own pool: 0 to go
    on, else the exit code."""
    from akter.workflow.tools import check

    try:
        async with engine.sender.pool.connection() as conn:
            report = await check.check(conn, app.actors.values())
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        click.echo(f"akter: cannot run the workflow check: {one_line(exc)}", err=True)
        return EXIT_USAGE
    if not report.compatible:
        log.error("the relay refuses to start: this code cannot replay every open execution")
        click.echo(report.text(), err=True)
        return EXIT_FAILURE
    log.info("workflow check: %s", report.text())
    return EXIT_OK

"""``akter relay APP``: the relay process for an App, until SIGTERM or SIGINT.

It waits for PostgreSQL with backoff (invariant 12), applies the migrations, runs the deploy
check (``akter.workflow.check``) and refuses to start, exit 1 with the check's report, when this
code cannot replay every open execution or would misread stored data; then it runs
``akter.outbox.relay.Relay`` until asked to stop, and drains.
"""

from __future__ import annotations

import asyncio
import logging
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
    no_notifications: bool,
    log_format: str,
) -> None:
    """Run the relay for APP (module:attribute naming an akter.App) until SIGTERM or SIGINT.

    Claims due outbox rows of the buckets this process owns and delivers them as turns. Any
    number of relay processes may share one database. On SIGTERM it stops claiming, lets
    deliveries in flight finish, releases its buckets and exits 0."""
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


async def _run_relay(app: Any, settings: Any) -> int:
    from akter.outbox.relay import Relay

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    if threading.current_thread() is threading.main_thread():  # not when embedded in a test's thread
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
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
    relay = Relay(engine.sender, settings, plugins=app.plugins_for_relay())
    code = EXIT_OK
    try:
        await relay.start()
        waiter = asyncio.ensure_future(stop.wait())
        failed = asyncio.ensure_future(relay.wait())
        done, _ = await asyncio.wait([waiter, failed], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if failed in done and failed.exception() is not None:
            code = EXIT_FAILURE
        failed.cancel()
    finally:
        await relay.stop()
        await app.close()
    return code


async def _workflow_check(app: Any, engine: Any) -> int:
    """The deploy check at start-up (``akter.workflow.check``) on the App's own pool: 0 to go
    on, else the exit code."""
    from akter.workflow import check

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

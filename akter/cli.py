"""The ``akter`` command: one click group, one subcommand per operational task.

``akter migrate`` applies the schema (``akter.store.migrate``); ``akter relay APP`` runs the relay
process (``akter.outbox.relay``) for an ``akter.App`` named ``module:attribute``, imported from
the current directory first (``akter.cli_support.load_app``). Each subcommand reads its settings
from flags first, then ``AKTER_*`` environment variables. Exit codes mean the same for every
subcommand::

    0    done (the relay drained after SIGTERM or SIGINT; the check found the deploy compatible)
    1    the command's answer is no: ``workflows check`` refused, ``inspect`` found nothing,
         ``relay`` refused to start or stopped on a failure in one of its loops (the log says where)
    2    usage, configuration, input or database errors (bad flags, APP not found, a malformed
         id, no usable database, schema too new), as one ``akter: <message>`` line on stderr or
         click's usage message — nothing was done
    3    akter itself failed (a bug): its traceback, then an ``akter: internal error`` line
    130  interrupted (Ctrl-C) before it finished

``akter workflows check APP`` is the deploy check (``akter.workflow.check``): 0 compatible, 1
refused, 2 usage or database errors. ``akter relay`` runs the same check before it starts and
exits 1 with the same report when it refuses (an App whose actor types would misread stored
data is refused as its runtime opens, with that report too).

``akter outbox retry|delete ID`` (``akter.outbox.admin``) acts on intents the relay parked as
undeliverable; ``akter inspect parked`` lists them.

Logs go to stderr as ``time level logger message key=value ...`` lines, or as one JSON object a
line with ``akter relay --log-format json`` or ``AKTER_LOG_FORMAT=json`` (``akter.logs``).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading
import traceback
from datetime import timedelta
from typing import Any

import click
import psycopg
import psycopg_pool

from akter import cli_support, logs
from akter.cli_support import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, fail, fail_with, load_app, one_line
from akter.errors import AkterError, ConfigurationError, DatabaseUnavailable, IncompatibleStoredData
from akter.workflow.check import workflows

__all__ = ["EXIT_FAILURE", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "load_app", "main"]

EXIT_OK = 0
EXIT_FAILURE = 1

log = logging.getLogger("akter.cli")


def _setup_logging(level: str) -> None:
    try:
        logs.configure(level)  # the format from AKTER_LOG_FORMAT, text by default
    except ConfigurationError as exc:
        fail_with(exc)
    # akter's loops log every retry themselves, with fields; stamina's own "retry_scheduled"
    # record would say it twice. The process is the CLI's own, so the process-wide setting is ours.
    import stamina.instrumentation

    stamina.instrumentation.set_on_retry_hooks([])


class _Akter(click.Group):
    """The ``akter`` group. A crash of akter itself exits 3 with its traceback and Ctrl-C exits
    130, so that neither reads as a command's answer: 1 is ``workflows check`` refusing a
    deploy, and a deploy script must not take a bug for a refusal."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own: usage errors exit 2 with click's message
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            raise  # stdout's reader left (``| head``): click exits quietly
        except Exception as exc:
            traceback.print_exc()
            summary = traceback.format_exception_only(type(exc), exc)[-1].strip()
            fail(f"internal error: {summary} (a bug in akter; the traceback above says where)", EXIT_INTERNAL)


@click.group(
    cls=_Akter,
    epilog="Exit codes: 0 done, 1 the answer is no (check refused, inspect found nothing, relay "
    "failed), 2 usage/configuration/input/database error, 3 akter crashed (a bug), 130 interrupted.",
)
@click.option(
    "--log-level",
    envvar="AKTER_LOG_LEVEL",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    help="Log level (AKTER_LOG_LEVEL).",
)
def main(log_level: str) -> None:
    """akter: durable workflows as members of actors, stored in PostgreSQL."""
    _setup_logging(log_level)


@main.command()
@click.option(
    "--database-url",
    envvar="AKTER_DATABASE_URL",
    help="PostgreSQL URL (AKTER_DATABASE_URL); without one, the embedded server.",
)
def migrate(database_url: str | None) -> None:
    """Apply akter's schema migrations to the database (also done when an App starts).

    Exit 0 when the schema is current, 2 when the database cannot be reached or was migrated
    by a newer akter."""
    from akter.store.database import describe
    from akter.store.migrate import migrate as apply

    try:
        url = cli_support.database_url(database_url, flag_source=cli_support.flag_source())
    except ConfigurationError as exc:
        fail_with(exc)
    try:
        applied = apply(url)
    except AkterError as exc:
        fail(one_line(exc))
    except psycopg.OperationalError as exc:
        fail_with(cli_support.cannot_connect(exc, url))
    except psycopg.Error as exc:
        fail(f"migrating {describe(url)} failed: {one_line(exc)}")
    click.echo(f"migrated {describe(url)}: applied {applied or 'nothing (already current)'}")


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


@main.command()
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
        app.database_url = cli_support.database_url(database_url, app=app)
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
            exc = cli_support.cannot_connect(exc, app.database_url)
        click.echo(f"akter: cannot start the relay: {one_line(exc)}", err=True)
        return EXIT_USAGE
    if refused := await _workflow_check(app):
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


async def _workflow_check(app: Any) -> int:
    """The deploy check at start-up (``akter.workflow.check``): 0 to go on, else the exit code."""
    from akter.workflow.check import EXIT_ERROR, EXIT_REFUSED, startup_check

    try:
        report = await startup_check(app)
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        click.echo(f"akter: cannot run the workflow check: {one_line(exc)}", err=True)
        return EXIT_ERROR
    if not report.compatible:
        log.error("the relay refuses to start: this code cannot replay every open execution")
        click.echo(report.text(), err=True)
        return EXIT_REFUSED
    log.info("workflow check: %s", report.text())
    return EXIT_OK


def _register_tools() -> None:
    # Commands whose code lives beside what they show (the demo app, the inspect views).
    from akter.demo import demo_command
    from akter.inspect import inspect_group

    main.add_command(demo_command)
    main.add_command(inspect_group)
    # parked intents: `akter inspect parked`, `akter outbox retry|delete` (akter.outbox.admin)
    from akter.outbox.admin import inspect_parked, outbox_group

    inspect_group.add_command(inspect_parked)
    main.add_command(outbox_group)
    from akter.cli_ui import ui_command  # the inspector page (akter.ui)

    main.add_command(ui_command)


_register_tools()
main.add_command(workflows)


if __name__ == "__main__":
    main()

"""``akter demo``: run the demo app (``akter.demo``) and narrate what akter stores."""

from __future__ import annotations

import asyncio
import logging
import sys

import click
import psycopg
import psycopg_pool
from click.core import ParameterSource

import akter
from akter import demo
from akter.cli import support
from akter.cli.support import EXIT_FAILURE, EXIT_OK, EXIT_USAGE


@click.command("demo")
@click.option(
    "--database-url",
    envvar="AKTER_DATABASE_URL",
    help="PostgreSQL URL (AKTER_DATABASE_URL); without one, the embedded server.",
)
def demo_command(database_url: str | None) -> None:
    """Run a small order workflow end to end and narrate what akter stores.

    Starts the embedded PostgreSQL when no database is configured, runs the relay in this
    process, and plays three orders: paid and shipped, cancelled during the cool-off (its
    compensation gives the stock back), and unpaid past its deadline. Takes a few seconds.
    Exit 0 when every order ends as expected, 1 when one does not, 2 when the database is not
    usable."""
    parent = click.get_current_context().parent
    if parent is not None and parent.get_parameter_source("log_level") is ParameterSource.DEFAULT:
        # The narration is this command's output; info logs (the embedded server's start-up, the
        # relay's) would interleave with it on a terminal. An explicit --log-level still applies.
        logging.getLogger().setLevel(logging.WARNING)
    if database_url:
        try:
            support.checked_url(database_url, support.flag_source())
        except akter.ConfigurationError as exc:
            support.fail_with(exc)
    try:
        run = asyncio.run(demo.run_demo(database_url, click.echo))
    except (
        akter.ConfigurationError,
        akter.SchemaError,
        akter.DatabaseUnavailable,
        psycopg.OperationalError,
        psycopg_pool.PoolTimeout,
    ) as exc:
        click.echo(f"akter: the demo cannot use the database: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except demo.DemoStuck as exc:
        click.echo(f"akter: the demo got stuck: {exc} within {demo.STEP_TIMEOUT:.0f}s", err=True)
        sys.exit(EXIT_FAILURE)
    sys.exit(EXIT_OK if run.ok else EXIT_FAILURE)

"""``akter migrate``: apply akter's schema migrations (``akter.store.migrate``)."""

from __future__ import annotations

import click
import psycopg

from akter.cli import support
from akter.cli.support import fail, fail_with, one_line
from akter.errors import AkterError, ConfigurationError


@click.command()
@click.option(
    "--database-url",
    envvar="AKTER_DATABASE_URL",
    help="PostgreSQL URL (AKTER_DATABASE_URL); without one, the embedded server.",
)
@click.option(
    "--reset",
    is_flag=True,
    help="Drop every akter table (with all its data) and routine first: for a development database.",
)
def migrate(database_url: str | None, reset: bool) -> None:
    """Apply akter's schema migrations to the database (also done when an App starts).

    Exit 0 when the schema is current, 2 when the database cannot be reached or was migrated
    by a newer akter."""
    from akter.store.database import describe
    from akter.store.migrate import migrate as apply
    from akter.store.migrate import reset as drop_all

    try:
        url = support.database_url(database_url, flag_source=support.flag_source())
    except ConfigurationError as exc:
        fail_with(exc)
    try:
        if reset:
            drop_all(url)
        applied = apply(url)
    except AkterError as exc:
        fail(one_line(exc))
    except psycopg.OperationalError as exc:
        fail_with(support.cannot_connect(exc, url))
    except psycopg.Error as exc:
        fail(f"migrating {describe(url)} failed: {one_line(exc)}")
    click.echo(f"migrated {describe(url)}: applied {applied or 'nothing (already current)'}")

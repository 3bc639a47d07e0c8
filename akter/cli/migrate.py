"""``akter migrate``: apply akter's schema migrations (``akter.store.migrate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
import psycopg

from akter.cli import support
from akter.cli.support import fail, fail_with, one_line
from akter.errors import AkterError, ConfigurationError

if TYPE_CHECKING:
    from akter.store.migrate import Migrated


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
        done = apply(url)
    except AkterError as exc:
        fail(one_line(exc))
    except psycopg.OperationalError as exc:
        fail_with(support.cannot_connect(exc, url))
    except psycopg.Error as exc:
        fail(f"migrating {describe(url)} failed: {one_line(exc)}")
    click.echo(f"migrated {describe(url)}: {report(done)}")


def report(done: Migrated) -> str:
    """What ``akter migrate`` changed, in one line: the migrations and routines it applied, the
    routines it applied again (their file changed) and those it dropped (their file is gone) —
    a few named, many counted, as when a fresh database gets every routine — or that nothing
    needed doing."""
    applied = [_listed("migration", [f"{v:03d}" for v in done.versions]), _listed("routine", done.routines)]
    parts = [
        ("applied " + ", ".join(p for p in applied if p)) if any(applied) else "",
        "re-applied " + _listed("changed routine", done.reapplied) if done.reapplied else "",
        "dropped " + _listed("routine", done.dropped) + " (no file)" if done.dropped else "",
    ]
    return "; ".join(p for p in parts if p) or "applied nothing (already current)"


def _listed(noun: str, names: list[str], most: int = 5) -> str:
    if not names:
        return ""
    if len(names) > most:
        return f"{len(names)} {noun}s"
    return f"{noun}{'s' if len(names) > 1 else ''} {', '.join(names)}"

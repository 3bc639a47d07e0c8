"""``akter outbox retry|delete`` and ``akter inspect parked``: the operator's commands over parked
intents (``akter.outbox.admin`` holds the reads and the writes they run)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click
import psycopg
from returns.result import Failure, Result, Success

from akter.cli.support import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, one_line
from akter.errors import AkterError
from akter.outbox.admin import ParkedIntent, delete, parked_json, read_parked, render_parked, retry

T = TypeVar("T")


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"akter: {message}", err=True)
    sys.exit(code)


def _run(database_url: str | None, action: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    from akter.store.database import resolve_database_url

    async def run() -> T:
        async with await psycopg.AsyncConnection.connect(
            url, autocommit=True, application_name="akter-outbox"
        ) as conn:
            return await action(conn)

    try:
        url = resolve_database_url(database_url)
        return asyncio.run(run())
    except psycopg.errors.UndefinedColumn:
        _fail("the database's schema predates parked intents (run `akter migrate`)")
    except psycopg.errors.UndefinedTable:
        _fail("the database has no akter schema (run `akter migrate`, or check the URL)")
    except (AkterError, psycopg.Error) as exc:
        _fail(f"cannot use the database: {one_line(exc)}")


_database_option = click.option(
    "--database-url",
    envvar="AKTER_DATABASE_URL",
    help="PostgreSQL URL (AKTER_DATABASE_URL); without one, the embedded server.",
)


@click.command("parked")
@click.option("--tenant", help="Only this tenant's intents.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@_database_option
def inspect_parked(*, tenant: str | None, limit: int, as_json: bool, database_url: str | None) -> None:
    """Outbox intents the relay parked as undeliverable, most recent first, with the reason.

    Fix the cause, then `akter outbox retry ID` (or `akter outbox delete ID`)."""
    parked = _run(database_url, lambda conn: read_parked(conn, tenant=tenant, limit=limit))
    click.echo(parked_json(parked) if as_json else render_parked(parked))


@click.group("outbox", epilog="Exit codes: 0 done, 1 refused (see the message), 2 usage/database error.")
def outbox_group() -> None:
    """Operate on parked outbox intents (list them with `akter inspect parked`)."""


def _each(ids: Sequence[str], done: str, act: Callable[[str], Result[ParkedIntent, str]]) -> None:
    refused = 0
    for intent_id in ids:
        match act(intent_id):
            case Success(parked):
                click.echo(
                    f"{done} {parked.intent_id}: {parked.command} from {parked.sender} to {parked.target}"
                )
            case Failure(reason):
                refused += 1
                click.echo(f"akter: {reason}", err=True)
    sys.exit(EXIT_FAILURE if refused else EXIT_OK)


@outbox_group.command("retry")
@click.argument("intent_ids", metavar="ID...", nargs=-1, required=True)
@click.option(
    "--new-id",
    is_flag=True,
    help="Deliver an intent whose id expired under a fresh id (its receiver cannot deduplicate it).",
)
@_database_option
def retry_command(*, intent_ids: tuple[str, ...], new_id: bool, database_url: str | None) -> None:
    """Make parked intents due now, under their own ids, with a fresh attempt budget."""
    _each(intent_ids, "due now:", lambda i: _run(database_url, lambda conn: retry(conn, i, new_id=new_id)))


@outbox_group.command("delete")
@click.argument("intent_ids", metavar="ID...", nargs=-1, required=True)
@click.option("--force", is_flag=True, help="Also delete akter's own intents (a workflow's resume timer).")
@_database_option
def delete_command(*, intent_ids: tuple[str, ...], force: bool, database_url: str | None) -> None:
    """Delete parked intents; they are never delivered."""
    _each(intent_ids, "deleted", lambda i: _run(database_url, lambda conn: delete(conn, i, force=force)))

"""``akter inspect``: read-only views of stored actors and executions (``akter.inspect``).

``actor`` and ``execution`` read one view in one snapshot and print it as text or ``--json``;
``parked`` (``akter.outbox.admin``) lists the intents the relay parked. Exit 0 shown, 1 nothing
matched, 2 usage, configuration or database errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
import psycopg

from akter.cli import support
from akter.cli.outbox import inspect_parked
from akter.cli.support import fail as _fail
from akter.cli.support import one_line
from akter.errors import AkterError, ConfigurationError
from akter.ids import ActorRef, ExecutionId
from akter.inspect.limits import DEFAULT_LIMIT, MAX_LIMIT
from akter.inspect.read import connect, read_actor, read_execution
from akter.inspect.render import render_actor, render_execution, to_json

if TYPE_CHECKING:
    from akter.app import App

database_option = click.option(
    "--database-url",
    help="PostgreSQL URL; overrides the App's own URL, which overrides AKTER_DATABASE_URL.",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")


def load_app_url(app_path: str, database_url: str | None) -> tuple[App, str]:
    try:
        app = support.load_app(app_path)
        url = support.database_url(database_url, app=app)
    except ConfigurationError as exc:
        support.fail_with(exc)
    return app, url


def read_view(url: str, read: Callable[[psycopg.AsyncConnection[Any]], Any]) -> Any:
    async def run() -> Any:
        try:
            conn = await connect(url)
        except psycopg.OperationalError as exc:
            raise support.cannot_connect(exc, url) from exc
        async with conn:
            return await read(conn)

    try:
        return asyncio.run(run())
    except ConfigurationError as exc:
        support.fail_with(exc)
    except psycopg.Error as exc:
        support.fail_with(support.database_problem(exc, url))


def parse_execution_id(text: str) -> ExecutionId:
    try:
        return ExecutionId.parse(text)
    except AkterError as exc:
        _fail(one_line(exc))


@click.group(
    "inspect",
    cls=support.JsonGroup,
    epilog="Exit codes: 0 shown, 1 no such actor or execution, 2 usage/configuration/database error.",
)
def inspect_group() -> None:
    """Read-only views of stored actors and executions, decoded with APP's declarations.

    APP is module:attribute naming an akter.App. Rows that do not decode (corrupt, or declared
    no longer) are shown as undecodable, with the reason and the stored JSON."""


@inspect_group.command("actor")
@click.argument("app_path", metavar="APP")
@click.argument("tenant")
@click.argument("actor_type", metavar="TYPE")
@click.argument("actor_id", metavar="ID")
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=MAX_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Newest rows shown per section.",
)
@database_option
@json_option
def inspect_actor(
    *,
    app_path: str,
    tenant: str,
    actor_type: str,
    actor_id: str,
    limit: int,
    database_url: str | None,
    as_json: bool,
) -> None:
    """An actor's state, executions, receipts, events and outbox rows."""
    try:
        ref = ActorRef(tenant=tenant, actor_type=actor_type, actor_id=actor_id)
    except AkterError as exc:
        _fail(one_line(exc))
    app, url = load_app_url(app_path, database_url)
    view = read_view(url, lambda conn: read_actor(conn, app, ref, limit=limit))
    if view is None:
        declared = (
            "" if actor_type in app.actors else f" ({app_path} declares {', '.join(sorted(app.actors))})"
        )
        _fail(f"no actor {ref} is stored: it never committed a turn{declared}", support.EXIT_FAILURE)
    click.echo(to_json(view) if as_json else render_actor(view))


@inspect_group.command("execution")
@click.argument("app_path", metavar="APP")
@click.argument("execution_id")
@database_option
@json_option
def inspect_execution(*, app_path: str, execution_id: str, database_url: str | None, as_json: bool) -> None:
    """A workflow execution: its record, decoded steps and timer."""
    eid = parse_execution_id(execution_id)
    app, url = load_app_url(app_path, database_url)
    view = read_view(url, lambda conn: read_execution(conn, app, eid))
    if view is None:
        _fail(
            f"no execution {execution_id} is stored (never started, or pruned after retention)",
            support.EXIT_FAILURE,
        )
    click.echo(to_json(view) if as_json else render_execution(view))


# parked intents: `akter inspect parked` (akter.outbox.admin)
inspect_group.add_command(inspect_parked)

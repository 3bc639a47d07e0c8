"""``akter workflows check APP``: the deploy check (``akter.workflow.tools.check``) as a command.

It prints the check's report (text, or ``--json``) and exits on it: 0 compatible, 1 refused, 2
usage or database errors. It reads through its own connection, never the App's runtime: a deploy
check must not migrate the database it inspects (the code being checked may carry migrations
not applied yet).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING

import click
import psycopg

from akter.cli import support
from akter.cli.support import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from akter.errors import AkterError, ConfigurationError
from akter.workflow.tools import check

if TYPE_CHECKING:
    from akter.app import App


@click.group(cls=support.JsonGroup)
def workflows() -> None:
    """Workflow tools: the deploy check, the replay check."""


@workflows.command("check")
@click.argument("app_path", metavar="APP")
@click.option(
    "--database-url",
    help="PostgreSQL URL; overrides the App's own URL, which overrides AKTER_DATABASE_URL.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check_command(app_path: str, database_url: str | None, *, as_json: bool) -> None:
    """Would deploying APP strand open executions? APP is module:attribute naming an akter.App.

    Compares APP's workflow declarations with every open execution in the database and
    refuses when one of them could not be replayed: its actor type, workflow or start manifest
    is gone; a step it started with was removed, renamed or changed kind; a step it recorded
    changed its result schema; its payload schema changed; a version marker it recorded is no
    longer declared or outside min..current, or it predates a marker whose min is above 0.
    Refusals are grouped by actor type, workflow and reason, with counts, the oldest start time
    and what to do. It also refuses when APP's actor types would misread stored data: a state
    field removed or renamed without an upgrade, or of another type; an event type removed or
    changed while events of it are stored; a command payload changed while undelivered intents
    carry it — with the number of stored rows. A compatible check stores APP's manifests as
    accepted.

    Exit 0 compatible, 1 refused, 2 usage or database errors, 3 a crash (a bug in akter)."""
    try:
        app = support.load_app(app_path)
        url = support.database_url(database_url, app=app)
    except ConfigurationError as exc:
        support.fail_with(exc)
    try:
        report = asyncio.run(_check_url(app, url))
    except ConfigurationError as exc:
        support.fail_with(exc)
    except AkterError as exc:
        support.fail(support.one_line(exc), EXIT_USAGE, kind=type(exc).__name__)
    except psycopg.Error as exc:
        support.fail_with(support.database_problem(exc, url))
    if as_json:
        click.echo(json.dumps(report.data(), indent=2))
    else:
        click.echo(report.text())
    sys.exit(EXIT_OK if report.compatible else EXIT_FAILURE)


async def _check_url(app: App, url: str) -> check.Report:
    from akter.store.pool import connection_kwargs

    kwargs = connection_kwargs(url, name="akter-workflows-check")
    try:
        conn = await psycopg.AsyncConnection.connect(url, **kwargs)
    except psycopg.OperationalError as exc:
        raise support.cannot_connect(exc, url) from exc
    async with conn:
        return await check.check(conn, app.actors.values())


def _add_replay() -> None:
    from akter.cli.replay import replay

    workflows.add_command(replay)


_add_replay()
